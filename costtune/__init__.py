"""costtune: cost-aware hyperparameter search on Ray Tune.

The core (``costtune.core.cost``, ``costtune.core.ledger``, ``costtune.core.policy``) imports neither
Ray nor torch; the names below that need them are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from costtune.core.cost import CostModel, roi
from costtune.core.ledger import Ledger, LedgerSpec
from costtune.core.policy import AsyncHyperband, Decision, StopReason
from costtune.errors import BudgetExceeded, ConfigError, CosttuneError

if TYPE_CHECKING:
    from costtune.core.config import SweepConfig, load_config
    from costtune.ray import CostAwareHyperBand
    from costtune.results import SweepResult, load_run
    from costtune.sweep import resume_sweep, run_sweep

__version__ = "0.1.0"

_LAZY = {
    "run_sweep": "costtune.sweep",
    "resume_sweep": "costtune.sweep",
    "SweepResult": "costtune.results",
    "load_run": "costtune.results",
    "load_config": "costtune.core.config",
    "SweepConfig": "costtune.core.config",
    "CostAwareHyperBand": "costtune.ray",
}

__all__ = [
    "AsyncHyperband",
    "BudgetExceeded",
    "ConfigError",
    "CostAwareHyperBand",
    "CostModel",
    "CosttuneError",
    "Decision",
    "Ledger",
    "LedgerSpec",
    "StopReason",
    "SweepConfig",
    "SweepResult",
    "load_config",
    "load_run",
    "resume_sweep",
    "roi",
    "run_sweep",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'costtune' has no attribute {name!r}")
