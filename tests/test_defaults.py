"""One default everywhere: ``CostAwareHyperBand(metric=..., mode=...)`` in a plain ``tune.Tuner``,
``costtune sweep``'s scheduler and ``costtune replay``'s decide alike on the same events, and the
benchmark's default row is what ``costtune replay`` runs, dollar for dollar."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from costtune.cli import main
from costtune.core.config import parse_config
from costtune.core.curves import curves_from_frame
from costtune.core.policy import Decision, StopReason
from costtune.core.policy.defaults import DEFAULTS
from costtune.ray import CostAwareHyperBand
from costtune.replay import ReplaySettings, policy_of
from costtune.sweep import hyperband_of
from tests.schedulers.test_contract import _trial

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

EPOCHS = 30


def _loss(i: int, epoch: int) -> float:
    """60 trials: spread starts, decays and plateaus, some crossing, one NaN."""
    if (i, epoch) == (7, 3):
        return math.nan
    return 0.2 + ((i * 37) % 17) / 17 / (1 + 0.1 * (i % 5) * epoch) + 0.3 * ((i * 11) % 7) / 7 / epoch


def _decide_all(on_add, on_result, trials: int = 60, workers: int = 3) -> list[tuple[int, int, str]]:
    """Trials start as workers free up and report epoch after epoch until stopped or done."""
    log, waiting, running, epoch = [], list(range(trials)), [], {}
    while waiting or running:
        while waiting and len(running) < workers:
            i = waiting.pop(0)
            on_add(i)
            running.append(i)
            epoch[i] = 0
        i = running.pop(0)
        epoch[i] += 1
        decision = on_result(i, epoch[i], _loss(i, epoch[i]))
        log.append((i, epoch[i], decision))
        if decision == "CONTINUE" and epoch[i] < EPOCHS:
            running.append(i)
    return log


def _ray(scheduler: CostAwareHyperBand) -> list:
    def on_result(i: int, epoch: int, loss: float) -> str:
        result = {"loss": loss, "training_iteration": epoch, "time_total_s": float(epoch)}
        return scheduler.on_trial_result(None, _trial(f"t{i}"), result)

    return _decide_all(lambda i: scheduler.on_trial_add(None, _trial(f"t{i}")), on_result)


def test_plain_ray_sweep_and_replay_decide_alike_by_default() -> None:
    plain = CostAwareHyperBand(metric="loss", mode="min", max_epochs=EPOCHS)  # as a Ray user builds it
    config = parse_config(
        {
            "name": "d",
            "metric": "loss",
            "max_epochs": EPOCHS,
            "num_samples": 60,
            "trainable": {"name": "tests.user_trainables:anything"},
            "search_space": {"x": {"type": "uniform", "low": 0, "high": 1}},
        }
    )
    swept = hyperband_of(config)  # what costtune sweep builds from a config that sets nothing
    swept.set_search_properties("loss", "min")  # as Tune does from TuneConfig
    replayed = policy_of(ReplaySettings(), EPOCHS)  # what costtune replay builds
    assert replayed is not None

    def on_result(i: int, epoch: int, loss: float) -> str:
        decision = replayed.on_result(f"t{i}", epoch, loss, 0.0)
        if decision is Decision.STOP:
            replayed.on_end(f"t{i}", StopReason.STOPPED)
        return "STOP" if decision is Decision.STOP else "CONTINUE"

    log = _ray(plain)
    assert sum(d == "STOP" for *_, d in log) > 30  # the rungs decide: most trials stop early
    assert _ray(swept) == log
    assert _decide_all(lambda i: replayed.on_add(f"t{i}"), on_result) == log
    # and the three are built from one settings object
    assert (plain.policy.grace_epochs, plain.policy.eta) == (DEFAULTS.grace_epochs, DEFAULTS.eta)
    assert config.stopping == type(config.stopping)() and not hasattr(DEFAULTS, "min_relative_roi")


def test_the_benchmarks_default_row_is_costtune_replay_dollar_for_dollar(tmp_path) -> None:
    import families

    frame = families.synthetic_pool("weak-ranks", 0, configs=40, epochs=30)
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    table = list(curves_from_frame(frame).values())
    for seed in (0, 1):
        sim = families.run_method("default", table, "random", seed)
        shown = CliRunner().invoke(
            main, ["replay", str(path), "--searcher", "random", "--seed", str(seed), "--json"]
        )
        assert shown.exit_code == 0, shown.output
        ours = json.loads(shown.output)["runs"]["costtune"]
        assert ours["cost_usd"] == pytest.approx(sim.total_usd, rel=1e-12)
        assert ours["epochs"] == len(sim.epochs) and ours["trials"] == len(sim.stopped_at)
    # and the peers decide through their own code: the rungs alone are Optuna's SHA, decision for decision
    rungs = families.run_method("rungs", table, "random", 3)
    optuna = families.run_method("optuna-sha", table, "random", 3)
    assert [(e.config_id, e.epoch) for e in rungs.epochs] == [(e.config_id, e.epoch) for e in optuna.epochs]
    assert np.isclose(rungs.total_usd, optuna.total_usd)
