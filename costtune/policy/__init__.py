"""Pure decisions: no Ray, no torch, no clock. Every scheduling choice is a function of numbers."""

from __future__ import annotations

from costtune.policy.decisions import Decision, StopReason
from costtune.policy.hyperband import AsyncHyperband, bracket_weights
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
    "PromotionRule",
    "RungEntry",
    "StopReason",
    "bracket_weights",
    "is_promotable",
    "max_bracket_index",
    "pareto_fronts",
    "rung_epochs",
]
