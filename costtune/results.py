"""What a sweep leaves behind, as Python objects: ``SweepResult`` and ``load_run``.

A run directory is read back with its ``config.yaml`` and ``ledger.jsonl`` alone (no Ray):
finished, interrupted and still-running runs alike. ``run_sweep`` returns the same object.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from costtune.core.direction import Direction
from costtune.core.ledger import Ledger, check_intact
from costtune.core.run import ledger_spec, load_run_config
from costtune.errors import ConfigError

#: Ray Tune's experiment folder inside a run directory
_EXPERIMENT = "ray"


@dataclass(frozen=True)
class SweepResult:
    """A sweep's metered results (all of it also on disk under ``output_dir``).

    Attributes:
        output_dir: the run directory.
        ledger: the metered record, one :class:`~costtune.core.ledger.TrialRecord` per trial.
        summary: totals (``summary.json``): cost, device-hours, saved fraction, best trial.
        wall_seconds: how long the sweep ran (NaN when read back from a run that never ended).
        interrupted: the sweep was stopped (Ctrl-C) with trials paused; ``costtune sweep
            --resume output_dir`` (in Python, ``costtune.resume_sweep(output_dir)``) continues them.
    """

    output_dir: Path
    ledger: Ledger
    summary: dict[str, Any]
    wall_seconds: float
    interrupted: bool = False

    @property
    def config(self) -> Any:
        """The validated :class:`~costtune.core.config.SweepConfig` the run was written with."""
        return load_run_config(self.output_dir)

    @property
    def trials(self) -> pd.DataFrame:
        """One row per trial: status, stop reason, epochs, device-hours, dollars, metrics, ``hp.*``."""
        return self.ledger.to_frame()

    @property
    def curves(self) -> pd.DataFrame:
        """One row per reported epoch of every trial, in the order each trial reported them.

        Columns: ``trial_id``, ``epoch``, the metric, ``seconds`` (metered so far),
        ``epoch_seconds``, ``cost_usd`` (the trial's dollars so far), ``stop_reason`` (on the
        trial's last row once it ended, else empty), then every other reported metric. An
        epoch run twice (re-run after a failure or a resume) appears twice: both were paid.
        """
        metric = self.ledger.spec.metric
        rows: list[dict[str, Any]] = []
        for record in self.ledger.trials.values():
            previous = 0.0
            last = len(record.metric_history) - 1
            for i, (epoch, seconds, metrics) in enumerate(record.metric_history):
                rows.append(
                    {
                        "trial_id": record.trial_id,
                        "epoch": epoch,
                        metric: metrics.get(metric, math.nan),
                        "seconds": seconds,
                        "epoch_seconds": seconds - previous,
                        "cost_usd": self.ledger.spec.cost_model.cost_usd(
                            seconds, record.devices, record.device_kind
                        ),
                        "stop_reason": record.stop_reason if i == last else None,
                        **{k: v for k, v in metrics.items() if k != metric},
                    }
                )
                previous = seconds
        columns = ["trial_id", "epoch", metric, "seconds", "epoch_seconds", "cost_usd", "stop_reason"]
        return pd.DataFrame(rows, columns=None if rows else columns)

    @property
    def best(self) -> dict[str, Any] | None:
        """The best trial: ``trial_id``, ``config``, ``epoch`` and ``metrics`` at its best epoch,
        ``cost_usd`` (the whole trial), and ``checkpoint``: the directory holding the weights of
        that epoch (each trial keeps its best checkpoints by the sweep's metric), or ``None``
        when the trainable wrote none for it."""
        return best_trial(self.ledger, self.output_dir)

    @property
    def findings(self) -> list[Any]:
        """What the sweep's own curves say about its decisions, each a
        :class:`~costtune.core.analysis.Finding` (``code``, ``message``); empty when nothing stands out.
        ``costtune sweep`` and ``costtune report`` print them as ``note:`` lines."""
        from costtune.core.analysis import findings

        return findings(self.ledger)

    def to_optuna_study(self) -> Any:
        """The trials as an in-memory ``optuna.Study``, for Optuna's analysis tools
        (``optuna.importance``, ``optuna.visualization``). See :func:`to_optuna_study`."""
        return to_optuna_study(self.ledger, load_run_config(self.output_dir).search_space)

    def _repr_html_(self) -> str:
        s = self.summary
        best = self.best
        head = (
            f"<p><b>costtune sweep</b> {html.escape(str(self.output_dir))}: "
            f"{s.get('trials', 0)} trials, ${float(s.get('total_cost_usd', 0.0)):.4g}, "
            f"{float(s.get('device_hours', 0.0)):.4g} device-hours"
        )
        if best is not None:
            value = best["metrics"].get(self.ledger.spec.metric, math.nan)
            head += f"; best {html.escape(self.ledger.spec.metric)} {value:.4g} (trial {best['trial_id']})"
        if self.interrupted:
            head += "; <b>interrupted</b>"
        table = self.trials.head(20).to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0)
        return f"{head}</p>{table}"


def load_run(directory: str | Path) -> SweepResult:
    """A run directory read back as the :class:`SweepResult` ``run_sweep`` returned.

    Works on finished, interrupted and still-running runs: the ledger is the record; a torn
    last line is skipped (and counted in ``ledger.unreadable_lines``).
    """
    if not isinstance(directory, str | Path):
        raise ConfigError(
            f"load_run: directory must be a run directory's path, got {type(directory).__name__}"
        )
    out = Path(directory).resolve()
    config = load_run_config(out)
    written = check_intact(out)  # the summary as written: its wall time
    ledger = Ledger(ledger_spec(config), out)
    running = any(r.status == "RUNNING" for r in ledger.trials.values())
    summary = {**ledger.summary(), "output_dir": str(out), "best_checkpoint": best_checkpoint(ledger, out)}
    if "wall_seconds" in written and not running:
        summary["wall_seconds"] = written["wall_seconds"]
    return SweepResult(
        output_dir=out,
        ledger=ledger,
        summary=summary,
        wall_seconds=float(summary.get("wall_seconds", math.nan)),
        interrupted=running,
    )


def best_trial(ledger: Ledger, out: Path) -> dict[str, Any] | None:
    """The best trial of a run directory's books (see :attr:`SweepResult.best`)."""
    summary = ledger.summary()
    best_id = summary.get("best_trial_id")
    if best_id is None:
        return None
    record = ledger.trials[best_id]
    epoch = ledger.best_epoch(record)
    metrics = {k: v for k, v in record.best_metrics.items() if k != "epoch"}
    return {
        "trial_id": best_id,
        "config": dict(record.config),
        "epoch": epoch,
        "metrics": metrics,
        "cost_usd": ledger.cost_usd(record),
        "checkpoint": checkpoint_of(out, best_id, epoch),
    }


@dataclass(frozen=True)
class RecordedRun:
    """A finished run directory as recorded curves (:mod:`costtune.core.curves`), for ``costtune
    replay RUN_DIR``: one curve per trial, its metric as a loss (negated for ``mode: max``), its
    metered seconds per epoch, and the run's own prices folded into each curve's devices.

    Attributes:
        frame: the curves table (``config_id`` = trial id).
        usd_per_device_hour: the price every curve's ``devices`` is billed at.
        price_note: where that price came from, in words.
        best_loss: the run's best, as a loss: the default target.
        mixed: trials held devices of several prices (folded into ``devices``).
    """

    frame: pd.DataFrame
    usd_per_device_hour: float
    price_note: str
    best_loss: float
    mixed: bool = False


def recorded_run(directory: str | Path) -> RecordedRun:
    """:class:`RecordedRun` of a run directory (checked like :func:`load_run`)."""
    result = load_run(directory)
    ledger, spec = result.ledger, result.ledger.spec
    model = spec.cost_model
    kinds = {(r.device_kind) for r in ledger.trials.values() if r.metric_history}
    prices = {kind: model.usd_per_device_hour(kind) for kind in kinds}
    single = len(set(prices.values())) <= 1
    price = next(iter(prices.values()), 0.0) if single else 1.0
    rows: list[dict[str, Any]] = []
    for record in ledger.trials.values():
        by_epoch: dict[int, tuple[float, float]] = {}
        previous = 0.0
        for epoch, seconds, metrics in record.metric_history:
            value = metrics.get(spec.metric, math.nan)
            by_epoch[epoch] = (spec.direction.loss(value), seconds - previous)  # a re-run: the later
            previous = seconds
        epochs = sorted(by_epoch)
        if not epochs or epochs != list(range(1, len(epochs) + 1)):
            continue  # a clone (PBT) starts past epoch 1: not a curve of its own
        devices = record.devices if single else record.devices * prices[record.device_kind]
        for epoch in epochs:
            loss, seconds = by_epoch[epoch]
            rows.append(
                {
                    "config_id": record.trial_id,
                    **{f"hp.{k}": v for k, v in record.config.items()},
                    "epoch": epoch,
                    "val_loss": loss,
                    "epoch_seconds": max(seconds, 0.0),
                    "devices": devices,
                }
            )
    if not rows:
        raise ConfigError(f"replay: {result.output_dir} holds no trial that reported {spec.metric!r}")
    frame = pd.DataFrame(rows)
    note = (
        f"${price:g}/device-hour, the run's own ({', '.join(sorted(model.device_label(k) for k in kinds))})"
        if single
        else "the run's own prices per device type ("
        + ", ".join(f"{model.device_label(k)} ${p:g}" for k, p in sorted(prices.items()))
        + ")"
    )
    losses = frame["val_loss"].to_numpy(dtype=float)
    return RecordedRun(frame, price, note, float(np.nanmin(losses)), mixed=not single)


def best_checkpoint(ledger: Ledger, out: Path) -> str | None:
    """``summary.json``'s ``best_checkpoint``: the best epoch's checkpoint, relative to the run
    directory (the run may be moved), or ``None``."""
    best = best_trial(ledger, out)
    path = best["checkpoint"] if best is not None else None
    return None if path is None else path.relative_to(out).as_posix()


def checkpoint_of(out: Path, trial_id: str, epoch: int | None) -> Path | None:
    """The checkpoint Ray kept of ``trial_id`` at ``epoch`` (``training_iteration``; the newest
    where a restarted trial ran it twice), or ``None`` when none was written or it was deleted."""
    if epoch is None:
        return None
    trial_dirs = sorted(p for p in (out / _EXPERIMENT).glob(f"*_{trial_id}_*") if p.is_dir())
    for trial_dir in trial_dirs:
        results = trial_dir / "result.json"
        if not results.is_file():
            continue
        found = None
        for line in results.read_text(errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            name = row.get("checkpoint_dir_name")
            if not isinstance(row, dict) or row.get("training_iteration") != epoch or not name:
                continue
            if not re.fullmatch(r"checkpoint_\d+", str(name)) or not (trial_dir / name).is_dir():
                continue
            found = trial_dir / name  # the last one written for that epoch
        if found is not None:
            return found
    return None


def to_optuna_study(ledger: Ledger, search_space: Mapping[str, Any]) -> Any:
    """A sweep's trials as an in-memory ``optuna.Study`` (Optuna's own objects, no storage).

    Each trial that reported becomes a COMPLETE Optuna trial whose value is the best metric
    it reached, whatever epoch it stopped at (an early-stopped trial counts at the fidelity
    it reached), with its cost in ``user_attrs`` (``cost_usd``, ``epochs``, ``stop_reason``,
    ``costtune_trial_id``). Distributions come from the config's search space; a trial whose
    value lies outside them (PBT explores past the bounds) is left out. Trials that never
    reported, or reported only NaN, are left out too.
    """
    return study_of(trial_rows(ledger), search_space, ledger.spec.mode)


def trial_rows(ledger: Ledger) -> list[dict[str, Any]]:
    """What a study needs of each trial that reported: config, best metric, cost, epochs."""
    rows = []
    for record in ledger.trials.values():
        value = ledger.best_metric(record)
        if not math.isnan(value):
            rows.append(
                {
                    "trial_id": record.trial_id,
                    "config": record.config,
                    "value": value,
                    "cost_usd": ledger.cost_usd(record),
                    "epochs": record.epochs,
                    "stop_reason": record.stop_reason,
                }
            )
    return rows


def study_of(rows: list[dict[str, Any]], search_space: Mapping[str, Any], mode: str) -> Any:
    """:func:`to_optuna_study` from :func:`trial_rows`."""
    import optuna

    distributions = {name: _distribution(spec) for name, spec in search_space.items()}
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # not "A new study created in memory"
    try:
        study = optuna.create_study(direction=Direction.of(mode).optuna)
    finally:
        optuna.logging.set_verbosity(verbosity)
    trials = []
    for row in rows:
        if not all(name in row["config"] for name in distributions):
            continue
        try:
            trial = optuna.trial.create_trial(
                params={name: row["config"][name] for name in distributions},
                distributions=distributions,
                value=row["value"],
                user_attrs={
                    "costtune_trial_id": row["trial_id"],
                    "cost_usd": row["cost_usd"],
                    "epochs": row["epochs"],
                    "stop_reason": row["stop_reason"],
                },
            )
        except ValueError:  # a value outside its distribution (Optuna validates each one)
            continue
        trials.append(trial)
    study.add_trials(trials)
    return study


def _distribution(spec: Any) -> Any:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if spec.type == "choice":
        return CategoricalDistribution(list(spec.values))
    if spec.type in ("int", "logint"):
        return IntDistribution(int(spec.low), int(spec.high), log=spec.type == "logint")
    return FloatDistribution(float(spec.low), float(spec.high), log=spec.type == "loguniform")
