"""Pure decisions: no Ray, no torch, no clock. Every scheduling choice is a function of numbers."""

from __future__ import annotations

from costtune.policy.decisions import Decision, StopReason
from costtune.policy.hyperband import AsyncHyperband, bracket_weights
from costtune.policy.stopping import (
    Governor,
    MarginalRoiStopping,
    StoppingRule,
    SweepBudget,
    SweepProgress,
    cap_reason,
)
from costtune.policy.successive_halving import (
    PromotionRule,
    RungEntry,
    is_promotable,
    max_bracket_index,
    pareto_fronts,
    rung_epochs,
)

__all__ = [
    "AsyncHyperband",
    "Decision",
    "Governor",
    "MarginalRoiStopping",
    "PromotionRule",
    "RungEntry",
    "StopReason",
    "StoppingRule",
    "SweepBudget",
    "SweepProgress",
    "bracket_weights",
    "cap_reason",
    "is_promotable",
    "max_bracket_index",
    "pareto_fronts",
    "rung_epochs",
]
