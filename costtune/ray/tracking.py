"""Experiment trackers: every trial of a run as an MLflow run (extra ``[mlflow]``).

:class:`MlflowLive` logs while the sweep runs (``tracking.mlflow`` in a config);
:func:`log_to_mlflow` exports a finished, interrupted or old run from its ledger. Both log
hyperparameters as params, every reported metric per epoch, and the metered ``cost_usd`` /
``gpu_hours`` / ``device_hours`` per epoch, with the stop reason as a tag.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from costtune.core.config import param_value
from costtune.core.cost import device_hours, is_gpu
from costtune.core.ledger import RAY_RESULT_FIELDS, Ledger
from costtune.core.policy import StopReason, reason_of
from costtune.errors import ConfigError


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
                Metric("gpu_hours", dh if is_gpu(record.device_kind) else 0.0, 0, stamp),
            ]
        params = [Param(k, str(v)) for k, v in record.config.items()]
        tags = [
            RunTag("costtune.trial_id", record.trial_id),
            RunTag("costtune.stop_reason", reason_of(record.stop_reason, record.status)),
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


class MlflowLive:
    """Logs a sweep to MLflow while it runs (a Ray Tune callback; see :func:`mlflow_callback`).

    One parent run per sweep (found again on ``--resume`` by its ``costtune.run_dir`` tag), one
    child run per trial with its hyperparameters as params, every reported metric and the
    trial's ``cost_usd`` / ``device_hours`` / ``gpu_hours`` so far at each epoch (step = epoch,
    the result's own timestamp), and its stop reason as a tag when it ends. The parent carries
    the sweep's running totals.
    """

    def __init__(
        self,
        experiment: str,
        tracking_uri: str,
        run_dir: Path,
        hyperparameters: list[str],
        stop_reason_of: Callable[[str], str | None] | None = None,
        billed_of: Callable[[str], float | None] | None = None,
    ) -> None:
        self.experiment = experiment
        #: the trial's whole bill from the books, logged when it ends and at the sweep's end
        #: (what it held but Ray did not time is charged as it lets go, after its last result)
        self.billed_of = billed_of
        self._steps: dict[str, int] = {}
        self.tracking_uri = tracking_uri
        self.run_dir = str(run_dir)
        self.hyperparameters = hyperparameters
        self.stop_reason_of = stop_reason_of or (lambda _trial_id: None)
        self._client: Any = None
        self._parent: str | None = None
        self._children: dict[str, str] = {}
        self._spent: dict[str, float] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks; the client holds a store connection, the run ids are
        # looked up again (by tag) where the sweep continues
        return {**self.__dict__, "_client": None, "_parent": None, "_children": {}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from costtune.core.rundir import relocated

        self.__dict__.update(state)
        self.run_dir = str(relocated(Path(self.run_dir), is_run_dir=True))

    # ------------------------------------------------------------------ MLflow
    def _mlflow(self) -> Any:
        if self._client is None:
            from mlflow.tracking import MlflowClient

            if self.tracking_uri.startswith("file:"):
                os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

    def _experiment_id(self) -> str:
        client = self._mlflow()
        found = client.get_experiment_by_name(self.experiment)
        return str(found.experiment_id if found else client.create_experiment(self.experiment))

    def _parent_run(self) -> str:
        if self._parent is None:
            client = self._mlflow()
            experiment_id = self._experiment_id()
            where = f"tags.`costtune.run_dir` = '{_quoted(self.run_dir)}' and tags.`costtune.role` = 'sweep'"
            found = client.search_runs([experiment_id], filter_string=where, max_results=1)
            if found:
                self._parent = found[0].info.run_id
                client.update_run(self._parent, status="RUNNING")
            else:
                run = client.create_run(
                    experiment_id,
                    run_name=Path(self.run_dir).name,
                    tags={"costtune.run_dir": self.run_dir, "costtune.role": "sweep"},
                )
                self._parent = str(run.info.run_id)
        return self._parent

    def _child_run(self, trial: Any) -> str:
        trial_id = trial.trial_id
        if trial_id not in self._children:
            client = self._mlflow()
            parent = self._parent_run()
            experiment_id = self._experiment_id()
            where = (
                f"tags.`mlflow.parentRunId` = '{parent}' and tags.`costtune.trial_id` = '{_quoted(trial_id)}'"
            )
            found = client.search_runs([experiment_id], filter_string=where, max_results=1)
            if found:
                self._children[trial_id] = found[0].info.run_id
            else:
                run = client.create_run(
                    experiment_id,
                    run_name=trial_id,
                    tags={"mlflow.parentRunId": parent, "costtune.trial_id": trial_id},
                )
                self._children[trial_id] = str(run.info.run_id)
                params = {k: str(param_value(trial.config, k)) for k in self.hyperparameters}
                from mlflow.entities import Param

                client.log_batch(self._children[trial_id], params=[Param(k, v) for k, v in params.items()])
        return self._children[trial_id]

    # ------------------------------------------------------------------ Tune's hooks
    def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        run_id = self._child_run(trial)
        step = int(result.get("training_iteration", 0))
        stamp = int(float(result.get("timestamp", time.time())) * 1000)
        metrics = [
            Metric(k, float(v), stamp, step)
            for k, v in result.items()
            if k not in RAY_RESULT_FIELDS
            and isinstance(v, int | float)
            and not isinstance(v, bool)
            and v == v
        ]
        self._mlflow().log_batch(run_id, metrics=metrics)
        self._steps[trial.trial_id] = step
        if "cost_usd" in result:
            self._spent[trial.trial_id] = float(result["cost_usd"])
            total = sum(self._spent.values())
            self._mlflow().log_batch(
                self._parent_run(), metrics=[Metric("sweep_cost_usd", total, stamp, len(self._spent))]
            )

    def _log_bill(self, trial: Any, run_id: str) -> None:
        from mlflow.entities import Metric

        billed_of = getattr(self, "billed_of", None)  # None: pickled by an older costtune
        billed = billed_of(trial.trial_id) if billed_of is not None else None
        if billed is None or billed == self._spent.get(trial.trial_id):
            return
        self._spent[trial.trial_id] = billed
        stamp = int(time.time() * 1000)
        step = getattr(self, "_steps", {}).get(trial.trial_id, 0)
        self._mlflow().log_batch(run_id, metrics=[Metric("cost_usd", billed, stamp, step)])
        total = sum(self._spent.values())
        self._mlflow().log_batch(
            self._parent_run(), metrics=[Metric("sweep_cost_usd", total, stamp, len(self._spent))]
        )

    def on_trial_end(self, trial: Any, failed: bool) -> None:
        client = self._mlflow()
        run_id = self._child_run(trial)
        self._log_bill(trial, run_id)
        reason = (
            StopReason.ERROR.value
            if failed
            else (self.stop_reason_of(trial.trial_id) or StopReason.COMPLETED.value)
        )
        client.set_tag(run_id, "costtune.stop_reason", reason)
        client.set_terminated(run_id, status="FAILED" if failed else "FINISHED")

    def on_experiment_end(self, trials: list[Any] = ()) -> None:  # type: ignore[assignment]
        for trial in trials:  # actors' shutdowns are charged when the sweep ends
            if trial.trial_id in self._spent:
                self._log_bill(trial, self._child_run(trial))
        if self._parent is not None:
            self._mlflow().set_terminated(self._parent, status="FINISHED")


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")  # inside an MLflow filter's '...'
