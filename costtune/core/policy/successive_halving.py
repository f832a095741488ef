"""Asynchronous successive halving (ASHA), with a choice of who is promoted out of a rung.

Li et al., "A System for Massively Parallel Hyperparameter Tuning" (2020). A trial that
reaches a rung is compared once with the trials recorded at that rung so far and either
goes on or stops there; no worker waits for a rung to fill.

The *promotion rule* decides who goes on. Every rule orders the rung best-first and
promotes a trial whose place in that order starts inside the first 1/η of the rung's
*weight*:

- ``loss`` (default): weight 1 per trial, ordered by loss: the top max(1, ⌊n/η⌋) go on
  (``keep=floor``, as Optuna's pruners; ``keep=ceil``: ⌈n/η⌉, as ASHA).
- ``cost_share``: weight = the trial's metered dollars so far, ordered by loss:
  trials are promoted best-by-loss first until the promoted ones hold 1/η of what the
  rung's trials cost. Cheap trials let more through; cost never outranks quality.
  The trial that crosses the share is promoted too; so when one trial holds most of a
  rung's dollars, it goes on even when it is not among the best (the cheap trials ahead
  of it cannot use up the share). At typical 3–7× cost spreads this is rare.
- ``pareto``: weight 1, ordered by (non-dominated front of (loss, dollars), loss).

Ratio keys (loss × dollars, ROI) are deliberately absent: on LCBench curves they rank a
rung almost purely by cost and halve the share of runs that reach a good model
(../shared/DESIGN.md); they belong in reports only. ``loss`` is the default because it
measured best (benchmarks/ARCHIVE.md, LCBench, 8 tasks × 20 seeds, paired): as often
successful as ``cost_share`` and cheaper to the TOP1 target (sign test p = 0.002); Pareto
was no better and had twice the regret. Cost enters costtune's sweeps through metering,
the budget and the marginal-ROI stopper, which did pay.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum

from costtune.core.policy.ranking import pareto_fronts
from costtune.errors import ConfigError


class PromotionRule(str, Enum):
    LOSS = "loss"
    COST_SHARE = "cost_share"
    PARETO = "pareto"


class Keep(str, Enum):
    """How many of a rung's n trials go on: ⌈n/η⌉ (ASHA, Ray Tune) or max(1, ⌊n/η⌋) (Optuna)."""

    CEIL = "ceil"
    FLOOR = "floor"


def promoted_count(n: int, eta: int, keep: Keep = Keep.FLOOR) -> int:
    """How many of the ``n`` trials recorded at a rung are promoted (by count)."""
    return max(1, n // eta) if keep is Keep.FLOOR else -(-n // eta)


@dataclass(frozen=True, slots=True)
class RungEntry:
    """A trial as recorded at a rung: its loss (lower is better) and dollars spent so far."""

    loss: float
    cost_usd: float


class Rung(Mapping[str, RungEntry]):
    """The trials recorded at one rung, kept in promotion order for O(log n) look-ups.

    A read-only mapping (trial id → :class:`RungEntry`) plus :meth:`record`. Entries are
    held sorted by (loss, id) in blocks of a few hundred, each block with its dollar sum, so
    that the weight ranked ahead of a trial is a bisection, a sum over block totals and a
    sum inside one block — instead of a pass over the whole rung per arrival. The answers
    are those of :func:`is_promotable` on a plain dict (property test).
    """

    _BLOCK = 256

    def __init__(self, entries: Iterable[tuple[str, RungEntry]] = ()) -> None:
        self._entries: dict[str, RungEntry] = {}
        self._keys: list[list[tuple[float, str]]] = []  # blocks of sorted (loss key, id)
        self._weights: list[list[float]] = []  # the dollars of each key, same layout
        self._maxes: list[tuple[float, str]] = []  # each block's last key
        self._block_weight: list[float] = []
        self._block_len: list[int] = []
        self.total_weight = 0.0
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
        weight = max(entry.cost_usd, 0.0)
        self.total_weight += weight
        if not self._keys:
            self._keys.append([key])
            self._weights.append([weight])
            self._maxes.append(key)
            self._block_weight.append(weight)
            self._block_len.append(1)
            return
        b = min(bisect.bisect_left(self._maxes, key), len(self._keys) - 1)
        keys = self._keys[b]
        pos = bisect.bisect_left(keys, key)
        keys.insert(pos, key)
        self._weights[b].insert(pos, weight)
        self._maxes[b] = keys[-1]
        self._block_weight[b] += weight
        self._block_len[b] += 1
        if len(keys) > 2 * self._BLOCK:
            self._split(b)

    def _split(self, b: int) -> None:
        keys, weights = self._keys[b], self._weights[b]
        half = len(keys) // 2
        self._keys[b : b + 1] = [keys[:half], keys[half:]]
        self._weights[b : b + 1] = [weights[:half], weights[half:]]
        self._maxes[b : b + 1] = [keys[half - 1], keys[-1]]
        self._block_weight[b : b + 1] = [sum(weights[:half]), sum(weights[half:])]
        self._block_len[b : b + 1] = [half, len(keys) - half]

    def nth_loss(self, k: int) -> float:
        """The loss key (NaN as +inf) of the trial ranked ``k``-th (0-based) by (loss, id)."""
        for keys in self._keys:
            if k < len(keys):
                return keys[k][0]
            k -= len(keys)
        raise IndexError(f"rung has {len(self)} trials, no {k}-th")

    def ahead(self, trial_id: str) -> tuple[int, float]:
        """How many trials, and how many dollars, rank ahead of ``trial_id`` (by loss, then id)."""
        key = (_key(self._entries[trial_id].loss), trial_id)
        b = bisect.bisect_left(self._maxes, key)
        pos = bisect.bisect_left(self._keys[b], key)
        count = sum(self._block_len[:b]) + pos
        weight = sum(self._block_weight[:b]) + sum(self._weights[b][:pos])
        return count, weight


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


def is_promotable(
    trial_id: str,
    rung: Mapping[str, RungEntry],
    eta: int,
    rule: PromotionRule = PromotionRule.LOSS,
    keep: Keep = Keep.FLOOR,
) -> bool:
    """Whether ``trial_id`` (already recorded in ``rung``) goes on past this rung.

    Args:
        trial_id: the trial that just reached the rung.
        rung: every trial recorded at this rung so far, including ``trial_id``.
        eta: reduction factor, η in the paper: 1/η of the rung's weight is promoted.
        rule: see the module docstring.
        keep: ``ceil`` (⌈n/η⌉, ASHA's) or ``floor`` (max(1, ⌊n/η⌋), Optuna's) for the
            rules that count trials (loss, pareto).
    """
    me = rung[trial_id]
    if math.isnan(me.loss):
        return False
    if rule is PromotionRule.PARETO:
        return _pareto_promotable(trial_id, rung, eta, keep)
    by_cost = rule is PromotionRule.COST_SHARE
    if isinstance(rung, Rung):
        count, weight = rung.ahead(trial_id)
        if by_cost and rung.total_weight > 0:
            return weight < rung.total_weight / eta
        return count < promoted_count(len(rung), eta, keep)
    # One pass, no sort: the weight of the trials ranked ahead of this one (by loss, ties by
    # id) against the rung's total — the same answer as walking the sorted rung, in O(n).
    key = (_key(me.loss), trial_id)
    ahead = total = 0.0
    for other_id, entry in rung.items():
        weight = max(entry.cost_usd, 0.0) if by_cost else 1.0
        total += weight
        if (_key(entry.loss), other_id) < key:
            ahead += weight
    if not by_cost:
        return ahead < promoted_count(len(rung), eta, keep)
    if total <= 0:  # nothing metered yet: fall back to counting trials
        total = float(len(rung))
        ahead = float(sum((_key(e.loss), i) < key for i, e in rung.items()))
    return ahead < total / eta


def _pareto_promotable(trial_id: str, rung: Mapping[str, RungEntry], eta: int, keep: Keep) -> bool:
    ids = list(rung)
    fronts = pareto_fronts([(_key(rung[i].loss), rung[i].cost_usd) for i in ids])
    order = sorted(range(len(ids)), key=lambda k: (fronts[k], _key(rung[ids[k]].loss), ids[k]))
    position = next(p for p, k in enumerate(order) if ids[k] == trial_id)
    return position < promoted_count(len(ids), eta, keep)


def _key(loss: float) -> float:
    """NaN losses sort last."""
    return math.inf if math.isnan(loss) else loss
