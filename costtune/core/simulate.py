"""A discrete-event simulator: costtune's pure policy on recorded curves, no Ray.

N virtual workers take configurations in order and train them epoch by epoch on a
simulated clock (each epoch takes its recorded ``epoch_seconds``); after every epoch the
policy decides. The clock is simulated only: the same inputs give the same run, event for
event (the host's decision time is measured and, only when asked, charged). Every epoch
is metered at ``usd_per_device_hour`` × the configuration's devices. The run ends when the
configurations (and any trial a ``thaw`` hook takes up again) or the budget run out.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from costtune.core.curves import Curve
from costtune.core.policy import AsyncHyperband, Decision, MarginalRoiStopping, StopReason


@dataclass(frozen=True, slots=True)
class Epoch:
    """One simulated epoch: when it finished, whose, its loss and the sweep's spend so far."""

    clock_s: float
    config_id: str
    epoch: int
    val_loss: float
    sweep_usd: float


@dataclass
class Simulation:
    epochs: list[Epoch] = field(default_factory=list)
    stopped_at: dict[str, int] = field(default_factory=dict)
    #: trials whose recorded curve ended before max_epochs: never taken as finished
    truncated: set[str] = field(default_factory=set)
    decision_seconds: float = 0.0

    @property
    def total_usd(self) -> float:
        return self.epochs[-1].sweep_usd if self.epochs else 0.0

    @property
    def best_loss(self) -> float:
        return min((e.val_loss for e in self.epochs if not math.isnan(e.val_loss)), default=math.nan)

    @property
    def wall_clock_s(self) -> float:
        return max((e.clock_s for e in self.epochs), default=0.0)

    def losses_by_trial(self) -> dict[str, list[float]]:
        """Each trial's finite losses, in the order its epochs ran."""
        out: dict[str, list[float]] = {}
        for e in self.epochs:
            if math.isfinite(e.val_loss):
                out.setdefault(e.config_id, []).append(e.val_loss)
        return out

    def findings(self, max_epochs: int) -> list[Any]:
        """What the run's own curves say about its decisions
        (:func:`costtune.core.analysis.curve_findings`): the trials it stopped before ``max_epochs``,
        truncated ones aside, count as judged."""
        from costtune.core.analysis import curve_findings

        ended = self.stopped_at
        return curve_findings(
            self.losses_by_trial(),
            judged={t for t, e in ended.items() if e < max_epochs and t not in self.truncated},
            completed={t for t, e in ended.items() if e >= max_epochs},
            metric="val_loss",
            max_epochs=max_epochs,
        )

    def cost_to_target(self, target: float) -> float | None:
        """Dollars spent when any observed loss first reached ``target`` (None: never)."""
        for e in self.epochs:
            if e.val_loss <= target:
                return e.sweep_usd
        return None


def simulate(
    curves: Sequence[Curve],
    policy: AsyncHyperband | None = None,
    stopping: MarginalRoiStopping | None = None,
    workers: int = 1,
    usd_per_device_hour: float = 2.50,
    budget_usd: float | None = None,
    charge_decision_time: bool = False,
    max_epochs: int | None = None,
    next_curve: Callable[[], Curve | None] | None = None,
    on_trial_end: Callable[[str, int, float], None] | None = None,
    thaw: Callable[[], str | None] | None = None,
) -> Simulation:
    """Run ``curves`` (in order) through ``policy`` and/or ``stopping`` on ``workers`` workers.

    Without a policy every configuration trains to its last recorded epoch. With
    ``next_curve`` (a searcher in the loop), configurations are drawn from it once
    ``curves`` is used up; ``on_trial_end(config_id, last_epoch, last_loss)`` tells it how
    each trial ended.
    A curve shorter than ``max_epochs`` (a trial stopped early when it was recorded) ends at
    its last epoch as *truncated* (``Simulation.truncated``; the policy hears
    ``StopReason.TRUNCATED``), never as finished.
    ``charge_decision_time`` adds the host's measured decision time to the simulated clock
    (off by default: with it, runs on tied epoch times depend on the host's speed).
    ``thaw``, asked after every epoch while a worker is free and no configuration is left, names
    a trial the policy stopped to take up again at the epoch after the one it stopped at
    (``None``: none); the searcher is not told of it again (``costtune replay`` passes the
    rungs' :meth:`~costtune.core.policy.AsyncHyperband.next_promotion`).
    """
    sim = Simulation()
    queue = list(curves)
    running: list[tuple[float, int, int, str]] = []  # (finish time, tiebreak, epoch, config)
    by_id = {c.config_id: c for c in curves}

    def refill() -> bool:
        if not queue and next_curve is not None:
            curve = next_curve()
            if curve is not None:
                by_id[curve.config_id] = curve
                queue.append(curve)
        return bool(queue)

    spent_by_trial: dict[str, float] = {}
    sweep_usd = 0.0
    tiebreak = 0

    thawed: set[str] = set()

    def go_on(now: float) -> bool:
        """Start the next configuration, or else take up a trial the policy thaws."""
        nonlocal tiebreak
        if refill():
            start(now)
            return True
        while True:
            config_id = None if thaw is None else thaw()
            if config_id is None:
                return False
            if sim.stopped_at[config_id] < by_id[config_id].epochs:
                break
            if policy is not None:  # its recorded curve ends where it stopped: nothing to go on with
                policy.on_end(config_id, StopReason.TRUNCATED)
        epoch = sim.stopped_at.pop(config_id)
        thawed.add(config_id)
        heapq.heappush(running, (now + by_id[config_id].epoch_seconds[epoch], tiebreak, epoch + 1, config_id))
        tiebreak += 1
        return True

    def start(now: float) -> None:
        nonlocal tiebreak
        curve = queue.pop(0)
        if policy is not None:
            policy.on_add(curve.config_id)
        heapq.heappush(running, (now + curve.epoch_seconds[0], tiebreak, 1, curve.config_id))
        tiebreak += 1

    for _ in range(workers):
        if not refill():
            break
        start(0.0)
    while running:
        now, _, epoch, config_id = heapq.heappop(running)
        curve = by_id[config_id]
        usd = curve.epoch_seconds[epoch - 1] * curve.devices / 3600 * usd_per_device_hour
        sweep_usd += usd
        spent_by_trial[config_id] = spent_by_trial.get(config_id, 0.0) + usd
        loss = float(curve.val_loss[epoch - 1])
        sim.epochs.append(Epoch(now, config_id, epoch, loss, sweep_usd))
        began = time.perf_counter()
        stop = (
            policy is not None
            and policy.on_result(config_id, epoch, loss, spent_by_trial[config_id]) is Decision.STOP
        )
        if not stop and epoch >= curve.epochs:
            stop = True
            if max_epochs is not None and epoch < max_epochs:
                sim.truncated.add(config_id)
                if policy is not None:
                    policy.on_end(config_id, StopReason.TRUNCATED)
        if stopping is not None:
            # fed every epoch, as Ray's stopper is (it sees the result a rung or the last epoch
            # ends too): the sweep's spend, its best and the curve model's references count it
            hours = curve.seconds_until(epoch) * curve.devices / 3600
            said = stopping.on_result(config_id, loss, hours, spent_by_trial[config_id])
            if said is not None and policy is not None and epoch < policy.stopper_waits_until(config_id):
                said = None  # a later bracket's trial, before its first rung: the rungs judge it
            stop = stop or said is not None
        took = time.perf_counter() - began
        sim.decision_seconds += took
        if charge_decision_time:
            now += took
        out_of_money = budget_usd is not None and sweep_usd >= budget_usd
        if stop or out_of_money:
            sim.stopped_at[config_id] = epoch
            if policy is not None:  # as Ray's scheduler hears a trial end that it did not decide
                policy.on_end(config_id, StopReason.STOPPED)
            if on_trial_end is not None and config_id not in thawed:
                on_trial_end(config_id, epoch, loss)
        else:
            heapq.heappush(running, (now + curve.epoch_seconds[epoch], tiebreak, epoch + 1, config_id))
            tiebreak += 1
        if out_of_money:
            running.clear()
            continue
        # a free worker takes the next configuration, or else a trial ``thaw`` takes up; one
        # left idle is offered again after every event (as Ray's scheduler is asked every step)
        while len(running) < workers and go_on(now):
            pass
    return sim
