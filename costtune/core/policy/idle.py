"""How long each process or trial has left its GPUs idle: the watchdog's pure decision."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class IdleTracker:
    """How long each key (a pid, a trial) has stayed below ``util_below_pct``.

    Pure: feed it (key, time, utilisation); any reading at or above the threshold resets
    the key's idle clock.
    """

    util_below_pct: float = 1.0
    idle_seconds: float = 7200.0
    since: dict[Any, float] = field(default_factory=dict)

    def observe(self, key: Any, now: float, utilization_pct: float) -> float:
        """Record a reading; returns how long ``key`` has been idle (0 when busy)."""
        if utilization_pct < self.util_below_pct:
            start = self.since.setdefault(key, now)
            return now - start
        self.since.pop(key, None)
        return 0.0

    def is_idle(self, idle_for: float) -> bool:
        return idle_for >= self.idle_seconds

    def forget(self, key: Any) -> None:
        self.since.pop(key, None)
