"""Decisions are values: the policy returns them, an adapter (Ray, a simulator) acts."""

from __future__ import annotations

from enum import Enum


class Decision(str, Enum):
    """What should happen to a trial after it reported."""

    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"


class StopReason(str, Enum):
    """Why a trial ended; the ``stop_reason`` column of ``trials.csv``."""

    RUNG_PRUNED = "rung_pruned"
    COMPLETED = "completed"
    ERROR = "error"
    STOPPED = "stopped"  # ended by something outside costtune (user, Tune's own stop)
