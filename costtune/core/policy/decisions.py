"""Decisions are values: the policy returns them, an adapter (Ray, a simulator) acts."""

from __future__ import annotations

from enum import Enum
from typing import Protocol, runtime_checkable


class Decision(str, Enum):
    """What should happen to a trial after it reported."""

    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"


class StopReason(str, Enum):
    """Why a trial ended; the ``stop_reason`` column of ``trials.csv``."""

    RUNG_PRUNED = "rung_pruned"
    LOOKAHEAD_PRUNED = "lookahead_pruned"  # between rungs: trials as bad as it all missed the next cut
    MARGINAL_ROI = "marginal_roi"
    OUTLOOK = "outlook"  # its optimistic learning-curve outlook cannot beat the sweep's best
    PATIENCE = "patience"
    TRIAL_COST_CAP = "trial_cost_cap"
    TRIAL_TIME_CAP = "trial_time_cap"
    SWEEP_BUDGET = "sweep_budget"
    TIME_BUDGET = "time_budget"  # the sweep's wall-clock budget (Ray Tune's time_budget_s) ran out
    SWEEP_MARGINAL_ROI = "sweep_marginal_roi"
    IDLE = "idle"
    NAN_METRIC = "nan_metric"
    COMPLETED = "completed"
    ERROR = "error"
    TRUNCATED = "truncated"  # replay: its recorded curve ends before max_epochs (stopped when recorded)
    INTERRUPTED = "interrupted"  # lost with a killed driver; its metered spend is kept
    STOPPED = "stopped"  # ended by something outside costtune (user, Tune's own stop)


@runtime_checkable
class ReasonSource(Protocol):
    """What says why it ended a trial (the stopper, a scheduler, the idle watchdog): the
    reason's value (a :class:`StopReason` value), or ``None`` when it did not end it."""

    def stop_reason(self, trial_id: str) -> str | None: ...


def reason_of(stop_reason: str | None, status: str) -> str:
    """The reason a trial's row shows: its recorded stop reason, else ``interrupted`` while it
    is still RUNNING in the log (a killed driver), else its status (``error``)."""
    if stop_reason:
        return stop_reason
    return StopReason.INTERRUPTED.value if status == "RUNNING" else status.lower()
