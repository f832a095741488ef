"""Population-based training decisions (Jaderberg et al., 2017), pure and seeded.

Every ``perturbation_interval`` epochs a trial is ranked against the population: the
bottom ``quantile_fraction`` copies the checkpoint of a trial from the top fraction
(*exploit*) and perturbs or resamples its hyperparameters (*explore*).

Cost enters where it does not outrank quality (../shared/DESIGN.md): the quantiles are
by loss (``key="loss"``) or by Pareto front of (loss, dollars per epoch) then loss
(``key="pareto"``); among the top trials, a cheaper donor is proportionally more likely
to be copied (weight 1 / dollars per epoch). Cost is conserved by construction: a clone
pays for its own epochs only (the ledger meters each epoch's own time), never the donor's.

All randomness comes from the ``random.Random`` passed in: same seed, same decisions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from costtune.core.policy.ranking import pareto_fronts


@dataclass(frozen=True, slots=True)
class Member:
    """A trial as PBT sees it: its latest loss and what one of its epochs costs."""

    trial_id: str
    loss: float
    usd_per_epoch: float


@dataclass(frozen=True, slots=True)
class Mutation:
    """How one hyperparameter may move: ``uniform | loguniform | int | logint | choice``."""

    kind: str
    low: float | None = None
    high: float | None = None
    values: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Exploit:
    """A decision: ``trial_id`` takes ``source_id``'s checkpoint and runs ``new_config``."""

    trial_id: str
    source_id: str
    new_config: dict[str, Any]
    operations: dict[str, str]


def quantiles(members: list[Member], fraction: float, key: str = "loss") -> tuple[list[str], list[str]]:
    """(bottom, top) trial ids; both empty when fewer than two trials have a loss.

    Each holds ⌈n·fraction⌉ trials, at most ⌊n/2⌋, as in Ray's PBT.
    """
    valid = [m for m in members if not math.isnan(m.loss)]
    if len(valid) <= 1:
        return [], []
    if key == "pareto":
        fronts = pareto_fronts([(m.loss, m.usd_per_epoch) for m in valid])
        order = [
            m
            for _, m in sorted(
                zip(fronts, valid, strict=True), key=lambda p: (p[0], p[1].loss, p[1].trial_id)
            )
        ]
    else:
        order = sorted(valid, key=lambda m: (m.loss, m.trial_id))
    k = math.ceil(len(order) * fraction)
    if k > len(order) / 2:
        k = len(order) // 2
    return [m.trial_id for m in order[len(order) - k :]], [m.trial_id for m in order[:k]]


def choose_donor(top: list[Member], rng: random.Random) -> str:
    """A top trial to copy; cheaper per epoch ⇒ proportionally more likely."""
    weights = [1.0 / m.usd_per_epoch if m.usd_per_epoch > 0 else 1.0 for m in top]
    return rng.choices([m.trial_id for m in top], weights=weights, k=1)[0]


def explore(
    config: Mapping[str, Any],
    mutations: Mapping[str, Mutation],
    rng: random.Random,
    resample_probability: float = 0.25,
    factors: tuple[float, float] = (1.2, 0.8),
) -> tuple[dict[str, Any], dict[str, str]]:
    """Perturb (×1.2 / ×0.8, or one step along a choice list) or resample each mutable key."""
    new = dict(config)
    ops: dict[str, str] = {}
    for key, m in mutations.items():
        old = config.get(key)
        if old is None or rng.random() < resample_probability:
            new[key] = sample(m, rng)
            ops[key] = "resample"
        elif m.kind == "choice":
            i = m.values.index(old) if old in m.values else 0
            j = min(max(i + rng.choice((-1, 1)), 0), len(m.values) - 1)
            new[key] = m.values[j]
            ops[key] = f"shift {i}->{j}"
        else:
            factor = rng.choice(factors)
            value = min(
                max(float(old) * factor, float(m.low or 0)), float(m.high if m.high is not None else math.inf)
            )
            new[key] = round(value) if m.kind in ("int", "logint") else value
            ops[key] = f"* {factor}"
    return new, ops


def sample(m: Mutation, rng: random.Random) -> Any:
    if m.kind == "choice":
        return rng.choice(m.values)
    low, high = float(m.low or 0.0), float(m.high or 0.0)
    if m.kind in ("loguniform", "logint"):
        value = math.exp(rng.uniform(math.log(low), math.log(high)))
    else:
        value = rng.uniform(low, high)
    return round(value) if m.kind in ("int", "logint") else value
