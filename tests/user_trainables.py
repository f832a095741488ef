"""Function trainables referenced from test configs as ``tests.user_trainables:NAME``."""

from __future__ import annotations

from ray import tune


def quadratic(config: dict) -> None:
    """A user's own trainable: loss falls towards (x - 0.3)^2 over the epochs."""
    for epoch in range(1, int(config["max_epochs"]) + 1):
        tune.report({"loss": (config["x"] - 0.3) ** 2 + 1.0 / epoch})
