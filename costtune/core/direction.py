"""Which way a metric improves: the one place the sign of a metric is decided.

Every comparison, ranking and improvement of a metric goes through a :class:`Direction`, so
that "lower is better" (a loss, ``mode: min``) and "higher is better" (an accuracy, ``mode:
max``) cannot disagree between the ledger, the schedulers, the stoppers and the report.
Pure stdlib. A ``Direction`` is a ``str`` (``Direction.MIN == "min"``), so configs, JSON
and Ray's ``mode`` carry it as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from enum import Enum
from typing import Any

from costtune.errors import ConfigError


class Direction(str, Enum):
    MIN = "min"
    MAX = "max"

    @classmethod
    def of(cls, mode: Any) -> Direction:
        """``mode`` (``"min"``/``"max"`` or a Direction) as a Direction; a one-line error else."""
        try:
            return cls(mode)
        except ValueError:
            raise ConfigError(f"mode: must be 'min' or 'max', got {mode!r}") from None

    def loss(self, value: Any) -> float:
        """The metric as a loss (lower is better); NaN for what is not a number."""
        try:
            v = float(value)
        except (TypeError, ValueError):
            return math.nan
        return v if self is Direction.MIN else -v

    def improvement(self, baseline: float, value: float) -> float:
        """How much ``value`` improves on ``baseline``: positive when it is better."""
        return baseline - value if self is Direction.MIN else value - baseline

    def better(self, value: float, than: float) -> bool:
        """``value`` strictly better than ``than``; any number beats NaN, NaN beats nothing."""
        if math.isnan(value):
            return False
        return math.isnan(than) or self.improvement(than, value) > 0

    def best(self, values: Iterable[float]) -> float:
        """The best of ``values`` (NaNs ignored); NaN when there is none."""
        numbers = [v for v in values if not math.isnan(v)]
        if not numbers:
            return math.nan
        return min(numbers) if self is Direction.MIN else max(numbers)

    def worst(self, values: Iterable[float]) -> float:
        """The worst of ``values`` (NaNs ignored); NaN when there is none."""
        numbers = [v for v in values if not math.isnan(v)]
        if not numbers:
            return math.nan
        return max(numbers) if self is Direction.MIN else min(numbers)

    @property
    def ascending(self) -> bool:
        """Whether sorting ascending puts the best first."""
        return self is Direction.MIN

    @property
    def optuna(self) -> str:
        """Optuna's name for it: ``"minimize"`` or ``"maximize"``."""
        return "minimize" if self is Direction.MIN else "maximize"
