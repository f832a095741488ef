"""One exception root for costtune; the CLI alone maps these to exit codes."""

from __future__ import annotations


class CosttuneError(Exception):
    """Base of every error costtune raises on purpose."""


class ConfigError(CosttuneError):
    """A sweep config (or a CLI argument standing in for one) is invalid.

    The message is one line that names the field, e.g. ``scheduler.eta: must be >= 2, got 1``.
    """


class BudgetExceeded(CosttuneError):
    """A sweep or trial would spend more than it is allowed to."""


class SweepFailed(CosttuneError):
    """A sweep started but could not do its job: every trial failed, or Ray Tune stopped it.

    The message is one line; ``result`` is what was metered before (also on disk).
    """

    def __init__(self, message: str, result: object | None = None) -> None:
        super().__init__(message)
        self.result = result
