"""A recorded pool replayed under costtune's decisions: what ``costtune replay`` runs.

:func:`replay_pool` builds the scheduler and searcher from settings named as
``costtune replay``'s options name them, and runs the discrete-event simulator
(:mod:`costtune.core.simulate`) over the pool. The command and the benchmarks call this one
function, so a benchmark row at the default settings is what a user's replay does, dollar
for dollar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from costtune.core.curves import Curve
from costtune.core.policy import AsyncHyperband, MarginalRoiStopping
from costtune.core.policy.defaults import DEFAULTS
from costtune.core.simulate import Simulation, simulate


@dataclass(frozen=True)
class ReplaySettings:
    """A replay's settings. ``costtune replay`` sets the rungs (``--grace-epochs`` is
    ``grace_epochs``, and so on), the searcher, the seed, the budget, the workers and the
    price."""

    scheduler: str = "hyperband"  # hyperband | fifo
    grace_epochs: int = DEFAULTS.grace_epochs
    eta: int = DEFAULTS.eta
    brackets: int | None = DEFAULTS.brackets
    searcher: str = "order"  # order | random | tpe | gp
    seed: int = 0
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
    extra: dict[str, Any] = field(default_factory=dict)


def policy_of(s: ReplaySettings, max_epochs: int) -> AsyncHyperband | None:
    """The replay's scheduler (``None`` with ``scheduler: fifo``) over recorded curves of up
    to ``max_epochs`` epochs."""
    if s.scheduler != "hyperband":
        return None
    return AsyncHyperband(max_epochs, s.grace_epochs, s.eta, s.brackets)


def replay_pool(
    table: Sequence[Curve],
    s: ReplaySettings,
    policy: AsyncHyperband | None = None,
    stopping: MarginalRoiStopping | None = None,
) -> Replay:
    """Replay ``table`` under ``s`` (raises :class:`ConfigError` in one line on a bad combination).
    ``policy``: a scheduler of the caller's instead of the one ``s`` names (the benchmarks'
    variants of :class:`~costtune.core.policy.AsyncHyperband`); ``stopping``: a per-trial
    stopping rule (none by default, as a sweep's). Once no configuration is left, the policy's
    :meth:`~costtune.core.policy.AsyncHyperband.next_promotion` takes up the trials a rung
    stopped that make its cut as it stands, as a sweep's scheduler does; a ``policy`` with a
    ``thaw()`` method (the benchmarks' freeze-thaw) is asked instead when ``s.budget`` is set."""
    from costtune.search.pool import OrderedPool, SamplerPool

    longest = max(c.epochs for c in table)
    if policy is None:
        policy = policy_of(s, longest)
    pool: Any = (
        SamplerPool(table, s.searcher, seed=s.seed)
        if s.searcher in ("tpe", "gp")
        else OrderedPool(table, seed=s.seed if s.searcher == "random" else None)
    )
    simulation = simulate(
        [],
        policy,
        workers=s.workers,
        usd_per_device_hour=s.price,
        budget_usd=s.budget,
        stopping=stopping,
        max_epochs=longest,
        next_curve=pool.ask,
        on_trial_end=pool.tell,
        thaw=_promotions(policy, s),
    )
    return Replay(simulation, policy, s, longest)


def _promotions(policy: AsyncHyperband | None, s: ReplaySettings) -> Callable[[], str | None] | None:
    """What names a stopped trial to take up again once no configuration is left."""
    if policy is None:
        return None
    thaw = getattr(policy, "thaw", None) if s.budget is not None else None
    return thaw if thaw is not None else policy.next_promotion
