"""Replaying a recorded sweep with every method: searchers over the recorded pool, truncated
curves, stopping rules, budget, seeds."""

from __future__ import annotations

import json
import math

import numpy as np
import optuna
import pandas as pd
import pytest
from click.testing import CliRunner

from costtune.cli import main
from costtune.core.curves import Curve, curves_from_frame
from costtune.core.policy import AsyncHyperband, StopReason
from costtune.core.policy.defaults import DEFAULTS
from costtune.core.simulate import simulate
from costtune.errors import ConfigError
from costtune.search.pool import OrderedPool, SamplerPool, distance, infer_space


def _pool(n: int = 60, epochs: int = 20, truncate: dict[int, int] | None = None) -> list[Curve]:
    """Curves whose final loss is a smooth function of (lr, layers, act): TPE can learn it."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        lr = float(10 ** rng.uniform(-4, -1))
        layers = int(rng.integers(1, 6))
        act = ["relu", "tanh"][i % 2]
        final = 0.1 + (math.log10(lr) + 2.5) ** 2 / 4 + 0.02 * layers + (0.05 if act == "tanh" else 0.0)
        length = (truncate or {}).get(i, epochs)
        losses = np.array([final + 1.0 / e for e in range(1, length + 1)])
        out.append(
            Curve(f"c{i}", {"lr": lr, "layers": layers, "act": act}, losses, np.full(length, 60.0), 1.0)
        )
    return out


def test_space_is_inferred_from_the_pool() -> None:
    space = infer_space(_pool())
    assert isinstance(space["lr"], optuna.distributions.FloatDistribution) and space["lr"].log
    assert isinstance(space["layers"], optuna.distributions.IntDistribution) and not space["layers"].log
    assert space["act"].choices == ("relu", "tanh")
    with pytest.raises(ConfigError, match="^replay: a searcher needs hp"):
        infer_space([Curve("x", {}, np.ones(3), np.ones(3), 1.0)])


def test_tpe_is_told_the_configuration_that_actually_ran() -> None:
    pool = _pool()
    searcher = SamplerPool(pool, "tpe", seed=3)
    sim = simulate(
        [], AsyncHyperband(20, 2, 3), max_epochs=20, next_curve=searcher.ask, on_trial_end=searcher.tell
    )
    assert set(sim.stopped_at) == {c.config_id for c in pool}  # the whole pool, each once
    by_id = {c.config_id: c for c in pool}
    complete = searcher.study.get_trials(states=[optuna.trial.TrialState.COMPLETE])
    assert len(complete) == len(pool)
    ran = [(c.hyperparameters["lr"], c.hyperparameters["layers"], c.hyperparameters["act"]) for c in pool]
    for trial in complete:
        assert (trial.params["lr"], trial.params["layers"], trial.params["act"]) in ran
    # the value TPE holds for a configuration is its loss where it ended in the replay
    ended = {(by_id[c].hyperparameters["lr"]): by_id[c].val_loss[e - 1] for c, e in sim.stopped_at.items()}
    for trial in complete:
        assert trial.value == pytest.approx(ended[trial.params["lr"]])


def test_the_pools_samplers_are_the_sweeps() -> None:
    """The replay's searchers are a sweep's: ``tpe`` Optuna's univariate TPE with
    10 start-up trials, ``gp`` its Gaussian process with 5 (outliers clipped); another sampler
    may be passed in."""
    from costtune.search import GP_STARTUP_TRIALS
    from costtune.search.gp import ClippedGPSampler

    pool = _pool(n=20)
    tpe, gp = SamplerPool(pool, "tpe", seed=5).study.sampler, SamplerPool(pool, "gp", seed=5).study.sampler
    assert type(tpe) is optuna.samplers.TPESampler and tpe._multivariate is False
    assert type(gp) is ClippedGPSampler and gp._n_startup_trials == GP_STARTUP_TRIALS
    other = optuna.samplers.RandomSampler(seed=1)
    assert SamplerPool(pool, sampler=other).study.sampler is other
    with pytest.raises(ConfigError, match="--searcher: 'bohb' is not an Optuna sampler"):
        SamplerPool(pool, "bohb")


def test_tpe_over_the_pool_finds_good_configurations_sooner_than_random_order() -> None:
    pool = _pool(n=120)
    target = sorted(c.val_loss[-1] for c in pool)[3]  # the 4th-best final loss
    costs = {"random": [], "tpe": []}
    for seed in range(5):
        for name, searcher in (
            ("random", OrderedPool(pool, seed=seed)),
            ("tpe", SamplerPool(pool, "tpe", seed=seed)),
        ):
            sim = simulate(
                [],
                AsyncHyperband(20, 2, 3),
                max_epochs=20,
                next_curve=searcher.ask,
                on_trial_end=searcher.tell,
            )
            costs[name].append(sim.cost_to_target(target))
    assert all(c is not None for c in costs["tpe"])
    assert np.median(costs["tpe"]) < np.median(costs["random"])


@pytest.mark.parametrize("kind", ["tpe", "gp"])
def test_each_proposal_runs_the_nearest_unused_recorded_configuration(kind) -> None:
    pool = _pool(n=40)
    searcher = SamplerPool(pool, "tpe", seed=2) if kind == "tpe" else SamplerPool(pool, "gp", seed=2)
    unused = {c.config_id: c for c in pool}
    for _ in range(25):
        curve = searcher.ask()
        assert curve is not None
        proposal = searcher.study.get_trials(states=[optuna.trial.TrialState.FAIL])[-1].params
        nearest = min(distance(proposal, searcher._params(c), searcher.space) for c in unused.values())
        assert distance(proposal, searcher._params(curve), searcher.space) == pytest.approx(nearest)
        del unused[curve.config_id]  # each configuration runs once
        searcher.tell(curve.config_id, 20, float(curve.val_loss[-1]))
    assert len(searcher.study.get_trials(states=[optuna.trial.TrialState.COMPLETE])) == 25


def test_snap_takes_the_nearest_unused_and_once_all_ran_the_nearest_of_all() -> None:
    pool = _pool(n=4)
    snapper = SamplerPool(pool, "tpe", seed=0)
    target = snapper._params(pool[2])
    assert snapper.snap(target) is pool[2]
    assert snapper.snap(target) is not pool[2]  # used: the next nearest
    while not snapper._used.all():
        snapper.snap(target)
    assert snapper.snap(target) is pool[2]  # every one ran: the nearest of all again
    assert snapper.ask() is None  # and the sampler's pool is used up


def test_the_gaussian_process_over_the_pool_finds_good_configurations_sooner_than_random_order() -> None:
    pool = _pool(n=300)
    target = sorted(c.val_loss[-1] for c in pool)[3]  # the 4th-best final loss
    costs: dict[str, list] = {"random": [], "gp": []}
    for seed in range(3):
        for name, searcher in (
            ("random", OrderedPool(pool, seed=seed)),
            ("gp", SamplerPool(pool, "gp", seed=seed)),
        ):
            reached = []

            def ask(searcher=searcher, reached=reached):  # stop asking once a trial reached it
                return None if reached else searcher.ask()

            def tell(config_id, epoch, loss, searcher=searcher, reached=reached):
                searcher.tell(config_id, epoch, loss)
                if loss <= target:
                    reached.append(config_id)

            sim = simulate([], AsyncHyperband(20, 2, 3), max_epochs=20, next_curve=ask, on_trial_end=tell)
            costs[name].append(sim.cost_to_target(target))
    assert all(c is not None for c in costs["gp"] + costs["random"])
    assert max(costs["gp"]) < np.median(costs["random"]), costs


def test_same_seed_same_replay_and_another_seed_another() -> None:
    pool = _pool(n=24)  # past the samplers' random start-up trials (TPE 10, GP 5); GP is slow on more

    def log(searcher_seed: int, kind: str) -> tuple:
        searcher = (
            SamplerPool(pool, "tpe", seed=searcher_seed)
            if kind == "tpe"
            else SamplerPool(pool, "gp", seed=searcher_seed)
            if kind == "gp"
            else OrderedPool(pool, seed=searcher_seed)
        )
        sim = simulate(
            [],
            AsyncHyperband(20, 2, 3),
            workers=3,
            max_epochs=20,
            next_curve=searcher.ask,
            on_trial_end=searcher.tell,
        )
        return tuple((e.clock_s, e.config_id, e.epoch) for e in sim.epochs)

    for kind in ("tpe", "gp", "random"):
        first = log(1, kind)
        assert log(1, kind) == first
        assert log(2, kind) != first


def test_a_truncated_curve_is_never_taken_as_finished() -> None:
    pool = _pool(n=6, truncate={1: 7, 4: 12})
    policy = AsyncHyperband(20, 2, 3)
    sim = simulate(pool, None, max_epochs=20)
    assert sim.truncated == {"c1", "c4"}
    assert sim.stopped_at["c1"] == 7 and sim.stopped_at["c0"] == 20
    sim = simulate(pool, policy, max_epochs=20)
    for trial in sim.truncated:
        assert policy.stop_reason(trial) is StopReason.TRUNCATED
    assert all(policy.stop_reason(t) is not StopReason.COMPLETED for t in ("c1", "c4"))


def test_budget_ends_the_replay() -> None:
    pool = _pool()
    sim = simulate([], None, budget_usd=1.0, max_epochs=20, next_curve=OrderedPool(pool).ask)
    assert 1.0 <= sim.total_usd < 1.0 + 60 / 3600 * 2.5 + 1e-9  # stops within one epoch of the budget


def _table(pool: list[Curve]) -> pd.DataFrame:
    rows = []
    for c in pool:
        for e, loss in enumerate(c.val_loss, start=1):
            rows.append(
                {
                    "config_id": c.config_id,
                    **{f"hp.{k}": v for k, v in c.hyperparameters.items()},
                    "epoch": e,
                    "val_loss": loss,
                    "epoch_seconds": float(c.epoch_seconds[e - 1]),
                    "devices": 1,
                }
            )
    return pd.DataFrame(rows)


def test_replay_cli_with_searcher_budget_and_seed(tmp_path) -> None:
    path = tmp_path / "sweep.csv"
    pool = _pool(n=40, truncate={0: 5})
    _table(pool).to_csv(path, index=False)
    assert len(curves_from_frame(pd.read_csv(path))) == 40
    args = ["replay", str(path), "--searcher", "tpe", "--seed", "4", "--json"]
    first = CliRunner().invoke(main, [*args, "--budget", "3"])
    assert first.exit_code == 0, first.output
    data = json.loads(first.output)
    assert data["settings"] == {  # a sweep's default rungs
        "scheduler": "hyperband",
        "grace_epochs": DEFAULTS.grace_epochs,
        "eta": DEFAULTS.eta,
        "brackets": DEFAULTS.brackets,
        "searcher": "tpe",
        "seed": 4,
        "budget_usd": 3.0,
    }
    assert data["runs"]["recorded"]["truncated"] == 1
    assert data["runs"]["costtune"]["cost_usd"] <= 3.0 + 60 / 3600 * 2.5
    # the default target is the best recorded loss at the last epoch, not at any epoch
    finals = [c.val_loss[-1] for c in pool if c.epochs == 20]
    assert data["target"] == pytest.approx(min(finals))
    again = CliRunner().invoke(main, [*args, "--budget", "3"])
    assert json.loads(again.output) == data
    anywhere = json.loads(CliRunner().invoke(main, [*args, "--target-at", "any"]).output)
    assert anywhere["target"] == pytest.approx(min(float(c.val_loss.min()) for c in pool))
    gp = CliRunner().invoke(main, [*args[:3], "gp", *args[4:], "--budget", "3"])
    assert gp.exit_code == 0, gp.output
    assert json.loads(gp.output)["settings"]["searcher"] == "gp"
    assert json.loads(gp.output)["runs"]["costtune"]["cost_usd"] <= 3.0 + 60 / 3600 * 2.5
    bad = CliRunner().invoke(main, ["replay", str(path), "--searcher", "bohb"])
    assert bad.exit_code == 2 and "--searcher" in bad.output
    for removed in ("--lookahead", "--escalate", "--stopping", "--warmup-trials"):
        gone = CliRunner().invoke(main, [*args, removed, "3"])
        assert gone.exit_code == 2 and f"No such option '{removed}'" in gone.output
