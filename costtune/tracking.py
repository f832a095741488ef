"""Experiment trackers: every trial of a run as an MLflow run (extra ``[mlflow]``).

Logged from the ledger after (or during a resume of) a sweep, so the same call also
exports an interrupted run or an old one: hyperparameters as params, every reported metric
per epoch, and the metered ``cost_usd`` / ``gpu_hours`` / ``device_hours`` per epoch and in
total, with the stop reason as a tag.
"""

from __future__ import annotations

import os
from pathlib import Path

from costtune.cost import device_hours
from costtune.errors import ConfigError
from costtune.ledger import Ledger


def default_tracking_uri(run_dir: Path) -> str:
    return (Path(run_dir).resolve() / "mlruns").as_uri()


def log_to_mlflow(
    ledger: Ledger, run_dir: Path, experiment: str, tracking_uri: str | None = None
) -> list[str]:
    """Log each trial of ``ledger`` as one MLflow run; returns the MLflow run ids."""
    try:
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ConfigError(
            "tracking.mlflow: MLflow is not installed (pip install 'costtune[mlflow]')"
        ) from None
    uri = tracking_uri or default_tracking_uri(run_dir)
    if uri.startswith("file:"):
        # MLflow 3 keeps its file store in maintenance mode behind this switch; a local
        # store under the run directory needs no database server.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment)
    model = ledger.spec.cost_model
    ids = []
    for record in ledger.trials.values():
        run = client.create_run(experiment_id, run_name=record.trial_id)
        run_id = run.info.run_id
        metrics = []
        for epoch, seconds, values in record.metric_history:
            stamp = int(epoch)
            metrics += [Metric(k, v, 0, stamp) for k, v in values.items() if v == v]
            dh = device_hours(seconds, record.devices)
            metrics += [
                Metric("cost_usd", model.cost_usd(seconds, record.devices, record.device_kind), 0, stamp),
                Metric("device_hours", dh, 0, stamp),
                Metric("gpu_hours", dh if record.device_kind == "gpu" else 0.0, 0, stamp),
            ]
        params = [Param(k, str(v)) for k, v in record.config.items()]
        tags = [
            RunTag("costtune.trial_id", record.trial_id),
            RunTag("costtune.stop_reason", str(record.stop_reason or "interrupted")),
            RunTag("costtune.device", model.device_label(record.device_kind)),
        ]
        for start in range(0, max(len(metrics), 1), 1000):  # MLflow's batch limit
            client.log_batch(
                run_id,
                metrics=metrics[start : start + 1000],
                params=params if start == 0 else [],
                tags=tags if start == 0 else [],
            )
        client.set_terminated(run_id, status="FAILED" if record.status == "ERROR" else "FINISHED")
        ids.append(run_id)
    return ids
