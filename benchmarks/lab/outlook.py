"""Stop a trial whose learning curve, extrapolated optimistically, cannot beat the sweep's best.

A scale-free stopping rule: it compares losses with losses, so it needs no threshold in
metric units per device-hour (the marginal-ROI stopper's ε, which had to be tuned per
problem and stopped every still-improving trial on curves it was not tuned on).

The optimistic outlook of a curve at epoch t. Let m be the curve smoothed (running minimum
of a rolling median, as in :mod:`~lab.stopping`). Over the last doubling of
training, epochs t/2 → t, the curve fell by d = m(t/2) − m(t). If it keeps falling by d per
doubling of epochs until ``max_epochs`` = T — the pace of a curve that is linear in log
epochs, the slowest-decaying member of the power-law family y = c + a·t^(−α) as α → 0, so
the *largest* remaining gain a power law whose last doubling fell by d can still make — it
ends at

    outlook(t) = m(t) − κ · d · log2(T / t).

κ (``optimism``) ≥ 1 widens the bound for curves that speed up in log time (warm-ups,
learning-rate drops). The trial stops when its outlook is worse than the best smoothed loss
any trial of the sweep has reached (``incumbent``): even on its optimistic course it would
not be the sweep's best model, so its next epochs buy nothing the sweep keeps. The trial
holding the best loss never stops on this rule.

Cost enters through *who runs next*: every epoch saved here is an epoch a new
configuration gets; the rung ladder and the budget stay in charge of how much runs.
Pure: numbers in, a :class:`StopReason` (or ``None``) out; deterministic.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from costtune.core.policy.decisions import StopReason
from costtune.errors import ConfigError
from lab.curve_model import outlook_multiple


def smoothed(losses: Sequence[float], window: int) -> list[float]:
    """Running minimum of the rolling median over ``window`` epochs (NaN epochs skipped)."""
    out: list[float] = []
    recent: list[float] = []
    for loss in losses:
        if not math.isnan(loss):
            recent.append(loss)
            del recent[:-window]
        value = statistics.median(recent) if recent else math.inf
        out.append(min(value, out[-1]) if out else value)
    return out


def outlook(smooth: Sequence[float], max_epochs: int, optimism: float = 1.0) -> float:
    """The optimistic final loss of a smoothed curve (see the module docstring).

    Args:
        smooth: the smoothed curve, epochs 1..t (non-increasing).
        max_epochs: T, the epoch the trial would train to.
        optimism: κ, how many times the last doubling's pace the rest may keep.
    """
    t = len(smooth)
    if t == 0:
        return math.inf
    now = smooth[-1]
    if t >= max_epochs or t < 2:
        return now
    half = smooth[t // 2 - 1]  # m(⌊t/2⌋), 1-based epochs
    drop = max(half - now, 0.0)
    if math.isinf(drop) or math.isnan(drop):
        return -math.inf  # no finite history yet: anything is possible
    return now - optimism * drop * outlook_multiple(t, max_epochs)


@dataclass(frozen=True, slots=True)
class OutlookRule:
    """When a trial's optimistic future no longer beats the sweep's best.

    Args:
        max_epochs: T, the epoch trials train to.
        optimism: κ ≥ 0 (see :func:`outlook`); 0 stops any trial behind the best at once.
        min_epochs: never judged before this epoch (a few epochs say little).
        window_epochs: the rolling median's span (noise).
    """

    max_epochs: int
    optimism: float = 1.0
    min_epochs: int = 4
    window_epochs: int = 3

    def __post_init__(self) -> None:
        if not (isinstance(self.optimism, (int, float)) and self.optimism >= 0):
            raise ConfigError(f"stopping.outlook.optimism: must be a number >= 0, got {self.optimism!r}")
        if self.min_epochs < 2:
            raise ConfigError(f"stopping.outlook.min_epochs: must be >= 2, got {self.min_epochs}")
        if self.window_epochs < 1:
            raise ConfigError(f"stopping.outlook.window_epochs: must be >= 1, got {self.window_epochs}")


@dataclass(slots=True)
class _Track:
    losses: list[float] = field(default_factory=list)
    smooth: list[float] = field(default_factory=list)


class OutlookStopping:
    """Applies an :class:`OutlookRule` to every trial of a sweep (it must see every result).

    ``on_result(trial_id, loss)`` records one epoch (loss: lower is better) and returns
    :attr:`StopReason.OUTLOOK` when the trial should stop. The incumbent is the best
    smoothed loss over all trials seen, this one included.
    """

    def __init__(self, rule: OutlookRule) -> None:
        self.rule = rule
        self._tracks: dict[str, _Track] = {}
        self.incumbent = math.inf

    def on_result(self, trial_id: str, loss: float) -> StopReason | None:
        rule = self.rule
        track = self._tracks.setdefault(trial_id, _Track())
        track.losses.append(float(loss))
        recent = [x for x in track.losses[-rule.window_epochs :] if not math.isnan(x)]
        value = statistics.median(recent) if recent else math.inf
        track.smooth.append(min(value, track.smooth[-1]) if track.smooth else value)
        self.incumbent = min(self.incumbent, track.smooth[-1])
        if len(track.smooth) < rule.min_epochs:
            return None
        if outlook(track.smooth, rule.max_epochs, rule.optimism) > self.incumbent:
            return StopReason.OUTLOOK
        return None

    def predicted_final(self, trial_id: str) -> float:
        """The trial's optimistic final loss now (``inf`` for an unknown trial)."""
        track = self._tracks.get(trial_id)
        if track is None:
            return math.inf
        return outlook(track.smooth, self.rule.max_epochs, self.rule.optimism)

    def forget(self, trial_id: str) -> None:
        self._tracks.pop(trial_id, None)
