"""Pure decisions: no Ray, no torch, no clock. Every scheduling choice is a function of numbers."""

from __future__ import annotations

from costtune.core.policy.decisions import Decision, ReasonSource, StopReason, reason_of
from costtune.core.policy.hyperband import AsyncHyperband, bracket_weights
from costtune.core.policy.idle import IdleTracker
from costtune.core.policy.pbt import Exploit, Member, Mutation, choose_donor, explore, quantiles
from costtune.core.policy.ranking import pareto_fronts
from costtune.core.policy.stopping import (
    Governor,
    MarginalRoiStopping,
    StoppingRule,
    SweepBudget,
    SweepProgress,
    cap_reason,
    metric_reason,
)
from costtune.core.policy.successive_halving import (
    Rung,
    RungEntry,
    is_promotable,
    max_bracket_index,
    rung_epochs,
)

__all__ = [
    "AsyncHyperband",
    "Decision",
    "Exploit",
    "Governor",
    "IdleTracker",
    "MarginalRoiStopping",
    "Member",
    "Mutation",
    "ReasonSource",
    "Rung",
    "RungEntry",
    "StopReason",
    "StoppingRule",
    "SweepBudget",
    "SweepProgress",
    "bracket_weights",
    "cap_reason",
    "choose_donor",
    "explore",
    "is_promotable",
    "max_bracket_index",
    "metric_reason",
    "pareto_fronts",
    "quantiles",
    "reason_of",
    "rung_epochs",
]
