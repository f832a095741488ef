"""Freeze-thaw on the rungs: once a sweep has no configuration left to start and money
remains, a trial a rung stopped is taken up again where it stopped.

:class:`ThawHyperband` is costtune's rungs plus :meth:`ThawHyperband.thaw`, which the
simulator (``costtune.core.simulate``) calls when a worker is free and no configuration is
left. Until then it decides as the rungs, event for event, so a run that reaches its target
before the configurations run out reaches it at the same dollars. Which stopped trial goes
first (``order``):

- ``quantile``: the one whose rank at the highest rung it reached was best, as a share of
  that rung (rank 3 of 50 before rank 20 of 250): the rungs' cut loosened evenly, as if η had
  been smaller from the start;
- ``deepest``: the best-ranked one at the highest rung that holds a stopped trial (the order
  in which ASHA promotes);
- ``cut``: as ``deepest``, but only a trial that makes its rung's cut as the rung stands now
  (the top max(1, ⌊n/η⌋) of its n trials); when none does, thawing ends. An asynchronous rung
  judges a trial against those that reached it before; this takes up what the rung, judged
  again once every configuration has reached it, would have kept (the promotions of
  synchronous successive halving, and of the ASHA paper's promotion rule), and ends by
  itself, without a budget. It is costtune's default now
  (:meth:`~costtune.core.policy.AsyncHyperband.next_promotion`), kept here as the order it was
  measured as.

A thawed trial goes on to its next rung and is judged there like any other. ``share`` caps
what thawing may spend, as a share of what the sweep had spent when it began (``None``:
until the sweep's budget).
"""

from __future__ import annotations

import math
from typing import Any

from costtune.core.policy import Decision, StopReason
from costtune.core.policy.hyperband import AsyncHyperband

ORDERS = ("quantile", "deepest", "cut")


class ThawHyperband(AsyncHyperband):
    def __init__(
        self, *args: Any, order: str = "quantile", share: float | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        if order not in ORDERS:
            raise ValueError(f"thaw: one of {ORDERS}, got {order!r}")
        if share is not None and not share > 0:
            raise ValueError(f"thaw_share: a positive share or None, got {share!r}")
        self.order = order
        self.share = share
        self.thawed: list[str] = []  # in the order they were taken up (a trial may recur)
        self._spent: dict[str, float] = {}
        self._spent_before: float | None = None  # the sweep's dollars when thawing began

    @property
    def spent(self) -> float:
        """The sweep's dollars so far, as the trials' results reported them."""
        return sum(self._spent.values())

    def on_result(self, trial_id: str, epoch: int, loss: float, cost_usd: float) -> Decision:
        self._spent[trial_id] = float(cost_usd)
        return super().on_result(trial_id, epoch, loss, cost_usd)

    def thaw(self) -> str | None:
        """The stopped trial to take up next (``None``: none is left, or ``share`` is spent)."""
        if self._spent_before is None:
            self._spent_before = self.spent
        if self.share is not None and self.spent - self._spent_before >= self.share * self._spent_before:
            return None
        if self.order == "cut":  # costtune's own late promotion, the rungs' default
            taken = self.next_promotion()
            if taken is not None:
                self.thawed.append(taken)
            return taken
        best: tuple[Any, ...] | None = None
        chosen = None
        for trial_id, state in self.trials.items():
            if state.stop_reason is not StopReason.RUNG_PRUNED:
                continue
            rungs = self.rungs[state.bracket]
            at = max((r for r, rung in rungs.items() if trial_id in rung), default=None)
            if at is None or math.isnan(rungs[at][trial_id].loss):
                continue
            rung = rungs[at]
            share = rung.ahead(trial_id) / len(rung)
            key = (share, -at, trial_id) if self.order == "quantile" else (-at, share, trial_id)
            if best is None or key < best:
                best, chosen = key, trial_id
        if chosen is not None:
            self.trials[chosen].stop_reason = None
            self.thawed.append(chosen)
            self.version += 1
        return chosen
