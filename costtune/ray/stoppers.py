"""``CostStopper``: marginal-ROI stopping, hard caps and the sweep budget as a ``ray.tune.Stopper``.

Translates only: meters each result (charged seconds × devices × price), asks the pure
policies in :mod:`costtune.core.policy.stopping`, and answers True (stop) / False.
"""

from __future__ import annotations

import time
from typing import Any

from ray.tune import Stopper

from costtune.core.direction import Direction
from costtune.core.ledger import Ledger
from costtune.core.policy import (
    Governor,
    MarginalRoiStopping,
    StopReason,
    SweepProgress,
    metric_reason,
)
from costtune.ray.governed import shared_governor
from costtune.ray.placement import placed


class CostStopper(Stopper):
    """Stops trials at a marginal-ROI threshold, at patience, at a per-trial cap, or when the
    sweep budget is spent; stops the whole sweep on budget or sweep-level marginal ROI.

    Args:
        governor: caps and budget, shared with the scheduler (which refuses to start trials
            the budget cannot pay for and ends hung trials).
        stopping: the per-trial marginal-ROI / patience rule (``None``: off).
        sweep_progress: the sweep-level rule (``None``: off).
        metric, mode: the metric and its direction.
        devices: devices each trial holds (for device-hours).
        seconds_field: the cumulative metered time field.
        ledger: the sweep's ledger, and its meter: a result is charged by
            :meth:`Ledger.charged_after` (the seconds charged so far, lost work and hung
            time included, plus this epoch), so the caps and the budget see the same seconds
            as the books. When Tune restores this stopper (resume), its budget and stopping
            curves are rebuilt from the ledger's log.
    """

    def __init__(
        self,
        governor: Governor,
        metric: str,
        mode: str,
        devices: float,
        stopping: MarginalRoiStopping | None = None,
        sweep_progress: SweepProgress | None = None,
        seconds_field: str = "time_total_s",
        *,
        ledger: Ledger,
    ) -> None:
        self.governor = governor
        self.ledger = ledger
        self.metric = metric
        self.mode = mode
        self.devices = devices
        self.stopping = stopping
        self.sweep_progress = sweep_progress
        self.seconds_field = seconds_field

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.governor = shared_governor(self.governor)  # the one the scheduler and books ask
        self.ledger = self.ledger.shared()  # the one the ledger callback writes to
        self.rebuild(self.ledger)

    def rebuild(self, ledger: Ledger) -> None:
        """Take up metered spend, charged time and loss curves from a ledger's log."""
        for trial_id, record in ledger.trials.items():
            if record.status != "RUNNING":
                self.governor.ended.add(trial_id)
            self._rate_of(trial_id, record.device_kind, record.devices)
            self.governor.budget.record(trial_id, record.epochs, ledger.cost_usd(record))
            if self.stopping is not None:
                self.stopping.forget(trial_id)
            for _epoch, seconds, metric in record.history:
                loss = Direction.of(self.mode).loss(metric)
                if self.stopping is not None:
                    usd = seconds * self.governor.rate(trial_id)
                    self.stopping.on_result(trial_id, loss, seconds * record.devices / 3600, usd)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        if self.seconds_field not in result or "training_iteration" not in result:
            return False
        epoch = int(result["training_iteration"])
        increment = result.get("time_this_iter_s") if self.seconds_field == "time_total_s" else None
        charged = self.ledger.charged_after(
            trial_id, epoch=epoch, seconds=float(result[self.seconds_field]), increment=increment
        )
        devices = self.devices
        where = placed(trial_id)  # a mixed pool: the type this trial's node has
        if where is not None:
            devices = where[1]
            self._rate_of(trial_id, *where)
        reason = self.governor.on_result(trial_id, epoch, charged, time.monotonic())
        if reason is StopReason.SWEEP_BUDGET:
            self.governor.sweep_stopped = True
        loss = Direction.of(self.mode).loss(result.get(self.metric))
        if reason is None and self.metric in result:
            reason = metric_reason(loss)
            if reason is not None:
                self.governor.reasons.setdefault(trial_id, reason)
        if self.sweep_progress is not None:
            self.sweep_progress.record(loss, self.governor.budget.spent_usd)
            if self.sweep_progress.should_stop():
                self.governor.sweep_stopped = True
                self.governor.reasons.setdefault(trial_id, StopReason.SWEEP_MARGINAL_ROI)
        if reason is None and self.stopping is not None:
            usd = charged * self.governor.rate(trial_id)
            reason = self.stopping.on_result(trial_id, loss, charged * devices / 3600, usd)
            if reason is not None:
                self.governor.reasons.setdefault(trial_id, reason)
        return reason is not None

    def _rate_of(self, trial_id: str, kind: str, devices: float) -> None:
        """Bill ``trial_id`` at its own type's price."""
        price = self.ledger.spec.cost_model.usd_per_device_hour(kind)
        self.governor.rates[trial_id] = price * devices / 3600

    def stop_all(self) -> bool:
        return self.governor.sweep_stopped

    def stop_reason(self, trial_id: str) -> str | None:
        reason = self.governor.reasons.get(trial_id)
        if reason is None and self.governor.sweep_stopped:
            return (
                StopReason.SWEEP_MARGINAL_ROI.value
                if not self.governor.budget.exhausted()
                else StopReason.SWEEP_BUDGET.value
            )
        return None if reason is None else reason.value


class EpochLimit(Stopper):
    """Ends a trial at its ``max_epochs``-th epoch, by the epoch number it reports.

    Ray's ``MaximumIterationStopper`` counts the results it has seen per trial instead: a
    trial restarted from a checkpoint one epoch behind its last result (a lost node) re-runs
    that epoch, and was ended one epoch short of ``max_epochs``.
    """

    def __init__(self, max_epochs: int) -> None:
        self.max_epochs = max_epochs

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return int(result.get("training_iteration", 0)) >= self.max_epochs

    def stop_all(self) -> bool:
        return False


class WallClockBudget(Stopper):
    """Ray Tune's ``time_budget_s`` (``budget.max_wall_seconds``): once the sweep has run this
    many seconds of wall clock, each running trial stops at its next report and no new one
    starts. The clock starts at the sweep's first check and counts wall time, not device time;
    a resumed sweep counts its own session anew."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._started: float | None = None
        self.fired = False

    def _over(self) -> bool:
        now = time.monotonic()
        if self._started is None:
            self._started = now
        self.fired = self.fired or now - self._started >= self.seconds
        return self.fired

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return self._over()

    def stop_all(self) -> bool:
        return self._over()

    def stop_reason(self, trial_id: str) -> str | None:
        return StopReason.TIME_BUDGET.value if self.fired else None
