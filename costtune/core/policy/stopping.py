"""Stop a trial where money stops buying quality: patience and marginal ROI.

The marginal-ROI rule looks at what the loss still gains per dollar. A validation curve is
noisy, so the rule works on a smoothed curve:

1. a rolling median of the loss over the last ``window`` epochs ignores outliers — a broken
   validation pass (a spike) or a lucky one (a dip) moves a median by one rank, not by its
   size;
2. its running minimum (best so far) makes the curve monotone, so noise never reads as
   "getting worse";
3. the gain is the drop of that curve over the last ``window`` epochs, divided by the
   dollars those epochs cost — a secant over a window, not a noisy one-epoch difference.

The trial stops when gain × business value per dollar falls below ``min_marginal_roi``;
never before ``min_epochs``, and never at ``max_epochs`` (a trial there has completed).

Pure: numbers in, a :class:`StopReason` (or ``None``) out.
"""

from __future__ import annotations

import math
import statistics
import uuid
from dataclasses import dataclass, field

from costtune.core.policy.decisions import StopReason
from costtune.errors import ConfigError


@dataclass(frozen=True, slots=True)
class StoppingRule:
    """When a trial is no longer worth its dollars.

    Args:
        patience_epochs: stop after this many epochs without an improvement of at least
            ``min_delta`` over the best so far (``None``: off).
        min_delta: the smallest change that counts as an improvement.
        min_marginal_roi: stop when the smoothed improvement × business value per dollar
            falls below this (``None``: off).
        max_epochs: the epoch trials train to; a trial that reaches it has completed, and no
            rule stops it there (``None``: unknown).
        window_epochs: epochs the gain is measured over (and the median's span).
        min_epochs: never stop on these rules before this many epochs.
    """

    patience_epochs: int | None = None
    min_delta: float = 0.0
    min_marginal_roi: float | None = None
    max_epochs: int | None = None
    window_epochs: int = 5
    min_epochs: int = 5

    def __post_init__(self) -> None:
        if self.window_epochs < 1:
            raise ConfigError(f"stopping.window_epochs: must be >= 1, got {self.window_epochs}")
        if self.patience_epochs is not None and self.patience_epochs < 1:
            raise ConfigError(f"stopping.patience_epochs: must be >= 1, got {self.patience_epochs}")
        if self.min_delta < 0:
            raise ConfigError(f"stopping.min_delta: must be >= 0, got {self.min_delta}")

    @property
    def active(self) -> bool:
        return self.patience_epochs is not None or self.min_marginal_roi is not None


@dataclass(slots=True)
class TrialCurve:
    """One trial's books: its last raw losses, smoothed curve, cumulative hours and dollars."""

    losses: list[float] = field(default_factory=list)
    best_smooth: list[float] = field(default_factory=list)
    device_hours: list[float] = field(default_factory=list)
    usd: list[float] = field(default_factory=list)
    best_raw: float = math.inf
    since_improvement: int = 0


class MarginalRoiStopping:
    """Applies a :class:`StoppingRule` to each trial's reported (loss, device-hours, dollars).

    Args:
        rule: the thresholds.
        business_value_usd: USD per unit of loss improvement, for the marginal-ROI rule.

    A subclass may add rules through three hooks: :meth:`_charged` (every report, NaN
    included), :meth:`_recorded` (each finite loss, once the curve holds it) and
    :meth:`_window_stop` (once a trial has a full window past ``min_epochs``).
    """

    def __init__(self, rule: StoppingRule, business_value_usd: float = 1.0) -> None:
        self.rule = rule
        self.business_value_usd = business_value_usd
        self._curves: dict[str, TrialCurve] = {}

    def on_result(self, trial_id: str, loss: float, device_hours: float, usd: float) -> StopReason | None:
        """Record one epoch (``loss`` lower is better; hours and dollars cumulative)."""
        rule = self.rule
        c = self._curves.setdefault(trial_id, TrialCurve())
        self._charged(trial_id, usd)
        if math.isnan(loss):
            return None  # a NaN metric is stopped by metric_reason, not here
        c.losses.append(loss)
        del c.losses[: -rule.window_epochs]
        smooth = statistics.median(c.losses)
        c.best_smooth.append(min(smooth, c.best_smooth[-1]) if c.best_smooth else smooth)
        c.device_hours.append(device_hours)
        c.usd.append(usd)
        if loss < c.best_raw - rule.min_delta:
            c.best_raw = loss
            c.since_improvement = 0
        else:
            c.since_improvement += 1
        self._recorded(trial_id, c, loss)
        epochs = len(c.best_smooth)
        if epochs < self._first_judged() or (rule.max_epochs is not None and epochs >= rule.max_epochs):
            return None  # too early to judge, or done: a trial at max_epochs completed
        if rule.patience_epochs is not None and c.since_improvement >= rule.patience_epochs:
            return StopReason.PATIENCE
        if epochs <= rule.window_epochs:
            return None
        w = rule.window_epochs
        gained = c.best_smooth[-1 - w] - c.best_smooth[-1]
        hours = c.device_hours[-1] - c.device_hours[-1 - w]
        dollars = c.usd[-1] - c.usd[-1 - w]
        roi_low = (
            rule.min_marginal_roi is not None
            and dollars > 0
            and gained * self.business_value_usd / dollars < rule.min_marginal_roi
        )
        if self._window_stop(trial_id, c, gained, hours, dollars) or roi_low:
            return StopReason.MARGINAL_ROI
        return None

    def _charged(self, trial_id: str, usd: float) -> None:
        """A report of ``trial_id``, ``usd`` its cumulative dollars (a hook: nothing here)."""

    def _recorded(self, trial_id: str, c: TrialCurve, loss: float) -> None:
        """``loss`` is now the last of ``c`` (a hook: nothing here)."""

    def _first_judged(self) -> int:
        """The first epoch a trial may be stopped at."""
        return self.rule.min_epochs

    def _window_stop(self, trial_id: str, c: TrialCurve, gained: float, hours: float, dollars: float) -> bool:
        """Whether another rule stops the trial, its last window having gained ``gained`` for
        ``hours`` device-hours and ``dollars`` (a hook: no other rule here)."""
        return False

    def forget(self, trial_id: str) -> None:
        """Drop a trial's curve (a subclass's sweep-wide books keep what it counted)."""
        self._curves.pop(trial_id, None)


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
