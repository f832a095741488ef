"""costtune: cost-aware hyperparameter search on Ray Tune.

The core (``costtune.cost``, ``costtune.ledger``, ``costtune.policy``) imports neither
Ray nor torch; the names below that need them are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from costtune.cost import CostModel, roi
from costtune.errors import BudgetExceeded, ConfigError, CosttuneError
from costtune.ledger import Ledger, LedgerSpec
from costtune.policy import AsyncHyperband, Decision, PromotionRule, StopReason

if TYPE_CHECKING:
    from costtune.config import SweepConfig, load_config
    from costtune.results import SweepResult, load_run
    from costtune.schedulers import CostAwareHyperBand
    from costtune.sweep import resume_sweep, run_sweep

__version__ = "0.1.0"

_LAZY = {
    "run_sweep": "costtune.sweep",
    "resume_sweep": "costtune.sweep",
    "SweepResult": "costtune.results",
    "load_run": "costtune.results",
    "load_config": "costtune.config",
    "SweepConfig": "costtune.config",
    "CostAwareHyperBand": "costtune.schedulers",
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
    "PromotionRule",
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
