"""One default everywhere: ``CostAwareHyperBand(metric=..., mode=...)`` in a plain ``tune.Tuner``,
``costtune sweep``'s scheduler and ``costtune replay``'s decide alike on the same events, and the
benchmark's default row is what ``costtune replay`` runs, dollar for dollar."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

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


def _decide_all(on_add, on_result, take_up, trials: int = 60, workers: int = 3) -> list[tuple[int, int, str]]:
    """Trials start as workers free up and report epoch after epoch until stopped or done. Once
    every trial has started, a free worker is offered, after every result, to a trial a rung
    stopped (``take_up()``: its index, or ``None``), which goes on from where it stopped."""
    log, waiting, running, epoch = [], list(range(trials)), [], {}
    while waiting or running:
        while len(running) < workers:
            if waiting:
                i = waiting.pop(0)
                on_add(i)
                epoch[i] = 0
            else:
                i = take_up()
                if i is None:
                    break
                log.append((i, epoch[i], "TAKEN UP"))
            running.append(i)
        if not running:
            break
        i = running.pop(0)
        epoch[i] += 1
        decision = on_result(i, epoch[i], _loss(i, epoch[i]))
        log.append((i, epoch[i], decision))
        if decision == "CONTINUE" and epoch[i] < EPOCHS:
            running.append(i)
    return log


class _Controller:
    """What ``CostAwareHyperBand`` asks of Tune's controller: the trials, each one's status, and
    whether the searcher has made its last trial."""

    def __init__(self, scheduler: CostAwareHyperBand, trials: int) -> None:
        self.scheduler, self.trials, self.expected = scheduler, {}, trials
        self.search_alg = SimpleNamespace(
            is_finished=lambda: len(self.trials) == self.expected, on_trial_complete=lambda *a, **k: None
        )

    def get_trials(self) -> list:
        return list(self.trials.values())

    def stop_trial(self, trial) -> None:
        trial.status = "TERMINATED"
        self.scheduler.on_trial_remove(self, trial)


def _ray(scheduler: CostAwareHyperBand, trials: int = 60) -> list:
    controller = _Controller(scheduler, trials)

    def on_add(i: int) -> None:
        trial = controller.trials[f"t{i}"] = _trial(f"t{i}")
        trial.status = "RUNNING"
        scheduler.on_trial_add(controller, trial)
        assert scheduler.choose_trial_to_run(controller) is None  # Tune asks every step: all are busy

    def on_result(i: int, epoch: int, loss: float) -> str:
        trial = controller.trials[f"t{i}"]
        result = {
            "loss": loss,
            "training_iteration": epoch,
            "time_total_s": float(epoch),
            "should_checkpoint": True,
        }
        decision = scheduler.on_trial_result(controller, trial, result)
        if decision == "PAUSE":
            trial.status = "PAUSED"
            return "STOP"  # for now: it may be taken up again at the end
        if decision == "STOP" or epoch == EPOCHS:
            trial.status = "TERMINATED"
            scheduler.on_trial_complete(controller, trial, result)
            return "STOP"
        return decision

    def take_up() -> int | None:
        trial = scheduler.choose_trial_to_run(controller)
        if trial is None:
            return None
        trial.status = "RUNNING"
        return int(trial.trial_id[1:])

    return _decide_all(on_add, on_result, take_up, trials)


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

    def take_up() -> int | None:  # as costtune.replay hands the simulator's free worker
        chosen = replayed.next_promotion()
        return None if chosen is None else int(chosen[1:])

    log = _ray(plain)
    assert sum(d == "STOP" for *_, d in log) > 30  # the rungs decide: most trials stop early
    assert sum(d == "TAKEN UP" for *_, d in log) >= 2  # ... and some they stopped make the cut at the end
    assert _ray(swept) == log
    assert _decide_all(lambda i: replayed.on_add(f"t{i}"), on_result, take_up) == log
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
