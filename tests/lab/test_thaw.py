"""Freeze-thaw on the rungs (``benchmarks/lab/thaw.py``): once no configuration is left and money
remains, trials a rung stopped are taken up again where they stopped. costtune does not ship
it; ``families.py`` measures it against the rungs alone."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from costtune.core.curves import Curve
from costtune.core.policy import AsyncHyperband, StopReason
from costtune.core.simulate import simulate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from lab.thaw import ThawHyperband

EPOCHS = 45


def _pool(n: int = 27) -> list[Curve]:
    """``n`` curves that fall from 1.0 towards their final loss; ``late`` (the pool's best at the
    end) is the worst at the first rung, so the rungs stop it there."""
    curves = []
    t = np.arange(1, EPOCHS + 1)
    for i in range(n):
        final = 0.3 + 0.01 * i
        losses = final + (1.0 - final) * np.exp(-t / 3.0)
        curves.append(Curve(f"c{i:02d}", {"x": i}, losses, np.full(EPOCHS, 10.0 + i), 1.0))
    late = 0.1 + 2.0 * np.exp(-t / 15.0)  # 1.9 at epoch 1, 0.14 at 45
    curves.append(Curve("late", {"x": n}, late, np.full(EPOCHS, 10.0), 1.0))
    return curves


def _budget(curves: list[Curve]) -> float:
    return sum(float(c.epoch_seconds.sum()) for c in curves) / 3600 * 2.5


def _run(policy, curves, budget=None, told=None):
    queue = list(curves)

    def ask():
        return queue.pop(0) if queue else None

    def tell(config_id, epoch, loss):
        if told is not None:
            told.append(config_id)

    return simulate(
        [],
        policy,
        budget_usd=budget,
        max_epochs=EPOCHS,
        next_curve=ask,
        on_trial_end=tell,
        thaw=getattr(policy, "thaw", None),
    )


def test_thaw_reaches_the_late_bloomer_the_rungs_stopped_and_decides_as_them_until_then() -> None:
    curves = _pool()
    target = float(curves[-1].val_loss[-1])
    plain = _run(AsyncHyperband(EPOCHS, 5, 3), curves)
    assert plain.stopped_at["late"] == 5  # the rungs stop it at their first rung
    assert plain.cost_to_target(target) is None
    policy = ThawHyperband(EPOCHS, 5, 3)
    thawed = _run(policy, curves, budget=_budget(curves))
    assert thawed.cost_to_target(target) is not None
    assert "late" in policy.thawed
    # until the configurations ran out, the same events, dollar for dollar
    assert thawed.epochs[: len(plain.epochs)] == plain.epochs


def test_a_thawed_trial_goes_on_from_where_it_stopped_and_the_searcher_hears_of_it_once() -> None:
    curves = _pool()
    told: list[str] = []
    policy = ThawHyperband(EPOCHS, 5, 3)
    sim = _run(policy, curves, budget=_budget(curves), told=told)
    assert policy.thawed
    for config_id in {c.config_id for c in curves}:
        epochs = [e.epoch for e in sim.epochs if e.config_id == config_id]
        assert epochs == list(range(1, len(epochs) + 1)), config_id  # no epoch paid twice
    assert sorted(told) == sorted(c.config_id for c in curves)


@pytest.mark.parametrize(
    ("order", "expected"),
    [("quantile", ["t5", "t3", "t2", "t0", "t4"]), ("deepest", ["t5", "t0", "t3", "t2", "t4"])],
)
def test_thawing_takes_the_trials_nearest_the_cut_first(order, expected) -> None:
    policy = ThawHyperband(EPOCHS, 5, 3, order=order)
    for i, loss in enumerate([0.9, 0.1, 0.5, 0.3, 0.7, 0.2]):  # η 3: t0, t1, t5 go on
        policy.on_result(f"t{i}", 5, loss, 1.0)
    for trial_id, loss in [("t1", 0.05), ("t5", 0.15), ("t0", 0.8)]:  # only t1 goes on
        policy.on_result(trial_id, 15, loss, 3.0)
    # rank shares: t5 1/3 at 15, t3 2/6 at 5 (a tie: the deeper first), t2 3/6, t0 2/3 at 15, t4 4/6
    assert [policy.thaw() for _ in expected] == expected
    assert policy.thaw() is None
    assert policy.stop_reason("t3") is None  # taken up: the rungs judge it again at 15


def test_share_caps_what_thawing_spends() -> None:
    curves = _pool()
    plain = _run(AsyncHyperband(EPOCHS, 5, 3), curves)
    unlimited = _run(ThawHyperband(EPOCHS, 5, 3), curves, budget=_budget(curves))
    capped = _run(ThawHyperband(EPOCHS, 5, 3, share=0.25), curves, budget=_budget(curves))
    longest = max(c.seconds_until(EPOCHS) for c in curves) / 3600 * 2.5
    assert plain.total_usd < capped.total_usd <= 1.25 * plain.total_usd + longest
    assert capped.total_usd < unlimited.total_usd


def test_thaw_needs_a_known_order_and_a_positive_share() -> None:
    with pytest.raises(ValueError, match="thaw"):
        ThawHyperband(EPOCHS, 5, 3, order="random")
    with pytest.raises(ValueError, match="thaw_share"):
        ThawHyperband(EPOCHS, 5, 3, share=0)


def test_a_replay_thaws_only_within_a_budget() -> None:
    from lab.replay import lab_replay

    curves = _pool()
    spec = {"searcher": "order", "grace_epochs": 5, "eta": 3, "thaw": "deepest"}
    plain = lab_replay(curves, {"searcher": "order", "grace_epochs": 5, "eta": 3})
    unbounded = lab_replay(curves, spec)  # no budget: nothing bounds what thawing would spend
    assert unbounded.simulation.epochs == plain.simulation.epochs
    bounded = lab_replay(curves, {**spec, "budget": _budget(curves)})
    assert bounded.policy.thawed and bounded.simulation.total_usd > plain.simulation.total_usd


def test_a_stopped_trial_whose_recorded_curve_ends_there_is_not_taken_up() -> None:
    curves = _pool()
    short = curves[-2]  # stopped at the first rung, and recorded only that far
    curves[-2] = Curve(
        short.config_id, short.hyperparameters, short.val_loss[:5], short.epoch_seconds[:5], 1.0
    )
    policy = ThawHyperband(EPOCHS, 5, 3)
    sim = _run(policy, curves, budget=_budget(curves))
    assert sim.stopped_at[short.config_id] == 5
    assert policy.stop_reason(short.config_id) is StopReason.TRUNCATED
    assert "late" in policy.thawed  # the others were taken up all the same


def test_cut_takes_up_only_what_makes_its_rungs_cut_at_the_end_and_then_stops() -> None:
    """An asynchronous rung judges a trial against those that reached it first: the second- and
    third-best configurations, started second and third, are stopped at the first rung (each
    short of the best of those before it). Judged again once all 27 have reached it, the rung
    keeps 9 of them: ``cut`` takes up those it stopped, and no other, and thawing ends with
    money left."""
    t = np.arange(1, EPOCHS + 1)
    finals = {"a": 0.30, "b": 0.31, "mid": 0.35} | {f"poor{i:02d}": 0.5 + 0.01 * i for i in range(24)}
    curves = [
        Curve(name, {"x": i}, final + (1.0 - final) * np.exp(-t / 3.0), np.full(EPOCHS, 10.0), 1.0)
        for i, (name, final) in enumerate(finals.items())
    ]
    budget = _budget(curves)
    plain = _run(AsyncHyperband(EPOCHS, 5, 3), curves)
    assert plain.stopped_at["b"] == plain.stopped_at["mid"] == 5
    policy = ThawHyperband(EPOCHS, 5, 3, order="cut")
    run = _run(policy, curves, budget=budget)
    top9 = set(list(finals)[:9])  # the first rung's cut among all 27 (ranks there follow the finals)
    assert set(policy.thawed) == top9 - {"a"}
    assert run.stopped_at["b"] == run.stopped_at["mid"] == EPOCHS  # the second rung kept them too
    assert all(run.stopped_at[name] == 5 for name in finals if name not in top9)
    assert run.epochs[: len(plain.epochs)] == plain.epochs
    assert run.total_usd < 0.5 * budget  # it ended by itself, not when the money ran out
    # ``deepest`` takes up every stopped trial while money lasts
    deepest = ThawHyperband(EPOCHS, 5, 3, order="deepest")
    _run(deepest, curves, budget=budget)
    assert set(deepest.thawed) > top9 - {"a"}
