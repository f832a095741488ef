from __future__ import annotations

import os

import pytest

from costtune.core.config import parse_config
from costtune.sweep import run_sweep
from tests.conftest import SMALL

pytestmark = pytest.mark.ray
mlflow = pytest.importorskip("mlflow")


def test_sweep_logs_every_trial_to_a_local_mlflow_store(ray_session, tmp_path) -> None:
    from mlflow.tracking import MlflowClient

    config = parse_config({**SMALL, "num_samples": 3, "max_epochs": 3, "tracking": {"mlflow": {}}})
    result = run_sweep(config, tmp_path / "run")
    store = tmp_path / "run" / "mlruns"
    assert store.is_dir()
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=store.as_uri())
    experiment = client.get_experiment_by_name("small")
    every = client.search_runs([experiment.experiment_id])
    parents = [r for r in every if r.data.tags.get("costtune.role") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert parents[0].data.tags["costtune.run_dir"] == str(tmp_path / "run")
    assert parents[0].data.metrics["sweep_cost_usd"] == pytest.approx(result.summary["total_cost_usd"])
    runs = {r.info.run_name: r for r in every if r is not parents[0]}
    ledger = result.ledger
    assert set(runs) == set(ledger.trials)
    assert {r.data.tags["mlflow.parentRunId"] for r in runs.values()} == {parents[0].info.run_id}
    for trial_id, record in ledger.trials.items():
        run = runs[trial_id]
        assert run.info.status == "FINISHED"
        assert float(run.data.params["lr"]) == pytest.approx(record.config["lr"])
        assert run.data.tags["costtune.stop_reason"] == record.stop_reason
        history = client.get_metric_history(run.info.run_id, "val_loss")
        assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [
            (e, pytest.approx(v)) for e, _s, v in record.history
        ]
        assert all(m.timestamp > 1.7e12 for m in history)  # the result's own time, in ms
        assert run.data.metrics["cost_usd"] == pytest.approx(ledger.cost_usd(record))
        assert run.data.metrics["gpu_hours"] == 0.0


def test_mlflow_shows_the_sweep_while_it_is_still_running(tmp_path) -> None:
    """Read back from a real local store by another process, mid-sweep."""
    import subprocess
    import sys
    import time

    import yaml
    from mlflow.tracking import MlflowClient

    from tests.conftest import REPO

    config = {
        "name": "live",
        "trainable": {"name": "tests.user_trainables:steady", "args": {"epoch_s": 0.1}},
        "metric": "loss",
        "max_epochs": 15,
        "num_samples": 4,
        "max_concurrent_trials": 1,
        "search_space": {"x": {"type": "uniform", "low": 0, "high": 1}},
        "searcher": {"type": "random"},
        "scheduler": {"type": "fifo"},
        "cost": {"prices": {"cpu": 0.5}},
        "tracking": {"mlflow": {}},
    }
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(config))
    run = tmp_path / "run"
    driver = subprocess.Popen(
        [sys.executable, "-m", "costtune.cli", "sweep", str(path), "--output", str(run), "--no-progress"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAY_AUTH_MODE": "disabled", "MLFLOW_ALLOW_FILE_STORE": "true"},
    )
    client = None  # made once the sweep has made its store: a client creates a missing one
    seen_live = None
    deadline = time.monotonic() + 240
    while driver.poll() is None and time.monotonic() < deadline:
        if client is None and (run / "mlruns").is_dir():
            client = MlflowClient(tracking_uri=(run / "mlruns").as_uri())
        experiment = client.get_experiment_by_name("live") if client is not None else None
        if experiment is not None:
            children = [
                r
                for r in client.search_runs([experiment.experiment_id])
                if "costtune.trial_id" in r.data.tags
            ]
            costs = [r.data.metrics.get("cost_usd", 0.0) for r in children]
            if children and max(costs) > 0 and driver.poll() is None:
                seen_live = (len(children), max(costs))
                break
        time.sleep(0.5)
    assert driver.wait(timeout=240) == 0, driver.stderr.read()[-2000:] if driver.stderr else ""
    assert seen_live is not None, "nothing reached MLflow before the sweep ended"
    assert seen_live[0] < 4  # read while trials were still to come
