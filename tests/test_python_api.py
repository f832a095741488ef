"""The Python-first API: a function and Ray Tune domains in, a result you can load and query out."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from ray import tune

import costtune
from costtune.errors import ConfigError
from costtune.sweep import param_spec_of

pytestmark = pytest.mark.ray


def train_fn(config: dict) -> None:
    """A user's function trainable, as a notebook would define it."""
    for epoch in range(1, config["max_epochs"] + 1):
        loss = (config["x"] - 0.3) ** 2 + config["scale"] / epoch + 0.01 * (config["layers"] - 2) ** 2
        tune.report({"loss": loss, "epoch_loss_x10": 10 * loss})


class _SeesEveryResult(tune.Callback):
    """A tracker's view (as W&B's or MLflow's callback gets it): every result it is shown."""

    def __init__(self) -> None:
        self.results: list[dict] = []

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        self.results.append(dict(result))


def test_a_function_with_ray_domains_runs_and_its_run_loads_back(ray_session, tmp_path) -> None:
    seen = _SeesEveryResult()
    result = costtune.run_sweep(
        train_fn,
        search_space={
            "x": tune.uniform(0.0, 1.0),
            "lr": tune.loguniform(1e-4, 1e-1),
            "layers": tune.randint(1, 4),
            "act": tune.choice(["relu", "gelu"]),
            "scale": 0.5,  # a fixed value goes to the function as is
        },
        metric="loss",
        max_epochs=10,
        num_samples=6,
        scheduler={"grace_epochs": 2, "eta": 3},
        searcher={"type": "random"},
        cost={"prices": {"cpu": 0.5}},
        callbacks=[seen],
        output=tmp_path / "run",
    )

    trials = result.trials
    assert len(trials) == 6
    assert set(trials["stop_reason"]) <= {"completed", "rung_pruned"}
    assert trials["hp.layers"].between(1, 3).all()  # Ray's randint(1, 4): upper bound exclusive
    assert set(trials["hp.act"]) <= {"relu", "gelu"}
    events = [json.loads(line) for line in (result.output_dir / "ledger.jsonl").read_text().splitlines()]
    charges = [e for e in events if e["event"] == "charge"]
    # every result a callback sees carries the trial's cost so far, rising epoch by epoch
    assert seen.results and all("cost_usd" in r and "device_hours" in r for r in seen.results)
    for trial_id in trials["trial_id"]:
        costs = [r["cost_usd"] for r in seen.results if r["trial_id"] == trial_id]
        # the final bill adds what the trial held untimed (start-up, hand-offs, shutdown)
        record = result.ledger.trials[trial_id]
        held_s = sum(e["seconds"] for e in charges if e["trial_id"] == trial_id)
        held_usd = result.ledger.spec.cost_model.cost_usd(held_s, record.devices, record.device_kind)
        final = trials.set_index("trial_id").loc[trial_id, "cost_usd"]
        assert costs == sorted(costs) and costs[-1] + held_usd == pytest.approx(final)

    curves = result.curves
    assert len(curves) == trials["epochs"].sum()
    assert {"trial_id", "epoch", "loss", "seconds", "epoch_seconds", "cost_usd", "epoch_loss_x10"} <= set(
        curves
    )
    last = curves.groupby("trial_id").tail(1).set_index("trial_id")
    assert (last["stop_reason"] == trials.set_index("trial_id")["stop_reason"]).all()
    assert (curves["epoch_seconds"] >= 0).all()

    best = result.best
    assert best is not None
    assert best["metrics"]["loss"] == pytest.approx(trials["best_loss"].min())
    assert set(best["config"]) == {"x", "lr", "layers", "act"}

    loaded = costtune.load_run(tmp_path / "run")
    assert loaded.trials.equals(result.trials)
    assert loaded.curves.equals(result.curves)
    assert loaded.best == best
    assert loaded.summary["total_cost_usd"] == pytest.approx(result.summary["total_cost_usd"])
    assert not loaded.interrupted and math.isfinite(loaded.wall_seconds)
    assert "costtune sweep" in loaded._repr_html_() and "<table" in loaded._repr_html_()


def test_the_best_checkpoint_holds_the_best_epochs_weights(small_run) -> None:
    import torch

    from costtune.trainables.amp import evaluate, load_model
    from costtune.trainables.data import load_dataset

    best = small_run.best
    assert best is not None and best["checkpoint"] is not None
    assert best["checkpoint"].is_dir() and best["trial_id"] in str(best["checkpoint"])
    # the weights of the best epoch, re-evaluated, give the metric the books report for it
    model = load_model(best["checkpoint"], {**small_run.config.trainable.args, **best["config"]})
    data = load_dataset("digits")
    loss, _ = evaluate(model, torch.as_tensor(data.x_val), torch.as_tensor(data.y_val), "fp32")
    assert loss == pytest.approx(best["metrics"]["val_loss"], rel=1e-5)
    assert best["metrics"]["val_loss"] == small_run.summary["best_metric"]
    assert small_run.summary["best_epoch"] == best["epoch"]
    assert small_run.output_dir / small_run.summary["best_checkpoint"] == best["checkpoint"]
    on_disk = json.loads((small_run.output_dir / "summary.json").read_text())
    assert on_disk["best_checkpoint"] == small_run.summary["best_checkpoint"]
    assert on_disk["best_cost_usd"] == pytest.approx(best["cost_usd"])


def _saves_checkpoints(config):  # a user's function trainable that saves tune.Checkpoints
    import tempfile

    for epoch in range(1, config["max_epochs"] + 1):
        # the loss falls to its best at epoch 3 and rises after, so later checkpoints are worse
        loss = config["x"] + abs(epoch - 3)
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "weights.json").write_text(json.dumps({"epoch": epoch, "loss": loss}))
            tune.report({"loss": loss, "score": -loss}, checkpoint=tune.Checkpoint.from_directory(d))


@pytest.mark.parametrize("mode", ["min", "max"])
def test_a_user_trainables_best_checkpoint_is_kept_by_metric_and_mode(ray_session, tmp_path, mode) -> None:
    result = costtune.run_sweep(
        _saves_checkpoints, search_space={"x": tune.uniform(0, 1)}, metric="loss" if mode == "min" else "score",
        mode=mode, max_epochs=8, num_samples=2, searcher={"type": "random"}, scheduler={"type": "fifo"},
        cost={"prices": {"cpu": 0.05}}, output=tmp_path / "r",
    )  # fmt: skip
    best = result.best
    assert best["epoch"] == 3
    saved = json.loads((best["checkpoint"] / "weights.json").read_text())
    assert saved["epoch"] == 3 and saved["loss"] == pytest.approx(best["metrics"]["loss"])
    trial_dirs = [p for p in (result.output_dir / "ray").iterdir() if p.is_dir() and "_saves" in p.name]
    assert len(trial_dirs) == 2
    for trial_dir in trial_dirs:
        kept = sorted(p.name for p in trial_dir.glob("checkpoint_*"))
        # the two best epochs (3, then 2 or 4) and the newest (8), for a resume
        assert len(kept) == 3 and kept[-1] == "checkpoint_000007" and "checkpoint_000002" in kept


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"x": tune.quniform(0, 1, 0.1)}, "search_space.x: quantised domains are not supported"),
        ({"x": tune.uniform(1.0, 0.0)}, "search_space.x"),
        ({"x": 3}, "search_space: holds only fixed values"),
        ({}, "search_space: must be a non-empty mapping"),
    ],
)
def test_bad_python_search_spaces_are_refused_in_one_line(space, message, tmp_path) -> None:
    with pytest.raises(ConfigError) as refused:
        costtune.run_sweep(train_fn, search_space=space, max_epochs=5, num_samples=2, output=tmp_path / "r")
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
    assert not (tmp_path / "r").exists()  # nothing started


def test_python_settings_are_validated_like_a_yaml_file(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"^scheduler.eta: "):
        costtune.run_sweep(
            train_fn, search_space={"x": tune.uniform(0, 1)}, max_epochs=5, num_samples=2,
            scheduler={"eta": 1}, output=tmp_path / "r",
        )  # fmt: skip
    with pytest.raises(ConfigError, match=r"^run_sweep: max_epochs go with a function trainable"):
        costtune.run_sweep("experiments/digits.yaml", max_epochs=3)


def test_ray_domains_map_onto_costtunes_forms() -> None:
    assert param_spec_of("a", tune.loguniform(1e-4, 1e-1)) == {
        "type": "loguniform",
        "low": 1e-4,
        "high": 1e-1,
    }
    assert param_spec_of("b", tune.randint(1, 4)) == {"type": "int", "low": 1, "high": 3}
    assert param_spec_of("c", tune.lograndint(1, 100)) == {"type": "logint", "low": 1, "high": 99}
    assert param_spec_of("d", tune.choice([1, 2])) == {"type": "choice", "values": [1, 2]}
    assert param_spec_of("e", tune.grid_search([1, 2])) == {"type": "choice", "values": [1, 2], "grid": True}
    assert param_spec_of("f", {"type": "uniform", "low": 0, "high": 1}) == {
        "type": "uniform",
        "low": 0,
        "high": 1,
    }
    assert param_spec_of("g", 0.5) is None


def test_the_readme_python_example_runs_twice_as_written(ray_session, tmp_path, monkeypatch, capfd) -> None:
    import re

    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## In Python") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)  # output="runs/quickstart" lands here
    namespace: dict = {"__name__": "__main__"}
    exec(compile(code, "README.md", "exec"), namespace)
    result = namespace["result"]
    assert len(result.trials) == 12 and (tmp_path / "runs" / "quickstart" / "ledger.jsonl").is_file()
    assert result.best["config"].keys() == {"x", "lr"}
    assert len(result.curves) == result.trials["epochs"].sum()
    # a notebook cell run again: the finished sweep is loaded, nothing runs, one line says so
    log = (tmp_path / "runs" / "quickstart" / "ledger.jsonl").read_bytes()
    again: dict = {"__name__": "__main__"}
    exec(compile(code, "README.md", "exec"), again)
    assert again["result"].summary["total_cost_usd"] == result.summary["total_cost_usd"]
    assert again["result"].best == result.best
    assert (tmp_path / "runs" / "quickstart" / "ledger.jsonl").read_bytes() == log
    assert "already holds this finished sweep" in capfd.readouterr().err
    # another config into the same folder: refused in one line naming the field and both values
    changed = code.replace("num_samples=12", "num_samples=13")
    assert changed != code
    with pytest.raises(
        ConfigError, match=r"^output: .* holds a sweep of another config \(num_samples: 12 there, 13 here\)"
    ):
        exec(compile(changed, "README.md", "exec"), {"__name__": "__main__"})
    assert (tmp_path / "runs" / "quickstart" / "ledger.jsonl").read_bytes() == log


def test_ray_wandb_callback_logs_the_cost_fields_offline(ray_session, tmp_path, monkeypatch) -> None:
    """The README's W&B recipe, offline: Ray's own WandbLoggerCallback, passed through
    run_sweep's callbacks, writes each trial's run with cost_usd at every epoch."""
    from ray.air.integrations.wandb import WandbLoggerCallback

    monkeypatch.setenv("WANDB_MODE", "offline")  # Ray's callback asks for an API key otherwise
    costtune.run_sweep(
        train_fn,
        search_space={"x": tune.uniform(0.0, 1.0), "scale": 0.5, "layers": 2},
        metric="loss",
        max_epochs=3,
        num_samples=2,
        scheduler={"type": "fifo"},
        output=tmp_path / "run",
        callbacks=[WandbLoggerCallback(project="costtune-test", mode="offline", dir=str(tmp_path))],
    )
    logs = sorted((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(logs) == 2  # one W&B run per trial
    for log in logs:
        # W&B's offline log is protobuf records: each epoch's history row names its keys
        assert log.read_bytes().count(b"cost_usd") >= 3, log


_SCRIPT = """
import sys

import costtune
from ray import tune

from tests.user_trainables import steady as _steady


def steady(config):  # defined in the script run as __main__, as a user's would be
    _steady(config)


if __name__ == "__main__":
    costtune.run_sweep(
        steady,
        search_space={"x": tune.uniform(0, 1), "epoch_s": 0.3},
        metric="loss", max_epochs=9, num_samples=6, max_concurrent_trials=2,
        scheduler={"grace_epochs": 1, "eta": 3}, cost={"prices": {"cpu": 0.5}},
        output=sys.argv[1],
    )
"""


def test_a_killed_sweep_of_a_scripts_own_function_resumes_from_python(ray_session, tmp_path) -> None:
    """run_sweep(fn) from a script, the script SIGKILLed: the CLI cannot import ``__main__:fn``
    and says how to resume in one line; ``costtune.resume_sweep(run, trainable=fn)`` refuses
    a function of another name, then finishes the sweep. Nothing is changed by a refusal."""
    import os
    import signal
    import subprocess
    import sys

    from tests.test_resume import REPO, _wait_for, _wait_for_session_to_die
    from tests.user_trainables import steady

    script, run = tmp_path / "sweep_script.py", tmp_path / "run"
    script.write_text(_SCRIPT)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(REPO)}
    driver = subprocess.Popen(
        [sys.executable, str(script), str(run)],
        cwd=tmp_path,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    reached = _wait_for(run, ended=2)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    _wait_for_session_to_die(driver.pid)
    assert reached, "the sweep ended, or timed out, before two of its trials ended"
    ledger = (run / "ledger.jsonl").read_bytes()

    cli = subprocess.run(
        [sys.executable, "-m", "costtune.cli", "sweep", "--resume", str(run)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert cli.returncode == 2, cli.stderr
    assert cli.stderr.strip().splitlines() == [
        "costtune: error: trainable.name: '__main__:steady' is a function of the script that started the "
        "sweep, which cannot be imported by name; resume from Python: "
        "costtune.resume_sweep(run_dir, trainable=steady)"
    ]

    def quadratic(config: dict) -> None:
        pass

    with pytest.raises(ConfigError, match=r"^resume_sweep: trainable: the sweep ran '__main__:steady', got"):
        costtune.resume_sweep(run, trainable=quadratic)
    assert (run / "ledger.jsonl").read_bytes() == ledger

    result = costtune.resume_sweep(run, trainable=steady)

    trials = result.trials
    assert (trials["stop_reason"] != "interrupted").sum() == 6
    assert set(trials["stop_reason"]) - {"interrupted"} <= {"completed", "rung_pruned"}
    assert (run / "ledger.jsonl").read_bytes().startswith(ledger)


# ------------------------------------------------------------- Ray Tune's meaning, kept or refused
def _evaluation_fn(step, width, height):
    return (0.1 + width * step / 100) ** (-1) + height * 0.1


def _easy_objective(config):
    """Ray Tune's tune_basic_example objective, with a nested optimiser section added."""
    assert config["activation"] in ("relu", "tanh")
    assert isinstance(config["opt"]["lr"], float) and 1e-4 <= config["opt"]["lr"] <= 1e-1
    assert config["opt"]["momentum"] == 0.9  # a fixed value inside a nested space stays as given
    width, height = config["width"], config["height"]
    assert isinstance(width, float) and isinstance(height, float)
    for step in range(config["steps"]):
        tune.report({"iterations": step, "mean_loss": _evaluation_fn(step, width, height)})


def test_ray_tunes_basic_example_keeps_grid_search_and_nested_spaces(ray_session, tmp_path) -> None:
    result = costtune.run_sweep(
        _easy_objective,
        search_space={
            "steps": 4,
            "width": tune.uniform(0, 20),
            "height": tune.uniform(-100, 100),
            "activation": tune.grid_search(["relu", "tanh"]),
            "opt": {"lr": tune.loguniform(1e-4, 1e-1), "momentum": 0.9},
        },
        metric="mean_loss", mode="min", num_samples=3, max_epochs=4,
        cost={"prices": {"cpu": 0.05}}, output=tmp_path / "basic",
    )  # fmt: skip
    trials = result.trials
    # as in Ray: the grid crossed num_samples times (3 × 2 = 6 trials), every trial ran (no error)
    assert len(trials) == 6 and set(trials["status"]) == {"TERMINATED"}
    assert trials["hp.activation"].value_counts().to_dict() == {"relu": 3, "tanh": 3}
    assert trials["hp.opt/lr"].between(1e-4, 1e-1).all() and trials["hp.opt/lr"].nunique() == 6
    assert result.config.searcher.type == "random"  # Ray's own searcher: the one that crosses grids


def test_tune_with_resources_sets_what_each_trial_holds_and_is_billed_for(ray_session, tmp_path) -> None:
    result = costtune.run_sweep(
        tune.with_resources(_easy_objective, {"cpu": 2}),
        search_space={
            "steps": 3, "width": tune.uniform(0, 20), "height": tune.uniform(-100, 100),
            "activation": tune.choice(["relu", "tanh"]), "opt": {"lr": tune.loguniform(1e-4, 1e-1), "momentum": 0.9},
        },
        metric="mean_loss", num_samples=2, max_epochs=3, searcher={"type": "random"},
        cost={"prices": {"cpu": 0.05}}, output=tmp_path / "async",
    )  # fmt: skip
    assert result.config.resources.cpus == 2
    for record in result.ledger.trials.values():
        assert record.device_kind == "cpu" and record.devices == 2.0  # billed as the 2 cores it held
        assert result.ledger.cost_usd(record) == pytest.approx(record.seconds * 2 * 0.05 / 3600)


@pytest.mark.parametrize(
    ("keyword", "value", "names"),
    [
        ("stop", {"training_iteration": 5}, "max_epochs=N"),
        ("checkpoint_config", object(), "two best checkpoints"),
        ("resources_per_trial", {"cpu": 2}, "resources={'cpus'"),
        ("search_alg", object(), "searcher={'type'"),
        ("storage_path", "/tmp/x", "output='DIR'"),
        ("scheduler", tune.schedulers.ASHAScheduler(), "scheduler={'type': 'cost_aware_hyperband'"),
    ],
)
def test_ray_keywords_costtune_does_not_take_are_refused_naming_the_equivalent(
    tmp_path, keyword, value, names
) -> None:
    with pytest.raises(ConfigError) as refused:
        costtune.run_sweep(
            train_fn, search_space={"x": tune.uniform(0, 1)}, max_epochs=2, num_samples=1,
            output=tmp_path / "r", **{keyword: value},
        )  # fmt: skip
    message = str(refused.value)
    assert message.startswith(f"{keyword}: ") and names in message and "\n" not in message
    assert not (tmp_path / "r").exists()


def _slow_epochs(config):
    import time

    for epoch in range(1, config["max_epochs"] + 1):
        time.sleep(0.25)
        tune.report({"loss": config["x"] + 1.0 / epoch})


def test_time_budget_s_stops_the_sweep_on_the_wall_clock_as_in_ray(ray_session, tmp_path) -> None:
    result = costtune.run_sweep(
        _slow_epochs, search_space={"x": tune.uniform(0, 1)}, max_epochs=40, num_samples=8,
        scheduler={"type": "fifo"}, time_budget_s=5,
        cost={"prices": {"cpu": 0.05}}, output=tmp_path / "r",
    )  # fmt: skip
    assert result.config.budget.max_wall_seconds == 5
    trials = result.trials
    # 40 epochs of 0.25 s would take 10 s a trial; the budget ended every trial well before
    assert (trials["epochs"] < 40).all() and len(trials) < 8
    assert set(trials["stop_reason"]) == {"time_budget"}, trials[["trial_id", "status", "stop_reason"]]
    with pytest.raises(ConfigError, match="^time_budget_s: also set as budget.max_wall_seconds"):
        costtune.run_sweep(
            _slow_epochs, search_space={"x": tune.uniform(0, 1)}, max_epochs=2, num_samples=1, time_budget_s=3,
            budget={"max_wall_seconds": 5}, output=tmp_path / "r2",
        )  # fmt: skip


def _late_reporter(config):
    import time

    time.sleep(2.0)  # longer than the sweep's time budget: it never reports
    tune.report({"loss": config["x"]})


def test_a_sweep_ended_before_any_report_still_reads_back(ray_session, tmp_path) -> None:
    """A time budget (or Ctrl-C) that ends a sweep before any trial reported leaves its tables
    and no log: its result and ``load_run`` read it back (no trial, its config), and a report
    says so, where before ``result.config`` raised "not a costtune run directory"."""
    result = costtune.run_sweep(
        _late_reporter, search_space={"x": tune.uniform(0, 1)}, metric="loss", max_epochs=1,
        num_samples=2, scheduler={"type": "fifo"}, time_budget_s=0.5,
        cost={"prices": {"cpu": 0.05}}, output=tmp_path / "r",
    )  # fmt: skip
    assert result.config.budget.max_wall_seconds == 0.5 and result.trials.empty
    assert costtune.load_run(tmp_path / "r").config.name == result.config.name
    from click.testing import CliRunner

    from costtune.cli import main

    shown = CliRunner().invoke(main, ["report", str(tmp_path / "r")])
    assert shown.exit_code == 0, shown.output
