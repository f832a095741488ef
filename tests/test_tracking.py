from __future__ import annotations

import os

import pytest

from costtune.config import parse_config
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
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    ledger = result.ledger
    assert set(runs) == set(ledger.trials)
    for trial_id, record in ledger.trials.items():
        run = runs[trial_id]
        assert run.info.status == "FINISHED"
        assert float(run.data.params["lr"]) == pytest.approx(record.config["lr"])
        assert run.data.tags["costtune.stop_reason"] == record.stop_reason
        history = client.get_metric_history(run.info.run_id, "val_loss")
        assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [
            (e, pytest.approx(v)) for e, _s, v in record.history
        ]
        assert run.data.metrics["cost_usd"] == pytest.approx(ledger.cost_usd(record))
        assert run.data.metrics["gpu_hours"] == 0.0
