"""The benchmarks' promotion rules for a rung, beside costtune's own (the top max(1, ⌊n/η⌋)
by loss, :func:`costtune.core.policy.successive_halving.is_promotable`). costtune does not ship
them; ``families.py`` ablates them against it.

Every rule orders the rung best-first and promotes a trial whose place in that order starts
inside the first 1/η of the rung's *weight*:

- ``loss``: weight 1 per trial, ordered by loss: the top max(1, ⌊n/η⌋) go on (``keep=floor``,
  costtune's and Optuna's) or ⌈n/η⌉ (``keep=ceil``, ASHA's).
- ``cost_share``: weight = the trial's metered dollars so far, ordered by loss: trials are
  promoted best-by-loss first until the promoted ones hold 1/η of what the rung's trials
  cost. The trial that crosses the share is promoted too.
- ``pareto``: weight 1, ordered by (non-dominated front of (loss, dollars), loss).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum

from costtune.core.policy.ranking import pareto_fronts
from costtune.core.policy.successive_halving import RungEntry


class PromotionRule(str, Enum):
    LOSS = "loss"
    COST_SHARE = "cost_share"
    PARETO = "pareto"


class Keep(str, Enum):
    """How many of a rung's n trials go on: ⌈n/η⌉ (ASHA, Ray Tune) or max(1, ⌊n/η⌋) (Optuna)."""

    CEIL = "ceil"
    FLOOR = "floor"


def promoted_count(n: int, eta: int, keep: Keep = Keep.FLOOR) -> int:
    """How many of the ``n`` trials recorded at a rung are promoted (by count)."""
    return max(1, n // eta) if keep is Keep.FLOOR else -(-n // eta)


def is_promotable(
    trial_id: str,
    rung: Mapping[str, RungEntry],
    eta: int,
    rule: PromotionRule = PromotionRule.LOSS,
    keep: Keep = Keep.FLOOR,
) -> bool:
    """Whether ``trial_id`` (already recorded in ``rung``) goes on past this rung under
    ``rule`` and ``keep`` (see the module docstring); a NaN loss never does. One pass over the
    rung (the benchmarks' rungs hold hundreds of trials, not millions)."""
    me = rung[trial_id]
    if math.isnan(me.loss):
        return False
    if rule is PromotionRule.PARETO:
        ids = list(rung)
        fronts = pareto_fronts([(_key(rung[i].loss), rung[i].cost_usd) for i in ids])
        order = sorted(range(len(ids)), key=lambda k: (fronts[k], _key(rung[ids[k]].loss), ids[k]))
        position = next(p for p, k in enumerate(order) if ids[k] == trial_id)
        return position < promoted_count(len(ids), eta, keep)
    by_cost = rule is PromotionRule.COST_SHARE
    key = (_key(me.loss), trial_id)
    ahead = total = 0.0
    for other_id, entry in rung.items():
        weight = max(entry.cost_usd, 0.0) if by_cost else 1.0
        total += weight
        if (_key(entry.loss), other_id) < key:
            ahead += weight
    if not by_cost:
        return ahead < promoted_count(len(rung), eta, keep)
    if total <= 0:  # nothing metered yet: fall back to counting trials
        total = float(len(rung))
        ahead = float(sum((_key(e.loss), i) < key for i, e in rung.items()))
    return ahead < total / eta


def _key(loss: float) -> float:
    """NaN losses sort last."""
    return math.inf if math.isnan(loss) else loss
