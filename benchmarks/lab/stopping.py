"""The benchmarks' stopping rules, on top of costtune's patience and marginal ROI
(:class:`~costtune.core.policy.stopping.MarginalRoiStopping`): the slope rule, the scale-free
relative rule with its best-trial spare, its expected-gain and noise-aware readings.
costtune does not ship them; ``families.py`` ablates them against the rungs alone.

The slope rule stops a trial when its smoothed loss falls by less than ε per device-hour
(``min_slope_per_device_hour``, metric units: it has to be chosen per problem).

The relative rule, ``min_relative_roi`` = ρ, needs no such choice: it compares the trial's
smoothed improvement per dollar over its last window with what the sweep's dollars have
bought on average so far,

    sweep rate = (baseline − best smoothed loss of any trial) ÷ the sweep's dollars,

the baseline being the median smoothed loss of the trials at their ``min_epochs``-th epoch.
The trial stops when its rate falls below ρ × the sweep rate. Both rates are loss per dollar,
so the rule is free of the metric's scale and of the price and speed of an epoch.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass

from costtune.core.policy.stopping import MarginalRoiStopping, StoppingRule, TrialCurve
from costtune.errors import ConfigError
from lab.curve_model import expected_gain, final_losses
from lab.outlook import outlook


@dataclass(frozen=True, slots=True)
class LabStoppingRule(StoppingRule):
    """:class:`StoppingRule` with the benchmarks' rules.

    Args:
        min_slope_per_device_hour: ε, stop when the smoothed loss falls by less than this
            per device-hour (``None``: off).
        min_relative_roi: ρ, stop when the smoothed improvement per dollar falls below ρ ×
            the sweep's average improvement per dollar so far (``None``: off).
        spare_best: the relative rule judges the trial holding the sweep's best smoothed
            loss by what it may still gain, not by its pace: it stops only when its
            optimistic outlook to ``max_epochs`` (:func:`~lab.outlook.outlook`, κ = 1) is
            less than ρ × what the sweep has gained over its baseline.
        first_stop_epoch: never stop before this epoch either (``None``: ``min_epochs``).
        expected: the relative rule judges a trial by its *expected* gain to ``max_epochs``
            per dollar that gain would cost, in place of its pace over the last window: the
            expected improvement of the sweep's best loss over the curve model's predicted
            finals (:mod:`~lab.curve_model`, learned from the sweep's trials that reached
            ``max_epochs``), divided by the trial's dollars per epoch × the epochs it has
            left. Needs ``max_epochs``.
        noise_aware: a stop the relative rule calls on a window whose gain the trial's own
            epoch-to-epoch noise (:func:`epoch_noise`) could hide waits: a window's gain is
            evidence when its standard error under that noise is below the gain that matters
            (ρ × the sweep's average per dollar × the window's dollars); a stop called on a
            window that is not evidence is decided on the last half of the trial's epochs
            instead, and waits while that half is not evidence either. A trial whose loss has
            risen more than three standard errors above its best is stopped as without it.
    """

    min_slope_per_device_hour: float | None = None
    min_relative_roi: float | None = None
    spare_best: bool = False
    first_stop_epoch: int | None = None
    expected: bool = False
    noise_aware: bool = False

    def __post_init__(self) -> None:
        super(LabStoppingRule, self).__post_init__()
        if self.min_relative_roi is not None and not (
            isinstance(self.min_relative_roi, (int, float)) and 0 <= self.min_relative_roi < math.inf
        ):
            raise ConfigError(
                f"stopping.min_relative_roi: must be a finite number >= 0, got {self.min_relative_roi!r}"
            )
        if self.expected and (self.max_epochs is None or self.min_relative_roi is None):
            raise ConfigError("stopping.expected: needs min_relative_roi and max_epochs")

    @property
    def active(self) -> bool:
        return (
            self.patience_epochs is not None
            or self.min_marginal_roi is not None
            or self.min_slope_per_device_hour is not None
            or self.min_relative_roi is not None
        )


class LabStopping(MarginalRoiStopping):
    """:class:`MarginalRoiStopping` with :class:`LabStoppingRule`'s rules, and the sweep's
    books they read: dollars spent, the baseline losses, the best smoothed loss and the
    curves that reached ``max_epochs``."""

    rule: LabStoppingRule

    def __init__(self, rule: LabStoppingRule, business_value_usd: float = 1.0) -> None:
        super().__init__(rule, business_value_usd)
        self._usd_by_trial: dict[str, float] = {}
        self._spent = 0.0
        self._firsts: list[float] = []  # sorted: each trial's smoothed loss at min_epochs
        self._baselined: set[str] = set()  # trials in _firsts (a replayed trial counts once)
        self._best = math.inf
        self._best_trial: str | None = None
        #: smoothed curves of the trials that reached max_epochs (the curve model's references)
        self._references: list[list[float]] = []
        self._referenced: set[str] = set()
        #: each trial's last raw losses, for the noise estimate (``noise_aware``)
        self._recent: dict[str, list[float]] = {}

    @property
    def sweep_rate(self) -> float:
        """What a dollar of the sweep has bought: (baseline − best) ÷ dollars (0 before any gain)."""
        if not self._firsts or self._spent <= 0:
            return 0.0
        n = len(self._firsts)
        baseline = (self._firsts[(n - 1) // 2] + self._firsts[n // 2]) / 2
        return max(baseline - self._best, 0.0) / self._spent

    def _charged(self, trial_id: str, usd: float) -> None:
        self._spent += max(usd - self._usd_by_trial.get(trial_id, 0.0), 0.0)
        self._usd_by_trial[trial_id] = max(usd, self._usd_by_trial.get(trial_id, 0.0))

    def _recorded(self, trial_id: str, c: TrialCurve, loss: float) -> None:
        rule = self.rule
        if rule.noise_aware:
            recent = self._recent.setdefault(trial_id, [])
            recent.append(loss)
            del recent[: -(2 * rule.window_epochs + 2)]
        epochs = len(c.best_smooth)
        if c.best_smooth[-1] < self._best:
            self._best, self._best_trial = c.best_smooth[-1], trial_id
        if epochs == rule.min_epochs and trial_id not in self._baselined:
            self._baselined.add(trial_id)
            bisect.insort(self._firsts, c.best_smooth[-1])
        if rule.max_epochs is not None and epochs == rule.max_epochs and trial_id not in self._referenced:
            self._referenced.add(trial_id)
            self._references.append(list(c.best_smooth))

    def _first_judged(self) -> int:
        return max(self.rule.min_epochs, self.rule.first_stop_epoch or 0)

    def _window_stop(self, trial_id: str, c: TrialCurve, gained: float, hours: float, dollars: float) -> bool:
        rule = self.rule
        slope_low = (
            rule.min_slope_per_device_hour is not None
            and hours > 0
            and gained / hours < rule.min_slope_per_device_hour
        )
        rate = self.sweep_rate
        if rule.expected:
            return slope_low or self._expected_low(c, rate)
        relative_low = (
            rule.min_relative_roi is not None
            and dollars > 0
            and rate > 0
            and gained / dollars < rule.min_relative_roi * rate
            and not (rule.spare_best and trial_id == self._best_trial and self._promising(c, rate))
        )
        if relative_low and rule.noise_aware:
            relative_low = not self._noise_hides(trial_id, c, rate)
        return slope_low or relative_low

    def _noise_hides(self, trial_id: str, c: TrialCurve, rate: float) -> bool:
        """Whether a stop the relative rule called waits, the trial's noise being able to hide
        a worthwhile gain (see ``noise_aware``)."""
        rule = self.rule
        w = rule.window_epochs
        # the standard error of a window's gain under the trial's own epoch noise
        credit = epoch_noise(self._recent.get(trial_id, [])) * _MEDIAN_SE * math.sqrt(2 / w)
        if statistics.median(c.losses) - c.best_smooth[-1] > 3 * credit:
            return False  # risen well beyond its noise above its best: no gain hides there
        target = (rule.min_relative_roi or 0.0) * rate
        n = len(c.best_smooth)
        for span in (w, max(w, n // 2)):
            if n <= span:
                continue
            dollars = c.usd[-1] - c.usd[-1 - span]
            if credit < target * dollars:  # this window can measure the gain that matters
                return span != w and c.best_smooth[-1 - span] - c.best_smooth[-1] >= target * dollars
        return True  # neither can: the noise hides it

    def _expected_low(self, c: TrialCurve, rate: float) -> bool:
        """Whether the trial's expected gain to max_epochs per dollar is below ρ × the sweep's."""
        rule = self.rule
        rho, max_epochs = rule.min_relative_roi, rule.max_epochs
        if rho is None or max_epochs is None or rate <= 0:
            return False
        w = rule.window_epochs
        left = (c.usd[-1] - c.usd[-1 - w]) / w * (max_epochs - len(c.best_smooth))
        if left <= 0:
            return False
        finals = final_losses(c.best_smooth, self._references, max_epochs)
        return expected_gain(finals, self._best) < rho * rate * left

    def _promising(self, c: TrialCurve, rate: float) -> bool:
        """Whether the best trial may still gain ρ × what the sweep gained (see ``spare_best``)."""
        rule = self.rule
        if rule.max_epochs is None:
            return True
        remaining = c.best_smooth[-1] - outlook(c.best_smooth, rule.max_epochs, 1.0)
        return remaining >= (rule.min_relative_roi or 0.0) * rate * self._spent

    def forget(self, trial_id: str) -> None:
        super().forget(trial_id)
        self._recent.pop(trial_id, None)


#: a median of n draws of Gaussian noise σ has a standard error of about this × σ / √n
_MEDIAN_SE = math.sqrt(math.pi / 2)


def epoch_noise(losses: list[float]) -> float:
    """σ of one epoch's loss around its curve, from its second differences: for Gaussian noise
    σ, e(t) − 2 e(t−1) + e(t−2) has a standard deviation of √6 σ, and a smooth curve's second
    differences are small (a straight descent's are 0); the median of their absolute values is
    robust to a spike (1.4826 × the median absolute value is σ for Gaussian data)."""
    if len(losses) < 3:
        return 0.0
    second = [abs(losses[i] - 2 * losses[i - 1] + losses[i - 2]) for i in range(2, len(losses))]
    return 1.4826 * statistics.median(second) / math.sqrt(6)
