"""The budget gate: may this sweep run as configured? (``costtune gate``, and before every sweep.)

Policy: no single trial may exceed ``budget.max_hours_per_trial`` (48 h) or
``budget.max_cost_usd_per_trial`` ($300) in the worst case, nor the sweep its
``budget.max_cost_usd``, and grid search always needs sign-off — unless the config carries
an ``approval:`` block (sample justification, estimated resources, stop conditions,
approver). Pure: config and estimate in, a verdict out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from costtune.core.config import SweepConfig
from costtune.core.estimate import Estimate
from costtune.errors import CosttuneError


class GateFailed(CosttuneError):
    """The sweep is over the limits (or a grid search) and carries no approval."""


@dataclass(frozen=True)
class GateResult:
    passed: bool
    over_limits: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    limits: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "over_limits": self.over_limits,
            "notes": self.notes,
            "limits": self.limits,
        }

    def message(self) -> str:
        return "; ".join(self.over_limits + [n for n in self.notes if n.startswith("add ")])


def check(
    config: SweepConfig,
    estimate: Estimate | None,
    max_cost_usd_per_trial: float | None = None,
    max_hours_per_trial: float | None = None,
    max_cost_usd: float | None = None,
) -> GateResult:
    """Check ``config`` (and its ``estimate``, when the epoch time is known) against the limits.

    Limits default to the config's ``budget`` section; the arguments override them.
    """
    per_trial_usd = (
        max_cost_usd_per_trial if max_cost_usd_per_trial is not None else config.budget.max_cost_usd_per_trial
    )
    per_trial_h = (
        max_hours_per_trial if max_hours_per_trial is not None else config.budget.max_hours_per_trial
    )
    sweep_usd = max_cost_usd if max_cost_usd is not None else config.budget.max_cost_usd
    over: list[str] = []
    notes: list[str] = []
    if config.searcher.type == "grid":
        trials = estimate.trials if estimate else None
        over.append("grid search" + (f" of {trials} trials" if trials else "") + " needs an approved plan")
    if estimate is None:
        notes.append("cost not checked: no epoch time (set cost.epoch_seconds or use --calibrate)")
    else:
        if estimate.worst_trial_cost_usd > per_trial_usd:
            over.append(
                f"worst-case trial cost ${estimate.worst_trial_cost_usd:,.2f} exceeds "
                f"the ${per_trial_usd:,.2f} per-trial limit"
            )
        if estimate.worst_trial_hours > per_trial_h:
            over.append(
                f"worst-case trial time {estimate.worst_trial_hours:,.1f} h exceeds "
                f"the {per_trial_h:g} h per-trial limit"
            )
        if sweep_usd is not None and estimate.worst_cost_usd > sweep_usd:
            over.append(
                f"worst-case sweep cost ${estimate.worst_cost_usd:,.2f} exceeds "
                f"the ${sweep_usd:,.2f} sweep budget"
            )
    limits = {
        "max_cost_usd_per_trial": per_trial_usd,
        "max_hours_per_trial": per_trial_h,
        "max_cost_usd": sweep_usd,
    }
    if not over:
        return GateResult(True, [], notes, limits)
    if config.approval is not None:
        notes.append(f"approved by {config.approval.approver}: {config.approval.justification}")
        return GateResult(True, over, notes, limits)
    notes.append(
        "add an approval: block (justification, estimated_resources, stop_conditions, approver), "
        "or reduce the sweep"
    )
    return GateResult(False, over, notes, limits)
