"""A recorded pool replayed under costtune's decisions: what ``costtune replay`` runs.

:func:`replay_pool` builds the scheduler, stopping rule and searcher from settings named as
``costtune replay``'s options name them, and runs the discrete-event simulator
(:mod:`costtune.core.simulate`) over the pool. The command and the benchmarks call this one
function, so a benchmark row at the default settings is what a user's replay does, dollar
for dollar.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from costtune.core.curves import Curve
from costtune.core.policy import (
    AsyncHyperband,
    MarginalRoiStopping,
    OutlookRule,
    OutlookStopping,
    StoppingRule,
    auto_warmup_trials,
)
from costtune.core.policy.defaults import DEFAULTS
from costtune.core.simulate import Simulation, simulate


@dataclass(frozen=True)
class ReplaySettings:
    """A replay's settings. ``costtune replay`` sets the rungs (``--grace-epochs`` is
    ``grace_epochs``, and so on), the searcher, the seed, the budget, the workers and the
    price; the others, at their defaults, are the mechanisms the benchmarks ablate against
    the rungs alone (``benchmarks/families.py``), which no sweep sets."""

    scheduler: str = "hyperband"  # hyperband | fifo
    grace_epochs: int = DEFAULTS.grace_epochs
    eta: int = DEFAULTS.eta
    brackets: int | None = DEFAULTS.brackets
    promotion: str = DEFAULTS.promotion
    keep: str = DEFAULTS.keep
    lookahead: int = DEFAULTS.lookahead or 0  # 0: off
    warmup_trials: int | str | None = DEFAULTS.warmup_trials  # "auto", a count, or None / 0: off
    escalate: bool = DEFAULTS.escalate
    hedge: bool = DEFAULTS.hedge
    hedge_judges: str = DEFAULTS.hedge_judges
    rung_checks: int = DEFAULTS.rung_checks
    searcher: str = "order"  # order | random | tpe | gp
    seed: int = 0
    stopping: str = "none" if DEFAULTS.min_relative_roi is None else "relative"
    rho: float = DEFAULTS.min_relative_roi or 0.3
    noise_aware: bool = DEFAULTS.noise_aware
    optimism: float = 1.0
    budget: float | None = None
    workers: int = 1
    price: float = 2.50

    def with_(self, **changes: Any) -> ReplaySettings:
        return replace(self, **changes)


@dataclass
class Replay:
    """The replay's run and the policy that decided it (``None`` with ``scheduler: fifo``)."""

    simulation: Simulation
    policy: AsyncHyperband | None
    settings: ReplaySettings
    longest: int
    warmup: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def policy_of(s: ReplaySettings, max_epochs: int, configurations: int) -> AsyncHyperband | None:
    """The replay's scheduler (``None`` with ``scheduler: fifo``) over ``configurations``
    recorded curves of up to ``max_epochs`` epochs."""
    if s.scheduler != "hyperband":
        return None
    warmup = (
        auto_warmup_trials(s.eta, configurations)
        if s.warmup_trials == "auto"
        else int(s.warmup_trials or 0) or None
    )
    return AsyncHyperband(
        max_epochs,
        s.grace_epochs,
        s.eta,
        s.brackets,
        s.promotion,
        s.keep,
        s.lookahead or None,
        warmup,
        s.escalate,
        rung_checks=s.rung_checks,
        hedge=s.hedge and s.escalate,
        judge_every_bracket=s.hedge_judges == "every_bracket",
    )


def replay_pool(table: Sequence[Curve], s: ReplaySettings) -> Replay:
    """Replay ``table`` under ``s`` (raises :class:`ConfigError` in one line on a bad combination)."""
    from costtune.search.pool import OrderedPool, SamplerPool

    longest = max(c.epochs for c in table)
    policy = policy_of(s, longest, len(table))
    warmup = policy.warmup_trials if policy is not None else None
    pool: Any = (
        SamplerPool(table, s.searcher, seed=s.seed)
        if s.searcher in ("tpe", "gp")
        else OrderedPool(table, seed=s.seed if s.searcher == "random" else None)
    )
    outlook = OutlookStopping(OutlookRule(longest, optimism=s.optimism)) if s.stopping == "outlook" else None
    relative = (
        MarginalRoiStopping(
            StoppingRule(
                min_relative_roi=s.rho,
                spare_best=True,
                max_epochs=longest,
                expected=s.stopping == "expected",
                noise_aware=s.noise_aware and s.stopping == "relative",
            )
        )
        if s.stopping in ("relative", "expected")
        else None
    )
    simulation = simulate(
        [],
        policy,
        workers=s.workers,
        usd_per_device_hour=s.price,
        budget_usd=s.budget,
        stopping=relative,
        outlook=outlook,
        max_epochs=longest,
        next_curve=pool.ask,
        on_trial_end=pool.tell,
    )
    return Replay(simulation, policy, s, longest, warmup)
