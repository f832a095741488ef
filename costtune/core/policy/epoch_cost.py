"""What an epoch of a configuration will cost, learned from the epochs a sweep has run.

A configuration's seconds per epoch (batch size, width, depth …) can differ tenfold inside
one search space, and a sweep pays for every epoch it starts. This model predicts a new
configuration's seconds per epoch from the configurations that ran: k nearest neighbours in
the search space scaled to [0, 1] (log-scaled where the parameter is), averaged in log
seconds, weighted by inverse distance. It needs no prior and knows nothing of the model
being trained; with too few observations it declines to predict (:meth:`ready`).

Pure: numbers in, numbers out; deterministic (ties go to the first candidate).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class _Dimension(Protocol):
    kind: str
    low: float | None
    high: float | None


def _scaled(spec: _Dimension, value: Any) -> float | str:
    """``value`` on [0, 1] (log-scaled for log kinds); a choice stays itself."""
    if spec.kind == "choice" or spec.low is None or spec.high is None:
        return str(value)
    low, high, x = float(spec.low), float(spec.high), float(value)
    if spec.kind.startswith("log"):
        low, high, x = math.log(low), math.log(high), math.log(max(x, 1e-300))
    return 0.0 if high == low else min(max((x - low) / (high - low), 0.0), 1.0)


@dataclass
class EpochCostModel:
    """Seconds per epoch of a configuration, from the configurations that ran.

    Args:
        space: parameter name → its kind and bounds (``kind``: ``uniform``, ``loguniform``,
            ``int``, ``logint`` or ``choice``; ``low``, ``high``).
        neighbours: k of the k-nearest-neighbour average.
        min_observations: below this many observed configurations it does not predict.
    """

    space: Mapping[str, _Dimension]
    neighbours: int = 5
    min_observations: int = 8
    _seen: list[tuple[list[float | str], float]] = field(default_factory=list)

    def _point(self, config: Mapping[str, Any]) -> list[float | str]:
        return [_scaled(spec, config[name]) for name, spec in self.space.items()]

    def observe(self, config: Mapping[str, Any], seconds_per_epoch: float) -> None:
        """A configuration ran, at this many seconds per epoch (its mean over what it ran)."""
        if seconds_per_epoch > 0 and math.isfinite(seconds_per_epoch):
            self._seen.append((self._point(config), math.log(seconds_per_epoch)))

    def ready(self) -> bool:
        return len(self._seen) >= self.min_observations

    def predict(self, config: Mapping[str, Any]) -> float:
        """Predicted seconds per epoch (NaN before :meth:`ready`)."""
        if not self.ready():
            return math.nan
        point = self._point(config)

        def distance(other: list[float | str]) -> float:
            total = 0.0
            for a, b in zip(point, other, strict=True):
                if isinstance(a, str) or isinstance(b, str):
                    total += 0.0 if a == b else 1.0
                else:
                    total += (a - b) ** 2
            return math.sqrt(total)

        nearest = sorted((distance(p), log_s) for p, log_s in self._seen)[: self.neighbours]
        weights = [1.0 / (d + 1e-6) for d, _ in nearest]
        return math.exp(sum(w * s for w, (_, s) in zip(weights, nearest, strict=True)) / sum(weights))

    def cheapest(self, configs: Sequence[Mapping[str, Any]]) -> int:
        """Index of the configuration predicted cheapest per epoch (0 before :meth:`ready`)."""
        if not self.ready() or not configs:
            return 0
        predicted = [self.predict(c) for c in configs]
        return min(range(len(configs)), key=lambda i: (predicted[i], i))
