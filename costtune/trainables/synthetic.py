"""A synthetic learning curve: a trainable that costs (almost) nothing, for load tests.

loss(epoch) = (x − 0.3)² + 1 / epoch; no checkpoints, no torch.
"""

from __future__ import annotations

from typing import Any


def curve(config: dict[str, Any]) -> None:
    from ray import tune

    for epoch in range(1, int(config["max_epochs"]) + 1):
        tune.report({"loss": (float(config.get("x", 0.0)) - 0.3) ** 2 + 1.0 / epoch})
