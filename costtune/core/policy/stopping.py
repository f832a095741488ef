"""Stop a trial where money stops buying quality: patience, min-delta and marginal ROI.

The slope rule looks at d(metric)/d(device-hours): how much the loss still falls per
device-hour spent. A validation curve is noisy, so the rule works on a smoothed curve:

1. a rolling median of the loss over the last ``window`` epochs ignores outliers — a broken
   validation pass (a spike) or a lucky one (a dip) moves a median by one rank, not by its
   size (an exponential average was tried first: one spike held it up for long enough to
   read as a plateau and stopped a steeply improving trial);
2. its running minimum (best so far) makes the curve monotone, so noise never reads as
   "getting worse";
3. the slope is the drop of that curve over the last ``window`` epochs divided by the
   device-hours those epochs cost — a secant over a window, not a noisy one-epoch difference.

The trial stops when the slope falls below ε (``min_slope_per_device_hour``, metric units
per device-hour), or, with a business value, when the marginal ROI (slope × value / price)
falls below ``min_marginal_roi``; never before ``min_epochs``.

ε is in units of the metric per device-hour: it has to be chosen per problem (0.5 val CE per
device-hour on LCBench stopped every still-improving trial on slower curves of another
kind). The scale-free rule, ``min_relative_roi`` = ρ, needs no such choice: it compares the
trial's smoothed improvement per dollar over its last window with what the sweep's dollars
have bought on average so far,

    sweep rate = (baseline − best smoothed loss of any trial) ÷ the sweep's dollars,

the baseline being the median smoothed loss of the trials at their ``min_epochs``-th
epoch. The trial stops when its rate falls below ρ × the sweep rate: its next dollars buy
less than a ρ share of what a dollar has bought the sweep. Both rates are loss per dollar,
so the rule is free of the metric's scale and of the price and speed of an epoch.

Pure: numbers in, a :class:`StopReason` (or ``None``) out.
"""

from __future__ import annotations

import bisect
import math
import statistics
import uuid
from dataclasses import dataclass, field

from costtune.core.policy.curve_model import expected_gain, final_losses
from costtune.core.policy.decisions import StopReason
from costtune.core.policy.outlook import outlook
from costtune.errors import ConfigError


@dataclass(frozen=True, slots=True)
class StoppingRule:
    """When a trial is no longer worth its dollars.

    Args:
        patience_epochs: stop after this many epochs without an improvement of at least
            ``min_delta`` over the best so far (``None``: off).
        min_delta: the smallest change that counts as an improvement.
        min_slope_per_device_hour: ε, stop when the smoothed loss falls by less than this
            per device-hour (``None``: off).
        min_marginal_roi: stop when the smoothed improvement × business value per dollar
            falls below this (``None``: off).
        min_relative_roi: ρ, stop when the smoothed improvement per dollar falls below ρ ×
            the sweep's average improvement per dollar so far (``None``: off; see the
            module docstring). Scale-free: no per-problem threshold.
        spare_best: the relative rule judges the trial holding the sweep's best smoothed
            loss by what it may still gain, not by its pace: it stops only when its
            optimistic outlook to ``max_epochs`` (:func:`~costtune.core.policy.outlook.outlook`,
            κ = 1) is less than ρ × what the sweep has gained over its baseline. A pace
            rule alone stops a curve that improves slowly but for long — the one the
            sweep's result depends on.
        max_epochs: the epoch trials train to (for ``spare_best``; ``None``: the best
            trial is never stopped on the relative rule). A trial that reaches it has
            completed: no rule stops it there.
        window_epochs: epochs the slope is measured over (and the median's span).
        min_epochs: never stop on these rules before this many epochs (and the epoch the
            relative rule's baseline is read at).
        first_stop_epoch: never stop before this epoch either (``None``: ``min_epochs``).
            Set to the last rung, a pace rule would not overrule rungs that still judge a
            trial; a sweep does not set it (on LCBench's dev tasks that was dearer:
            benchmarks/ARCHIVE.md, variant ``w``).
        expected: the relative rule judges a trial by its *expected* gain to ``max_epochs``
            per dollar that gain would cost, in place of its pace over the last window: the
            expected improvement of the sweep's best loss, over the curve model's predicted
            finals (:mod:`~costtune.core.policy.curve_model`, learned from the sweep's trials that
            reached ``max_epochs``), divided by the trial's dollars per epoch × the epochs it
            has left. It stops when that is below ρ × the sweep's average gain per dollar.
            Needs ``max_epochs``; ``spare_best`` is implied (the best trial's expected gain
            is its own expected drop).
        noise_aware: a stop the relative rule calls on a window whose gain the trial's own
            epoch-to-epoch noise (:func:`epoch_noise`) could hide waits. A window's gain is
            evidence when its standard error under that noise is below the gain that matters
            (ρ × the sweep's average per dollar × the window's dollars); a stop called on a
            window that is not evidence is decided on the last half of the trial's epochs
            instead, and waits while that half is not evidence either. A trial whose loss has
            risen more than three standard errors above its best is stopped as without the
            rule (an overfitting curve's bend is not noise). The noise is read from the
            trial's last 2 × ``window_epochs`` + 2 losses (fewer while it has fewer, which
            can misread it). On a noisy curve a window's gain is mostly noise, and a trial
            that still improves slowly looks as flat as one that is done; the rungs still
            prune it. A curve whose noise is small against the gains that matter is judged
            as without the rule.
    """

    patience_epochs: int | None = None
    min_delta: float = 0.0
    min_slope_per_device_hour: float | None = None
    min_marginal_roi: float | None = None
    min_relative_roi: float | None = None
    spare_best: bool = False
    max_epochs: int | None = None
    window_epochs: int = 5
    min_epochs: int = 5
    first_stop_epoch: int | None = None
    expected: bool = False
    noise_aware: bool = False

    def __post_init__(self) -> None:
        if self.window_epochs < 1:
            raise ConfigError(f"stopping.window_epochs: must be >= 1, got {self.window_epochs}")
        if self.patience_epochs is not None and self.patience_epochs < 1:
            raise ConfigError(f"stopping.patience_epochs: must be >= 1, got {self.patience_epochs}")
        if self.min_delta < 0:
            raise ConfigError(f"stopping.min_delta: must be >= 0, got {self.min_delta}")
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
        return any(
            x is not None
            for x in (
                self.patience_epochs,
                self.min_slope_per_device_hour,
                self.min_marginal_roi,
                self.min_relative_roi,
            )
        )


@dataclass(slots=True)
class _Curve:
    losses: list[float] = field(default_factory=list)
    best_smooth: list[float] = field(default_factory=list)
    device_hours: list[float] = field(default_factory=list)
    usd: list[float] = field(default_factory=list)
    best_raw: float = math.inf
    since_improvement: int = 0
    #: the last raw losses, for the noise estimate (``noise_aware``)
    recent: list[float] = field(default_factory=list)


class MarginalRoiStopping:
    """Applies a :class:`StoppingRule` to each trial's reported (loss, device-hours, dollars).

    Args:
        rule: the thresholds.
        business_value_usd: USD per unit of loss improvement, for the marginal-ROI rule.
    """

    def __init__(self, rule: StoppingRule, business_value_usd: float = 1.0) -> None:
        self.rule = rule
        self.business_value_usd = business_value_usd
        self._curves: dict[str, _Curve] = {}
        # the sweep's books for the relative rule: dollars, baseline losses, best loss
        self._usd_by_trial: dict[str, float] = {}
        self._spent = 0.0
        self._firsts: list[float] = []  # sorted: each trial's smoothed loss at min_epochs
        self._baselined: set[str] = set()  # trials in _firsts (a replayed trial counts once)
        self._best = math.inf
        self._best_trial: str | None = None
        #: smoothed curves of the trials that reached max_epochs (the curve model's references)
        self._references: list[list[float]] = []
        self._referenced: set[str] = set()

    @property
    def sweep_rate(self) -> float:
        """What a dollar of the sweep has bought: (baseline − best) ÷ dollars (0 before any gain)."""
        if not self._firsts or self._spent <= 0:
            return 0.0
        n = len(self._firsts)
        baseline = (self._firsts[(n - 1) // 2] + self._firsts[n // 2]) / 2
        return max(baseline - self._best, 0.0) / self._spent

    def on_result(self, trial_id: str, loss: float, device_hours: float, usd: float) -> StopReason | None:
        """Record one epoch (``loss`` lower is better; hours and dollars cumulative)."""
        rule = self.rule
        c = self._curves.setdefault(trial_id, _Curve())
        self._spent += max(usd - self._usd_by_trial.get(trial_id, 0.0), 0.0)
        self._usd_by_trial[trial_id] = max(usd, self._usd_by_trial.get(trial_id, 0.0))
        if math.isnan(loss):
            return None  # NaN handling is the trainable's (and a later issue's) business
        c.losses.append(loss)
        del c.losses[: -rule.window_epochs]
        if rule.noise_aware:
            c.recent.append(loss)
            del c.recent[: -(2 * rule.window_epochs + 2)]
        smooth = statistics.median(c.losses)
        c.best_smooth.append(min(smooth, c.best_smooth[-1]) if c.best_smooth else smooth)
        c.device_hours.append(device_hours)
        c.usd.append(usd)
        if loss < c.best_raw - rule.min_delta:
            c.best_raw = loss
            c.since_improvement = 0
        else:
            c.since_improvement += 1
        epochs = len(c.best_smooth)
        if c.best_smooth[-1] < self._best:
            self._best, self._best_trial = c.best_smooth[-1], trial_id
        if epochs == rule.min_epochs and trial_id not in self._baselined:
            self._baselined.add(trial_id)
            bisect.insort(self._firsts, c.best_smooth[-1])
        if rule.max_epochs is not None and epochs == rule.max_epochs and trial_id not in self._referenced:
            self._referenced.add(trial_id)
            self._references.append(list(c.best_smooth))
        if epochs < max(rule.min_epochs, rule.first_stop_epoch or 0) or (
            rule.max_epochs is not None and epochs >= rule.max_epochs
        ):
            return None  # too early to judge, or done: a trial at max_epochs completed
        if rule.patience_epochs is not None and c.since_improvement >= rule.patience_epochs:
            return StopReason.PATIENCE
        if epochs <= rule.window_epochs:
            return None
        w = rule.window_epochs
        gained = c.best_smooth[-1 - w] - c.best_smooth[-1]
        hours = c.device_hours[-1] - c.device_hours[-1 - w]
        dollars = c.usd[-1] - c.usd[-1 - w]
        slope_low = (
            rule.min_slope_per_device_hour is not None
            and hours > 0
            and gained / hours < rule.min_slope_per_device_hour
        )
        roi_low = (
            rule.min_marginal_roi is not None
            and dollars > 0
            and gained * self.business_value_usd / dollars < rule.min_marginal_roi
        )
        rate = self.sweep_rate
        if rule.expected:
            return StopReason.MARGINAL_ROI if slope_low or roi_low or self._expected_low(c, rate) else None
        relative_low = (
            rule.min_relative_roi is not None
            and dollars > 0
            and rate > 0
            and gained / dollars < rule.min_relative_roi * rate
            and not (rule.spare_best and trial_id == self._best_trial and self._promising(c, rate))
        )
        if relative_low and rule.noise_aware:
            relative_low = not self._noise_hides(c, rate)
        return StopReason.MARGINAL_ROI if slope_low or roi_low or relative_low else None

    def _noise_hides(self, c: _Curve, rate: float) -> bool:
        """Whether a stop the relative rule called waits, the trial's noise being able to hide
        a worthwhile gain (see ``noise_aware``)."""
        rule = self.rule
        w = rule.window_epochs
        # the standard error of a window's gain under the trial's own epoch noise
        credit = epoch_noise(c.recent) * _MEDIAN_SE * math.sqrt(2 / w)
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

    def _expected_low(self, c: _Curve, rate: float) -> bool:
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

    def _promising(self, c: _Curve, rate: float) -> bool:
        """Whether the best trial may still gain ρ × what the sweep gained (see ``spare_best``)."""
        rule = self.rule
        if rule.max_epochs is None:
            return True
        remaining = c.best_smooth[-1] - outlook(c.best_smooth, rule.max_epochs, 1.0)
        return remaining >= (rule.min_relative_roi or 0.0) * rate * self._spent

    def forget(self, trial_id: str) -> None:
        """Drop a trial's curve (the sweep's books keep its dollars and losses)."""
        self._curves.pop(trial_id, None)


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


def metric_reason(loss: float) -> StopReason | None:
    """A trial whose metric is NaN or infinite has diverged: stop it (the sweep goes on)."""
    return None if math.isfinite(loss) else StopReason.NAN_METRIC


def cap_reason(
    seconds: float, usd: float, max_hours_per_trial: float | None, max_cost_usd_per_trial: float | None
) -> StopReason | None:
    """A trial past its hard cap: metered hours held, or dollars spent."""
    if max_cost_usd_per_trial is not None and usd >= max_cost_usd_per_trial:
        return StopReason.TRIAL_COST_CAP
    if max_hours_per_trial is not None and seconds >= max_hours_per_trial * 3600:
        return StopReason.TRIAL_TIME_CAP
    return None


@dataclass
class SweepBudget:
    """Dollars a sweep has spent against its ``max_cost_usd`` (an amount consumed, not a deadline).

    ``record`` takes each trial's cumulative metered dollars; a paused or stopped trial
    simply stops adding. ``can_start`` says whether the remaining budget can pay for a new
    trial's first rung, priced at the mean metered dollars per epoch so far.
    """

    max_cost_usd: float | None
    spent_by_trial: dict[str, float] = field(default_factory=dict)
    epochs_by_trial: dict[str, int] = field(default_factory=dict)

    @property
    def spent_usd(self) -> float:
        return sum(self.spent_by_trial.values())

    def record(self, trial_id: str, epoch: int, usd: float) -> None:
        self.spent_by_trial[trial_id] = max(usd, self.spent_by_trial.get(trial_id, 0.0))
        self.epochs_by_trial[trial_id] = max(epoch, self.epochs_by_trial.get(trial_id, 0))

    def exhausted(self) -> bool:
        return self.max_cost_usd is not None and self.spent_usd >= self.max_cost_usd

    def first_rung_usd(self, first_rung_epochs: int) -> float | None:
        epochs = sum(self.epochs_by_trial.values())
        return None if epochs == 0 else self.spent_usd / epochs * first_rung_epochs

    def can_start(self, first_rung_epochs: int) -> bool:
        if self.max_cost_usd is None:
            return True
        if self.exhausted():
            return False
        price = self.first_rung_usd(first_rung_epochs)
        return price is None or self.max_cost_usd - self.spent_usd >= price


@dataclass
class SweepProgress:
    """Sweep-level marginal ROI: how much the best result improves per dollar of the sweep.

    Stop the whole sweep when, over the last ``window_epochs`` reported epochs (of any
    trial), the best loss fell by less than ``min_improvement_per_usd`` per dollar.
    """

    min_improvement_per_usd: float
    window_epochs: int = 50
    best: list[float] = field(default_factory=list)
    spent: list[float] = field(default_factory=list)

    def record(self, loss: float, sweep_spent_usd: float) -> None:
        previous = self.best[-1] if self.best else math.inf
        self.best.append(min(previous, loss) if not math.isnan(loss) else previous)
        self.spent.append(sweep_spent_usd)

    def should_stop(self) -> bool:
        w = self.window_epochs
        if len(self.best) <= w or math.isinf(self.best[-1 - w]):
            return False
        dollars = self.spent[-1] - self.spent[-1 - w]
        gained = self.best[-1 - w] - self.best[-1]
        return dollars > 0 and gained / dollars < self.min_improvement_per_usd


@dataclass
class Governor:
    """Hard caps per trial and the sweep budget, for every trial of a sweep.

    Fed each trial's charged seconds as it reports (``on_result``) and asked, between
    reports, whether a running trial has run past a cap without reporting (``overdue``: a
    hung trial) and whether a new trial may start (``can_start``). Times are passed in
    (``now``, monotonic seconds), so the decisions are plain functions of numbers.

    Args:
        usd_per_second: what one second of one trial costs (devices × price / 3600), for a
            trial without a rate of its own in ``rates`` (one placed on a dearer GPU type).
        first_rung_epochs: a new trial's first budget (grace epochs; max_epochs without rungs).
    """

    usd_per_second: float
    max_hours_per_trial: float | None = None
    max_cost_usd_per_trial: float | None = None
    budget: SweepBudget = field(default_factory=lambda: SweepBudget(None))
    first_rung_epochs: int = 1
    last_report: dict[str, tuple[float, float]] = field(default_factory=dict)
    reasons: dict[str, StopReason] = field(default_factory=dict)
    extra_seconds: dict[str, float] = field(default_factory=dict)
    #: trials known to have ended (a resumed sweep must not run them again)
    ended: set[str] = field(default_factory=set)
    #: per-trial USD per second where a trial is billed at another price (a mixed pool)
    rates: dict[str, float] = field(default_factory=dict)
    #: the sweep was ended as a whole (its budget spent, or its progress per dollar too low)
    sweep_stopped: bool = False
    #: one sweep's governor: the copies a resumed process unpickles share the one with this key
    key: str = field(default_factory=lambda: uuid.uuid4().hex)

    def rate(self, trial_id: str) -> float:
        """What one second of ``trial_id`` costs."""
        return self.rates.get(trial_id, self.usd_per_second)

    def on_start(self, trial_id: str, now: float) -> None:
        self.last_report.setdefault(trial_id, (now, 0.0))

    def on_result(self, trial_id: str, epoch: int, seconds: float, now: float) -> StopReason | None:
        usd = seconds * self.rate(trial_id)
        self.budget.record(trial_id, epoch, usd)
        self.last_report[trial_id] = (now, seconds)
        reason = cap_reason(seconds, usd, self.max_hours_per_trial, self.max_cost_usd_per_trial)
        if reason is None and self.budget.exhausted():
            reason = StopReason.SWEEP_BUDGET
        if reason is not None:
            self.reasons.setdefault(trial_id, reason)
        return reason

    def overdue(self, trial_id: str, now: float) -> StopReason | None:
        """A running trial past a cap since its last report (it may have hung)."""
        if trial_id in self.reasons or trial_id not in self.last_report:
            return None
        at, seconds = self.last_report[trial_id]
        held = seconds + max(now - at, 0.0)
        reason = cap_reason(
            held, held * self.rate(trial_id), self.max_hours_per_trial, self.max_cost_usd_per_trial
        )
        if reason is not None:
            self.reasons[trial_id] = reason
            self.extra_seconds[trial_id] = held - seconds
        return reason

    def can_start(self) -> bool:
        return self.budget.can_start(self.first_rung_epochs)

    def refuse(self, trial_id: str) -> None:
        self.reasons[trial_id] = StopReason.SWEEP_BUDGET

    def finished(self, trial_id: str) -> None:
        self.last_report.pop(trial_id, None)
