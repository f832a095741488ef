"""Asynchronous successive halving (ASHA): who goes on out of a rung.

Li et al., "A System for Massively Parallel Hyperparameter Tuning" (2020). A trial that
reaches a rung is compared once with the trials recorded at that rung so far and either
goes on or stops there; no worker waits for a rung to fill.

The rung is ordered by loss, best first, and its top max(1, ⌊n/η⌋) of the n trials recorded
so far (the arriving one included) go on: Optuna's ``SuccessiveHalvingPruner``'s rule. A
NaN loss never goes on. The alternatives measured against it (ASHA's ⌈n/η⌉, promotion by a
share of the rung's dollars, by (loss, dollars) Pareto fronts) were dearer on at least one
family of curves (``benchmarks/RESULTS.md``) and live in ``benchmarks/lab/``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from costtune.errors import ConfigError


def promoted_count(n: int, eta: int) -> int:
    """How many of the ``n`` trials recorded at a rung go on: max(1, ⌊n/η⌋)."""
    return max(1, n // eta)


@dataclass(frozen=True, slots=True)
class RungEntry:
    """A trial as recorded at a rung: its loss (lower is better) and dollars spent so far."""

    loss: float
    cost_usd: float


class Rung(Mapping[str, RungEntry]):
    """The trials recorded at one rung, kept in promotion order for O(log n) look-ups.

    A read-only mapping (trial id → :class:`RungEntry`) plus :meth:`record`. Entries are
    held sorted by (loss, id) in blocks of a few hundred, so that the count ranked ahead of a
    trial is a bisection and a sum over block lengths — instead of a pass over the whole rung
    per arrival. The answers are those of :func:`is_promotable` on a plain dict (property
    test).
    """

    _BLOCK = 256

    def __init__(self, entries: Iterable[tuple[str, RungEntry]] = ()) -> None:
        self._entries: dict[str, RungEntry] = {}
        self._keys: list[list[tuple[float, str]]] = []  # blocks of sorted (loss key, id)
        self._maxes: list[tuple[float, str]] = []  # each block's last key
        for trial_id, entry in entries:
            self.record(trial_id, entry)

    def __getitem__(self, trial_id: str) -> RungEntry:
        return self._entries[trial_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, trial_id: object) -> bool:
        return trial_id in self._entries

    def record(self, trial_id: str, entry: RungEntry) -> None:
        """Add a trial that reached this rung (once per trial)."""
        if trial_id in self._entries:
            raise ValueError(f"trial {trial_id!r} is already recorded at this rung")
        self._entries[trial_id] = entry
        key = (_key(entry.loss), trial_id)
        if not self._keys:
            self._keys.append([key])
            self._maxes.append(key)
            return
        b = min(bisect.bisect_left(self._maxes, key), len(self._keys) - 1)
        keys = self._keys[b]
        keys.insert(bisect.bisect_left(keys, key), key)
        self._maxes[b] = keys[-1]
        if len(keys) > 2 * self._BLOCK:
            half = len(keys) // 2
            self._keys[b : b + 1] = [keys[:half], keys[half:]]
            self._maxes[b : b + 1] = [keys[half - 1], keys[-1]]

    def nth_loss(self, k: int) -> float:
        """The loss key (NaN as +inf) of the trial ranked ``k``-th (0-based) by (loss, id)."""
        for keys in self._keys:
            if k < len(keys):
                return keys[k][0]
            k -= len(keys)
        raise IndexError(f"rung has {len(self)} trials, no {k}-th")

    def ahead(self, trial_id: str) -> int:
        """How many trials rank ahead of ``trial_id`` (by loss, then id)."""
        key = (_key(self._entries[trial_id].loss), trial_id)
        b = bisect.bisect_left(self._maxes, key)
        return sum(len(keys) for keys in self._keys[:b]) + bisect.bisect_left(self._keys[b], key)


def validate_geometry(grace_epochs: int, eta: int, max_epochs: int) -> None:
    """Raise :class:`ConfigError` naming the field when the rung geometry is impossible."""
    if not isinstance(eta, int) or eta < 2:
        raise ConfigError(f"scheduler.eta: must be an integer >= 2, got {eta!r}")
    if not isinstance(grace_epochs, int) or grace_epochs < 1:
        raise ConfigError(f"scheduler.grace_epochs: must be an integer >= 1, got {grace_epochs!r}")
    if not isinstance(max_epochs, int) or max_epochs < grace_epochs:
        raise ConfigError(
            f"max_epochs: must be an integer >= scheduler.grace_epochs ({grace_epochs}), got {max_epochs!r}"
        )


def max_bracket_index(grace_epochs: int, eta: int, max_epochs: int) -> int:
    """s_max in the paper: the largest s with grace × η^s ≤ max_epochs."""
    s = 0
    while grace_epochs * eta ** (s + 1) <= max_epochs:
        s += 1
    return s


def rung_epochs(grace_epochs: int, eta: int, max_epochs: int, bracket: int = 0) -> list[int]:
    """Epochs at which a trial of ``bracket`` meets a rung: r·η^(s+k) < max_epochs.

    Bracket s starts its trials with a budget of grace × η^s epochs (s = 0 is the most
    aggressive). ``max_epochs`` itself is not a rung: a trial that gets there is done.
    """
    out = []
    epochs = grace_epochs * eta**bracket
    while epochs < max_epochs:
        out.append(epochs)
        epochs *= eta
    return out


def is_promotable(trial_id: str, rung: Mapping[str, RungEntry], eta: int) -> bool:
    """Whether ``trial_id`` (already recorded in ``rung``) goes on past this rung: it is among
    the top max(1, ⌊n/η⌋) of the rung's n trials by loss (ties by id), and its loss is not NaN."""
    if math.isnan(rung[trial_id].loss):
        return False
    if isinstance(rung, Rung):
        return rung.ahead(trial_id) < promoted_count(len(rung), eta)
    key = (_key(rung[trial_id].loss), trial_id)
    ahead = sum((_key(entry.loss), other_id) < key for other_id, entry in rung.items())
    return ahead < promoted_count(len(rung), eta)


def _key(loss: float) -> float:
    """NaN losses sort last."""
    return math.inf if math.isnan(loss) else loss
