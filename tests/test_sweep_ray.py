"""Real Ray Tune runs: CostAwareHyperBand + Optuna TPE + the AMP trainable on digits."""

from __future__ import annotations

import json
import sys
from typing import Any

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from costtune.cli import main
from costtune.core.config import parse_config
from costtune.core.cost import CostModel
from costtune.core.ledger import LEDGER_FILE
from costtune.core.policy import AsyncHyperband, Decision, StopReason
from costtune.errors import ConfigError
from costtune.sweep import run_sweep
from tests.conftest import SMALL
from tests.user_trainables import checkpointed_steps

pytestmark = pytest.mark.ray


def test_sweep_writes_metered_tables(small_run) -> None:
    out = small_run.output_dir
    for name in ("trials.csv", "trials.parquet", "summary.json", LEDGER_FILE, "config.yaml", "ray"):
        assert (out / name).exists(), name
    frame = pd.read_csv(out / "trials.csv")
    assert len(frame) == 6
    for column in (
        "trial_id",
        "status",
        "stop_reason",
        "epochs",
        "gpu_hours",
        "cost_usd",
        "best_val_loss",
        "last_val_loss",
        "roi",
        "hp.lr",
        "hp.batch_size",
    ):
        assert column in frame.columns
    # CPU trials: 1 core each at $0.50 per core-hour, from metered seconds
    assert (frame["cost_usd"] - frame["seconds"] / 3600 * 0.5).abs().max() < 1e-12
    assert (frame["gpu_hours"] == 0).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total_cost_usd"] == pytest.approx(frame["cost_usd"].sum())
    assert summary["best_metric"] == pytest.approx(frame["best_val_loss"].min())
    assert 0 < summary["saved_fraction"] < 1
    assert set(frame["stop_reason"]) <= {"rung_pruned", "completed"}


def test_trials_stop_only_at_rungs_or_max_epochs(small_run) -> None:
    frame = small_run.trials
    pruned = frame[frame["stop_reason"] == "rung_pruned"]
    completed = frame[frame["stop_reason"] == "completed"]
    assert len(pruned) >= 1
    assert set(pruned["epochs"]) <= {1, 3}
    assert (completed["epochs"] == 9).all()


def test_ray_adapter_decides_exactly_what_the_pure_policy_decides(small_run) -> None:
    """Replay the ledger's results, in arrival order, through a fresh policy."""
    policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1)
    cost = CostModel(prices={"cpu": 0.5})
    stopped_at: dict[str, int] = {}
    for line in (small_run.output_dir / LEDGER_FILE).read_text().splitlines():
        event = json.loads(line)
        if event["event"] != "result":
            continue
        if event["trial_id"] in stopped_at:  # reports again: taken up after a rung stopped it
            assert policy.stop_reason(event["trial_id"]) is StopReason.RUNG_PRUNED
            policy.take_up(event["trial_id"])
            del stopped_at[event["trial_id"]]
        usd = cost.cost_usd(event["seconds"], event["devices"], event["device_kind"])
        decision = policy.on_result(event["trial_id"], event["epoch"], event["metrics"]["val_loss"], usd)
        if decision is Decision.STOP:
            stopped_at[event["trial_id"]] = event["epoch"]
    frame = small_run.trials.set_index("trial_id")
    assert stopped_at == frame["epochs"].to_dict()
    for trial_id, epochs in stopped_at.items():
        assert policy.stop_reason(trial_id).value == frame.loc[trial_id, "stop_reason"], epochs


def test_output_directory_that_holds_a_sweep_is_loaded_if_its_config_is_this_one(small_run) -> None:
    log = (small_run.output_dir / "ledger.jsonl").read_bytes()
    again = run_sweep(parse_config(SMALL), small_run.output_dir)
    assert again.summary["total_cost_usd"] == small_run.summary["total_cost_usd"]
    with pytest.raises(
        ConfigError, match=r"^output: .* holds a sweep of another config \(seed: 1 there, 2 here\)"
    ):
        run_sweep(parse_config({**SMALL, "seed": 2}), small_run.output_dir)
    assert (small_run.output_dir / "ledger.jsonl").read_bytes() == log


def test_cli_sweep_end_to_end_prints_the_cost_table(ray_session, tmp_path) -> None:
    config = {**SMALL, "num_samples": 2, "max_epochs": 2, "scheduler": {"grace_epochs": 1, "eta": 2}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "run"
    result = CliRunner().invoke(
        main, ["sweep", str(path), "--output", str(out), "--no-progress", "--seed", "7"]
    )
    assert result.exit_code == 0, result.output
    assert "Trials (best first)" in result.output and "total cost:" in result.output
    assert json.loads((out / "summary.json").read_text())["trials"] == 2
    assert yaml.safe_load((out / "config.yaml").read_text())["seed"] == 7


def _one_at_a_time(
    trainable, param_space: dict, metric: str, mode: str, tmp_path, reuse_actors: bool = True
) -> Any:
    """A plain ``tune.Tuner`` with ``CostAwareHyperBand`` (rungs at epochs 1 and 3 of 9, η = 3)
    that runs one trial at a time, on actors reused from trial to trial (a fifth of the time)
    unless ``reuse_actors`` is False, Ray's default."""
    from ray import tune

    from costtune.ray import CostAwareHyperBand

    return tune.Tuner(
        trainable,
        param_space=param_space,
        tune_config=tune.TuneConfig(
            metric=metric,
            mode=mode,
            max_concurrent_trials=1,
            scheduler=CostAwareHyperBand(max_epochs=9, grace_epochs=1, eta=3, brackets=1),
            reuse_actors=reuse_actors,
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    )


def test_cost_aware_hyperband_in_a_plain_tuner_maximising(ray_session, tmp_path) -> None:
    from ray import tune

    def trainable(config: dict) -> None:
        for epoch in range(1, 10):
            tune.report({"score": config["quality"] * (1 - 1 / (epoch + 1))})

    tuner = _one_at_a_time(
        trainable, {"quality": tune.grid_search([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])}, "score", "max", tmp_path
    )
    results = tuner.fit()
    epochs = {r.config["quality"]: r.metrics["training_iteration"] for r in results}
    # mode max: the highest score is the best; it always goes on, and trials stop only at
    # the rung (epoch 1; rungs at 1 and 3 in a 9-epoch sweep, η = 3) or at the end
    assert epochs[0.6] == 9
    assert set(epochs.values()) <= {1, 3, 9}


def test_cost_aware_hyperband_prunes_worse_trials_in_a_plain_tuner(ray_session, tmp_path) -> None:
    from ray import tune

    def trainable(config: dict) -> None:
        for epoch in range(1, 10):
            tune.report({"loss": config["badness"] / epoch})

    tuner = _one_at_a_time(
        trainable, {"badness": tune.grid_search([0.1, 0.5, 0.6, 0.7, 0.8, 0.9])}, "loss", "min", tmp_path
    )
    epochs = {r.config["badness"]: r.metrics["training_iteration"] for r in tuner.fit()}
    # the best trial always goes on; a worse one goes on only when it reaches a rung while
    # still among the first 1/3 there (Tune does not promise the start order, so which ones
    # are cut depends on it; the exact decisions are checked against the pure policy on the
    # ledger's arrival order in test_ray_adapter_decides_exactly_what_the_pure_policy_decides)
    assert epochs[0.1] == 9
    assert set(epochs.values()) <= {1, 3, 9}  # rungs at 1 and 3, or the end


def test_a_trial_a_rung_stopped_is_taken_up_where_it_stopped_if_it_makes_the_cut_at_the_end(
    ray_session, tmp_path
) -> None:
    from ray import tune

    trace = tmp_path / "trace"
    trace.mkdir()
    # loss 1/epoch + x: at every epoch the trials rank by x. In this order the first rung stops 0.3:
    # it arrives fifth, second of five. Once all six have reached it, 0.3 is in its top third.
    xs = [0.1, 0.9, 0.8, 0.7, 0.3, 0.6]
    tuner = _one_at_a_time(
        checkpointed_steps,
        {"x": tune.grid_search(xs), "max_epochs": 9, "epoch_s": 0.0, "trace_dir": str(trace)},
        "loss",
        "min",
        tmp_path,
        reuse_actors=False,  # a paused trial's actor is let go and a new one restores it
    )
    results = tuner.fit()
    assert not results.errors
    epochs = {r.config["x"]: r.metrics["training_iteration"] for r in results}
    ran = [tuple(line.split()) for f in trace.iterdir() for line in f.read_text().splitlines()]
    # every epoch of every trial ran once: the one taken up went on from its checkpoint
    assert len(ran) == len(set(ran)) == sum(epochs.values())
    # the rung's cut as it stands at the end, whatever order Tune started them in: 0.1 and 0.3
    assert epochs[0.1] == 9 and epochs[0.3] >= 3
    assert set(epochs.values()) <= {1, 3, 9}


def test_a_sweeps_books_show_a_trial_taken_up_at_the_end_once_per_epoch(ray_session, tmp_path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    xs = [0.1, 0.9, 0.8, 0.7, 0.3, 0.6]  # as above: 0.3 is stopped at the first rung, then makes its cut
    config = {
        "name": "late",
        "trainable": {
            "name": "tests.user_trainables:checkpointed_steps",
            "args": {"trace_dir": str(trace), "epoch_s": 0.0},
        },
        "metric": "loss",
        "max_epochs": 9,
        "num_samples": len(xs),
        "max_concurrent_trials": 1,
        "search_space": {"x": {"type": "uniform", "low": 0.0, "high": 1.0}},
        "searcher": {"type": "random", "points_to_evaluate": [{"x": x} for x in xs]},
        "scheduler": {"grace_epochs": 1, "eta": 3, "brackets": 1},
    }
    result = run_sweep(parse_config(config), tmp_path / "run")
    frame = result.trials.set_index("hp.x")
    # points_to_evaluate, one at a time: they start in this order, and 0.3 ends at the second rung
    assert frame["epochs"].to_dict() == {0.1: 9, 0.9: 1, 0.8: 1, 0.7: 1, 0.3: 3, 0.6: 1}
    assert (frame.loc[frame["epochs"] < 9, "stop_reason"] == "rung_pruned").all()
    events = [json.loads(line) for line in (result.output_dir / LEDGER_FILE).read_text().splitlines()]
    ran = [tuple(line.split()) for f in trace.iterdir() for line in f.read_text().splitlines()]
    reported = [(e["trial_id"], e["epoch"]) for e in events if e["event"] == "result"]
    # each epoch ran once and was charged once: the trial taken up went on from its checkpoint
    assert len(ran) == len(set(ran)) == len(reported) == len(set(reported)) == frame["epochs"].sum()
    assert result.summary["total_cost_usd"] == pytest.approx(frame["cost_usd"].sum())
    # the books ended it at the first rung, opened it again when it was taken up, and ended it
    # at the second
    taken = frame.loc[0.3, "trial_id"]
    ends = [(e["stop_reason"], e["status"]) for e in events if e["event"] == "end" and e["trial_id"] == taken]
    assert ends == [("rung_pruned", "TERMINATED")] * 2
    epochs = [e["epoch"] for e in events if e["event"] == "result" and e["trial_id"] == taken]
    assert epochs == [1, 2, 3]


def test_a_sweep_keeps_rays_optuna_searcher_quiet_about_a_trial_taken_up_after_a_rung() -> None:
    import logging

    from costtune.sweep import _RayLogsInOneLine

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord(
            "ray.tune.search.optuna.optuna_search", logging.WARNING, "", 0, message, (), None
        )

    quiet = _RayLogsInOneLine()
    assert not quiet.filter(
        record("Received additional result for trial 1a, but it already finished. Result: {}")
    )
    assert not quiet.filter(record("Received additional completion for trial 1a, but it already finished."))
    assert quiet.filter(record("Something else the searcher says"))


#: a user's own trainable (loss → (x − 0.3)² + 1/epoch), every trial to the end
QUADRATIC = {
    "trainable": {"name": "tests.user_trainables:quadratic"},
    "metric": "loss",
    "max_epochs": 3,
    "num_samples": 4,
    "search_space": {"x": {"type": "uniform", "low": 0.0, "high": 1.0}},
    "scheduler": {"type": "fifo"},
}


def test_a_users_own_module_function_trainable(ray_session, tmp_path) -> None:
    config = {**QUADRATIC, "name": "user", "searcher": {"type": "hyperopt", "n_startup_trials": 2}}
    result = run_sweep(parse_config(config), tmp_path / "run")
    frame = result.trials
    assert len(frame) == 4 and (frame["epochs"] == 3).all()
    assert set(frame["stop_reason"]) == {"completed"}
    best = frame.loc[frame["best_loss"].idxmin()]
    assert best["best_loss"] == pytest.approx((best["hp.x"] - 0.3) ** 2 + 1 / 3)


def test_approved_grid_search_runs_every_grid_point(ray_session, tmp_path) -> None:
    config = {
        **SMALL,
        "name": "grid",
        "max_epochs": 2,
        "num_samples": 1,
        "searcher": {"type": "grid"},
        "scheduler": {"type": "fifo"},
        "search_space": {
            "lr": {"type": "choice", "values": [1e-3, 1e-2]},
            "batch_size": {"type": "choice", "values": [64, 128]},
        },
        "approval": {
            "justification": "four points to compare with the TPE run",
            "estimated_resources": "4 CPU trials",
            "stop_conditions": "2 epochs",
            "approver": "tests",
        },
    }
    result = run_sweep(parse_config(config), tmp_path / "run")
    pairs = sorted(zip(result.trials["hp.lr"], result.trials["hp.batch_size"], strict=True))
    assert pairs == [(1e-3, 64), (1e-3, 128), (1e-2, 64), (1e-2, 128)]


def test_the_worst_case_priced_from_a_runs_own_epochs_bounds_what_it_metered(small_run) -> None:
    """The worst case's terms (start-up once per trial, every trial to max_epochs at the slowest
    epoch) cover every metered second. Both sides come from the same run, so load on the
    machine cannot move one without the other (a probe calibrated minutes later could)."""
    from costtune.calibrate import calibration_of
    from costtune.core.estimate import estimate

    config = parse_config(SMALL)
    measured = calibration_of(small_run.ledger)
    assert measured is not None
    est = estimate(
        config,
        measured.mean_seconds,
        worst_epoch_seconds=measured.max_seconds,
        startup_seconds=measured.startup_seconds,
    )
    metered = small_run.summary["total_cost_usd"]
    assert est.worst_cost_usd >= metered
    assert est.expected_cost_usd <= est.worst_cost_usd


def test_a_calibration_probe_runs_the_sweeps_first_trials_without_early_stopping() -> None:
    from costtune.calibrate import calibrate_epoch_seconds

    measured = calibrate_epoch_seconds(parse_config(SMALL), trials=2, epochs=3)
    assert measured.samples == 2 * 2  # each trial's epochs after its first, none pruned
    assert 0 < measured.mean_seconds <= measured.max_seconds
    assert measured.startup_seconds >= 0


TOY = """
from ray import tune


def train(config):
    for epoch in range(1, config["max_epochs"] + 1):
        tune.report({"val_loss": (config["x"] - 0.3) ** 2 + 1.0 / epoch})
"""


@pytest.mark.ray
def test_a_user_module_beside_the_config_is_found_without_pythonpath(
    ray_session, tmp_path, monkeypatch
) -> None:
    """As `python -m` would: the config's folder and the working directory are searched, and
    the module travels to Ray's workers by value (their import path is not the driver's)."""
    from click.testing import CliRunner

    from costtune.cli import main

    project = tmp_path / "project"
    project.mkdir()
    (project / "toy_costtune_trainable.py").write_text(TOY)
    (project / "toy.yaml").write_text(
        "name: toy\ntrainable: {name: 'toy_costtune_trainable:train'}\nmax_epochs: 3\nnum_samples: 2\n"
        "search_space: {x: {type: uniform, low: 0.0, high: 1.0}}\nsearcher: {type: random}\n"
        "scheduler: {type: fifo}\ncost: {epoch_seconds: 0.01}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the test leaves the path as it found it
    result = CliRunner().invoke(
        main, ["sweep", str(project / "toy.yaml"), "--output", str(tmp_path / "run"), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    trials = pd.read_csv(tmp_path / "run" / "trials.csv")
    assert len(trials) == 2 and set(trials["stop_reason"]) == {"completed"}
    # recorded for --resume, which may run from anywhere (and the searcher, which a resume keeps)
    source = json.loads((tmp_path / "run" / "source.json").read_text())
    assert source["config_dir"] == str(project.resolve())
    assert (
        source["searcher"]["type"]
        == yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["searcher"]["type"]
    )
    missing = CliRunner().invoke(main, ["gate", str(project / "toy.yaml")])
    assert missing.exit_code == 0  # the gate does not import trainables
    (project / "bad.yaml").write_text(
        (project / "toy.yaml").read_text().replace("toy_costtune", "nowhere_xyz")
    )
    bad = CliRunner().invoke(main, ["sweep", str(project / "bad.yaml"), "--output", str(tmp_path / "r2")])
    assert bad.exit_code == 2
    assert (
        "cannot import module 'nowhere_xyz_trainable' (looked in the config's folder, the working directory"
        in bad.output
    )


def test_a_sweep_with_the_gp_searcher(ray_session, tmp_path) -> None:
    """``searcher: {type: gp}`` end to end: Optuna's Gaussian process asked and told by a real
    sweep; every trial it proposed is told its final loss (read back from its saved state); the
    two ``points_to_evaluate`` run first, as given."""
    import pickle

    from costtune.search.gp import ClippedGPSampler

    config = {
        **QUADRATIC,
        "name": "gp",
        "max_epochs": 2,
        "num_samples": 5,
        "max_concurrent_trials": 1,
        "searcher": {
            "type": "gp",
            "n_startup_trials": 2,
            "points_to_evaluate": [{"x": 0.3}, {"x": 0.95}],
        },
    }
    result = run_sweep(parse_config(config), tmp_path / "run")
    frame = result.trials.set_index("trial_id")
    assert len(frame) == 5 and (frame["epochs"] == 2).all()
    state = pickle.loads(sorted((tmp_path / "run" / "ray").glob("searcher-state-*.pkl"))[-1].read_bytes())
    assert type(state["_sampler"]) is ClippedGPSampler
    study = state["_ot_study"]
    told = sorted(t.value for t in study.trials)
    assert told == pytest.approx(sorted(frame["last_loss"]))
    assert [t.params["x"] for t in study.trials[:2]] == [0.3, 0.95]
    assert {0.3, 0.95} <= set(frame["hp.x"])


def test_two_sweeps_started_in_one_second_keep_their_trials_apart(ray_session, tmp_path, monkeypatch) -> None:
    """Ray stages a driver's files in ``<Ray session>/artifacts/<the second it started>/<name>``
    and syncs that folder into the run; every costtune experiment is named ``ray``. Before, two
    sweeps started in one second on one Ray shared the folder, and each run's ``ray/`` held the
    other's trial folders too (stop 54: 12 in each of two 6-trial runs on one cluster). Here the
    second is frozen, so the two sweeps of one process meet as two of a cluster would."""
    import ray.tune.utils

    monkeypatch.setattr(ray.tune.utils, "date_str", lambda: "2026-12-06_17-02-27")
    config = {**SMALL, "max_epochs": 2, "num_samples": 2}
    for name in ("first", "second"):
        result = run_sweep(parse_config({**config, "name": name}), tmp_path / name)
        folders = {p.name.split("_")[2] for p in (tmp_path / name / "ray").iterdir() if p.is_dir()}
        assert folders == set(result.trials["trial_id"]), name
