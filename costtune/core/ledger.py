"""The ledger: one row per trial, built from an append-only log of metered events.

Every reported epoch is one JSON line in ``ledger.jsonl`` (written and flushed as it
happens), every trial end is another. The trial table (pandas, CSV, Parquet) and the
sweep summary are *derived* from that log, so a resumed sweep re-reads the log and
appends to it instead of starting a new one, and a killed driver loses at most the
line it was writing (a torn last line is skipped on load).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import statistics
import time
import warnings
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from costtune.core.cost import CostModel, device_hours, is_gpu, roi
from costtune.core.direction import Direction
from costtune.core.files import json_default, write_atomic
from costtune.core.rundir import RAY_STATE_COPIES, relocated
from costtune.errors import CosttuneError

LEDGER_FILE = "ledger.jsonl"


#: Fields Ray Tune puts in every result: bookkeeping, not the trainable's metrics
RAY_RESULT_FIELDS = frozenset(
    {
        "training_iteration", "timestamp", "time_this_iter_s", "time_total_s", "time_since_restore",
        "iterations_since_restore", "pid", "done", "should_checkpoint", "timesteps_total",
        "episodes_total", "timesteps_since_restore", "date", "hostname", "node_ip", "trial_id",
        "experiment_tag", "checkpoint_dir_name",
    }
)  # fmt: skip
#: The trial's cost so far, which costtune adds to every result (``LedgerCallback``)
COST_FIELDS = frozenset({"cost_usd", "device_hours", "gpu_hours"})


class LedgerWriteError(CosttuneError):
    """The ledger could not be written (a full disk, a lost mount): the sweep must stop,
    since what is not in the ledger is not metered. Every line written before is kept whole."""


def _write_error(path: Path, cause: OSError) -> LedgerWriteError:
    where = "the disk holding it is full" if cause.errno == errno.ENOSPC else cause.strerror
    return LedgerWriteError(
        f"ledger: cannot write {path}: {where}; the sweep stopped, every line before is kept"
    )


#: the ledger of each run directory in this process (:meth:`Ledger.shared`)
_SHARED: weakref.WeakValueDictionary[str, Ledger] = weakref.WeakValueDictionary()


class LedgerWarning(UserWarning):
    """Something in a ledger file needed repair or was skipped (the CLI prints it in one line)."""


#: :attr:`TimelineRow.kind`: a reported epoch that carried the metric (its value may be NaN:
#: the trial reported NaN), one that did not, and a charge for time held but not timed
RESULT, OTHER, CHARGE = "result", "other", "charge"


class TimelineRow(NamedTuple):
    """One line of the books, in arrival order (``kind``: :data:`RESULT`, :data:`OTHER` or
    :data:`CHARGE`; a charge's ``value`` is NaN)."""

    trial_id: str
    epoch: int
    usd: float  # what it cost
    value: float  # the metric
    time: float  # unix time
    kind: str = RESULT


@dataclass(slots=True)
class TrialRecord:
    """What the ledger knows about one trial; updated by each metered report."""

    trial_id: str
    config: dict[str, Any]
    device_kind: str = "cpu"
    devices: float = 1.0
    epochs: int = 0
    seconds: float = 0.0  # metered seconds charged: every reported epoch once, re-runs included
    reported_seconds: dict[int, float] = field(default_factory=dict)  # the time field, by epoch
    history: list[tuple[int, float, float]] = field(default_factory=list)  # epoch, s, metric
    last_metrics: dict[str, float] = field(default_factory=dict)
    best_metrics: dict[str, float] = field(default_factory=dict)  # all metrics at the best epoch
    metric_history: list[tuple[int, float, dict[str, float]]] = field(default_factory=list)  # epoch, s, all
    status: str = "RUNNING"
    stop_reason: str | None = None


@dataclass(frozen=True, slots=True)
class LedgerSpec:
    """How to turn metered events into dollars and ROI.

    Args:
        metric: the metric optimised, e.g. ``val_loss``.
        mode: ``min`` or ``max``.
        cost_model: prices.
        business_value_usd: USD value of one unit of metric improvement (ROI numerator).
        baseline_metric: the reference Δmetric is measured against; ``None`` means the
            sweep's baseline: the median metric of all trials at ``baseline_epoch`` (the
            first rung), so that a trial that starts badly and stays bad never ranks first.
        max_epochs: the full training length, for the "every trial ran to the end" cost.
        baseline_epoch: the epoch of the sweep's baseline (default 1: the first report).
    """

    metric: str
    mode: str
    cost_model: CostModel
    business_value_usd: float = 1.0
    baseline_metric: float | None = None
    max_epochs: int | None = None
    baseline_epoch: int = 1

    @property
    def direction(self) -> Direction:
        return Direction.of(self.mode)


class Ledger:
    """Append-only record of a sweep's metered trials.

    Args:
        spec: metric and prices.
        directory: where ``ledger.jsonl`` lives; ``None`` keeps the ledger in memory.
    """

    def __init__(self, spec: LedgerSpec, directory: Path | str | None = None) -> None:
        self.spec = spec
        self.trials: dict[str, TrialRecord] = {}
        self._last_time: dict[str, float] = {}
        #: every reported epoch and every charge, in arrival order (:class:`TimelineRow`)
        self.timeline: list[TimelineRow] = []
        self._path = Path(directory) / LEDGER_FILE if directory is not None else None
        #: lines of the log that could not be read (a torn last line, corruption) and were skipped
        self.unreadable_lines = 0
        self._baseline: tuple[int, float] | None = None  # (timeline length, value), a cache
        self._contributions: tuple[int, dict[str, float]] | None = None  # the same
        #: bytes of the log this ledger has read or written (another writer makes it stale)
        self._size = 0
        if self._path is not None and self._path.exists():
            self._size = self._path.stat().st_size
            for event in _read_events(self._path, self):
                self._apply(event)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # unpickled by a resume of a run that may since have been copied or moved
        self.__dict__.update(state)
        if self._path is not None:
            self._path = relocated(self._path)

    @property
    def path(self) -> Path | None:
        return self._path

    def reloaded(self) -> Ledger:
        """A fresh ledger of the same spec and directory, read back from the log."""
        return Ledger(self.spec, None if self._path is None else self._path.parent)

    def share(self) -> Ledger:
        """Make this the one ledger of its directory in this process (:meth:`shared`); returns it.
        A sweep shares its ledger before Tune copies or restores the objects that hold one, so
        that their :meth:`shared` finds it without reading the log again."""
        if self._path is not None:
            _SHARED[str(self._path.resolve())] = self
        return self

    def shared(self) -> Ledger:
        """The one ledger of this directory in this process, read back from the log once.

        What Tune unpickles on a resume (the ledger callback, the stopper) each held the
        ledger; they must meet on one object again, or the stopper would meter from a copy
        the callback never writes to. An in-memory ledger is its own.
        """
        if self._path is None:
            return self
        key = str(self._path.resolve())
        found = _SHARED.get(key)
        size = self._path.stat().st_size if self._path.exists() else 0
        if found is None or found.spec != self.spec or found._size != size:  # missing, or stale
            found = self.reloaded()
            _SHARED[key] = found
        return found

    # ----------------------------------------------------------------- recording
    def record_result(
        self,
        trial_id: str,
        *,
        epoch: int,
        seconds: float,
        metrics: Mapping[str, float],
        config: Mapping[str, Any] | None = None,
        device_kind: str = "cpu",
        devices: float = 1.0,
        increment_seconds: float | None = None,
    ) -> TrialRecord:
        """Record one reported epoch of a trial.

        Args:
            seconds: the trial's cumulative metered time (Ray's ``time_total_s``, or a
                replay's simulated seconds).
            increment_seconds: what this epoch alone took (Ray's ``time_this_iter_s``),
                when known. Otherwise it is derived from ``seconds``: a report for an epoch
                already seen is a re-run from an earlier checkpoint, charged from that
                checkpoint's time — the lost work stays charged once, the re-run once more.
        """
        event: dict[str, Any] = {
            "event": "result",
            "trial_id": trial_id,
            "epoch": int(epoch),
            "seconds": float(seconds),
            "metrics": {k: _json_number(v) for k, v in metrics.items()},
            "device_kind": device_kind,
            "devices": float(devices),
            "increment": None if increment_seconds is None else float(increment_seconds),
            "time": time.time(),  # driver wall clock, for spend-over-time plots only
        }
        known = self.trials.get(trial_id)
        if known is None or (config is not None and dict(config) != known.config):
            event["config"] = dict(config or {})  # first report, or PBT explored a new config
        self._write(event)
        return self._apply(event)

    def end(
        self,
        trial_id: str,
        *,
        status: str,
        stop_reason: str,
        config: Mapping[str, Any] | None = None,
        extra_seconds: float = 0.0,
    ) -> None:
        """Record how a trial ended (``status`` TERMINATED/ERROR, a ``stop_reason``).

        A trial that never reported (refused by the budget, failed at start-up) gets a row
        with its ``config`` and no cost. ``extra_seconds`` charges time it held its devices
        after its last report (a hung trial ended by a watchdog).
        """
        event: dict[str, Any] = {
            "event": "end",
            "trial_id": trial_id,
            "status": status,
            "stop_reason": stop_reason,
        }
        if trial_id not in self.trials:
            event["config"] = dict(config or {})
        if extra_seconds > 0:
            event["extra_seconds"] = float(extra_seconds)
        self._write(event)
        self._apply(event)

    def charge(self, trial_id: str, *, seconds: float, why: str) -> None:
        """Charge time a trial held its devices without reporting it (work lost with a
        failed node or process between two reports)."""
        if trial_id not in self.trials or seconds <= 0:
            return
        event = {
            "event": "charge",
            "trial_id": trial_id,
            "seconds": float(seconds),
            "why": why,
            "time": time.time(),
        }
        self._write(event)
        self._apply(event)

    def charge_held(
        self, trial_id: str, *, held_s: float, charged_then: float, pending_s: float = 0.0
    ) -> float:
        """Bill a stretch the trial held its devices whole: charge what of its ``held_s``
        seconds the books have not counted since the stretch began (when the trial had been
        charged ``charged_then``), less ``pending_s`` about to be charged another way (time held
        while hung). Returns the seconds charged (``unmetered``); never a negative charge."""
        record = self.trials.get(trial_id)
        if record is None:
            return 0.0
        unmetered = held_s - (record.seconds - charged_then) - pending_s
        if unmetered <= 0:
            return 0.0
        self.charge(trial_id, seconds=unmetered, why="unmetered")
        return unmetered

    def charged_after(self, trial_id: str, *, epoch: int, seconds: float, increment: float | None) -> float:
        """The trial's metered seconds once this result is recorded (nothing is recorded
        here): the sweep's one meter, read before the books are written.

        Tune shows a result to the stopper and the scheduler before the ledger callback
        records it; they meter it here, by the same rule as :meth:`record_result`: what the
        trial was charged so far (lost work and hung time included) plus this epoch.
        """
        record = self.trials.get(trial_id)
        if record is None:
            return charged_increment({}, 0, epoch, seconds, increment)
        return record.seconds + charged_increment(
            record.reported_seconds, record.epochs, epoch, seconds, increment
        )

    def usd_after(
        self, trial_id: str, *, epoch: int, seconds: float, increment: float | None, kind: str, devices: float
    ) -> float:
        """:meth:`charged_after` in dollars, for ``devices`` of ``kind``."""
        charged = self.charged_after(trial_id, epoch=epoch, seconds=seconds, increment=increment)
        return self.spec.cost_model.cost_usd(charged, devices, kind)

    def last_report_time(self, trial_id: str) -> float | None:
        """Wall-clock time of the trial's latest metered event, if any."""
        return self._last_time.get(trial_id)

    def _write(self, event: Mapping[str, Any]) -> None:
        if self._path is None:
            return
        line = (json.dumps(event, allow_nan=False) + "\n").encode()
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _write_error(self._path, exc) from None
        try:
            kept = os.fstat(fd).st_size
            try:
                written = os.write(fd, line)
                if written != len(line):  # a short write: the disk filled mid-line
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                os.fsync(fd)  # a line written is a line kept, whatever happens next
                self._size = kept + written if self._size == kept else -1  # -1: someone else wrote too
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, kept)  # never leave half a line behind
                raise _write_error(self._path, exc) from None
        finally:
            os.close(fd)

    def _apply(self, event: Mapping[str, Any]) -> TrialRecord:
        trial_id = event["trial_id"]
        record = self.trials.get(trial_id)
        if record is None:
            record = TrialRecord(trial_id=trial_id, config=dict(event.get("config") or {}))
            self.trials[trial_id] = record
        elif event.get("config") is not None:
            record.config = dict(event["config"])
        if "time" in event:
            self._last_time[trial_id] = event["time"]
        if event["event"] == "charge":
            usd_before = self.cost_usd(record)
            record.seconds += event["seconds"]
            self.timeline.append(
                TimelineRow(
                    trial_id,
                    record.epochs,
                    self.cost_usd(record) - usd_before,
                    math.nan,
                    event.get("time", math.nan),
                    CHARGE,
                )
            )
            return record
        if event["event"] == "end":
            record.status = event["status"]
            record.stop_reason = event["stop_reason"]
            record.seconds += event.get("extra_seconds", 0.0)
            return record
        metrics = {k: (math.nan if v is None else float(v)) for k, v in event["metrics"].items()}
        moved = record.device_kind != event["device_kind"] or record.devices != event["devices"]
        usd_before = self.cost_usd(record) if moved else 0.0
        record.device_kind = event["device_kind"]
        record.devices = event["devices"]
        epoch, reported = event["epoch"], event["seconds"]
        charged = charged_increment(
            record.reported_seconds, record.epochs, epoch, reported, event.get("increment")
        )
        record.seconds += charged
        record.reported_seconds[epoch] = reported
        record.epochs = max(record.epochs, epoch)
        record.last_metrics = metrics
        record.status = "RUNNING"
        value = metrics.get(self.spec.metric, math.nan)
        if self.spec.direction.better(value, record.best_metrics.get(self.spec.metric, math.nan)):
            record.best_metrics = {"epoch": float(epoch), **metrics}
        if self.spec.metric in metrics:
            record.history.append((epoch, record.seconds, value))
        record.metric_history.append((epoch, record.seconds, metrics))
        if moved:  # repriced as what it holds now (the first report, or a move to other devices)
            spent = self.cost_usd(record) - usd_before
        else:
            spent = self.spec.cost_model.cost_usd(charged, record.devices, record.device_kind)
        kind = RESULT if self.spec.metric in metrics else OTHER
        self.timeline.append(TimelineRow(trial_id, epoch, spent, value, event.get("time", math.nan), kind))
        return record

    # ------------------------------------------------------------------- reading
    def cost_usd(self, record: TrialRecord) -> float:
        return self.spec.cost_model.cost_usd(record.seconds, record.devices, record.device_kind)

    def best_epoch(self, record: TrialRecord) -> int | None:
        """The epoch at which ``record`` reported its best metric (``None``: never reported it)."""
        best = self.best_metric(record)
        return next((e for e, _, v in record.history if v == best), None)

    def best_metric(self, record: TrialRecord) -> float:
        return self.spec.direction.best(m for _, _, m in record.history)

    def sweep_baseline(self) -> float:
        """What ROI measures improvement from: ``baseline_metric`` if set, else the median over
        trials of the metric each reported at ``baseline_epoch`` (its first report at or after
        it), or, while no trial has got that far, the median of their first reports."""
        if self.spec.baseline_metric is not None:
            return self.spec.baseline_metric
        key = len(self.timeline)
        cached = getattr(self, "_baseline", None)  # absent on a ledger pickled before it existed
        if cached is not None and cached[0] == key:
            return cached[1]
        at_rung, first = [], []
        for r in self.trials.values():
            values = [(e, m) for e, _, m in r.history if not math.isnan(m)]
            if not values:
                continue
            first.append(values[0][1])
            reached = next((m for e, m in values if e >= self.spec.baseline_epoch), None)
            if reached is not None:
                at_rung.append(reached)
        pool = at_rung or first
        value = statistics.median(pool) if pool else math.nan
        self._baseline = (key, value)
        return value

    def contributions(self) -> dict[str, float]:
        """What each trial added to the sweep's best, in "higher is better" units.

        Walks every report in arrival order with the sweep's best-so-far starting at
        :meth:`sweep_baseline`; a report that beats it credits its trial with the gap it
        closed. A trial that never set a new best gets 0, and the credits sum to how far the
        sweep's best got past the baseline.
        """
        key = len(self.timeline)
        cached = getattr(self, "_contributions", None)  # absent on a ledger pickled before it existed
        if cached is not None and cached[0] == key:
            return cached[1]
        direction = self.spec.direction
        best = self.sweep_baseline()
        credit = {trial_id: 0.0 for trial_id in self.trials}
        for trial_id, _, _, value, *_ in self.timeline:
            if math.isnan(value):
                continue
            if math.isnan(best):
                best = value
            gained = direction.improvement(best, value)
            if gained > 0:
                credit[trial_id] = credit.get(trial_id, 0.0) + gained
                best = value
        self._contributions = (key, credit)
        return credit

    def trial_roi(self, record: TrialRecord) -> float:
        """What the trial's dollars bought the sweep: the improvement it brought to the sweep's
        best-so-far (from the baseline, :meth:`contributions`) × business value ÷ its dollars.

        0 for a trial that never set a new best, however cheaply it ran: a trial pruned at a
        poor loss, or a good one that a better one had already beaten, bought the sweep nothing.
        """
        if not record.history:
            return math.nan
        gained = self.contributions().get(record.trial_id, 0.0)
        return roi(gained, self.spec.business_value_usd, self.cost_usd(record))

    def to_frame(self) -> pd.DataFrame:
        """The trial cost table: one row per trial, one ``hp.<name>`` column per hyperparameter."""
        metric = self.spec.metric
        rows = []
        for r in self.trials.values():
            dh = device_hours(r.seconds, r.devices)
            rows.append(
                {
                    "trial_id": r.trial_id,
                    "status": r.status,
                    "stop_reason": r.stop_reason,
                    "epochs": r.epochs,
                    "seconds": r.seconds,
                    "device": self.spec.cost_model.device_label(r.device_kind),
                    "devices": r.devices,
                    "device_hours": dh,
                    "gpu_hours": dh if is_gpu(r.device_kind) else 0.0,
                    "cost_usd": self.cost_usd(r),
                    f"best_{metric}": self.best_metric(r),
                    f"last_{metric}": r.history[-1][2] if r.history else math.nan,
                    **{f"last_{k}": v for k, v in r.last_metrics.items() if k != metric},
                    "roi": self.trial_roi(r),
                    **{f"hp.{k}": _cell(v) for k, v in r.config.items()},
                }
            )
        return pd.DataFrame(rows)

    def summary(self) -> dict[str, Any]:
        """Totals of the sweep (what ``summary.json`` holds)."""
        metric, mode = self.spec.metric, self.spec.mode
        total_cost = sum(self.cost_usd(r) for r in self.trials.values())
        best_id, best = None, math.nan
        for r in self.trials.values():
            value = self.best_metric(r)
            if math.isnan(value):
                continue
            if best_id is None or self.spec.direction.better(value, best):
                best_id, best = r.trial_id, value
        full = self.cost_if_all_ran_full_usd()
        return {
            "metric": metric,
            "mode": mode,
            "trials": len(self.trials),
            "epochs": sum(r.epochs for r in self.trials.values()),
            "total_cost_usd": total_cost,
            "total_gpu_hours": sum(
                device_hours(r.seconds, r.devices) for r in self.trials.values() if is_gpu(r.device_kind)
            ),
            "total_device_hours": sum(device_hours(r.seconds, r.devices) for r in self.trials.values()),
            "best_trial_id": best_id,
            "best_metric": None if best_id is None else best,
            f"best_{metric}": None if best_id is None else best,
            "best_config": None if best_id is None else self.trials[best_id].config,
            "best_trial_metrics": None if best_id is None else self.trials[best_id].best_metrics,
            # the epoch whose weights to use, and what the whole trial cost
            "best_epoch": None if best_id is None else self.best_epoch(self.trials[best_id]),
            "best_cost_usd": None if best_id is None else self.cost_usd(self.trials[best_id]),
            "cost_if_all_ran_full_usd": full,
            # rounded: a sweep that stopped nothing early saved 0, not -2e-16
            "saved_fraction": round(1.0 - total_cost / full, 12) if full and full > 0 else None,
            "stop_reasons": _count(r.stop_reason or r.status for r in self.trials.values()),
        }

    def cost_if_all_ran_full_usd(self) -> float | None:
        """What the sweep would have cost had every trial trained to ``max_epochs``: the sum
        of :meth:`costs_if_ran_full_usd` (``None`` without ``max_epochs``)."""
        full = self.costs_if_ran_full_usd()
        return None if full is None else sum(full.values())

    def costs_if_ran_full_usd(self) -> dict[str, float] | None:
        """Each trial's cost had it trained to ``max_epochs``, by trial id (trials that
        reported no epoch are left out; ``None`` without ``max_epochs``).

        What it spent, and each epoch it did not run at the seconds one more of its epochs
        took: its metered seconds from its first report to its last, per epoch (the first
        carries the worker's start-up and data loading, which further epochs do not pay
        again). A trial with a single report is charged the lower of its own seconds per
        epoch and the sweep's median of those rates, so a start-up is never extrapolated
        as if every epoch paid it. A trial that ran ``max_epochs`` or more is charged what
        it ran.
        """
        max_epochs = self.spec.max_epochs
        if max_epochs is None:
            return None
        steady = {t: self.seconds_per_further_epoch(r) for t, r in self.trials.items()}
        known = [rate for rate in steady.values() if rate is not None]
        typical = statistics.median(known) if known else math.inf
        full: dict[str, float] = {}
        for trial_id, r in self.trials.items():
            if r.epochs == 0:
                continue
            rate = steady[trial_id]
            if rate is None:
                rate = min(r.seconds / r.epochs, typical)
            seconds = r.seconds + max(0, max_epochs - r.epochs) * rate
            full[trial_id] = self.spec.cost_model.cost_usd(seconds, r.devices, r.device_kind)
        return full

    @staticmethod
    def seconds_per_further_epoch(record: TrialRecord) -> float | None:
        """Metered seconds per epoch between a trial's first report and its last (``None``:
        one report, or none)."""
        reports = record.metric_history
        if len(reports) < 2:
            return None
        (first, at_first, _), (last, at_last, _) = reports[0], reports[-1]
        if last <= first:
            return None
        return max(0.0, at_last - at_first) / (last - first)

    # ------------------------------------------------------------------ writing
    def write_tables(self, directory: Path | str, **extra: Any) -> dict[str, Any]:
        """Write ``trials.csv``, ``trials.parquet`` and ``summary.json`` atomically.

        ``extra`` fields are added to the summary, which is returned.
        """
        directory = Path(directory)
        frame = self.to_frame()
        write_atomic(directory / "trials.csv", lambda p: frame.to_csv(p, index=False))
        write_atomic(directory / "trials.parquet", lambda p: frame.to_parquet(p, index=False))
        summary = {**self.summary(), **extra}
        if self._path is not None:
            # what a later resume or report checks the log against (:func:`check_intact`)
            summary[DIGEST_KEY] = ledger_digest(self._path)
        write_atomic(
            directory / "summary.json",
            lambda p: Path(p).write_text(json.dumps(summary, indent=2, default=json_default)),
        )
        return summary


def charged_increment(
    reported_by_epoch: Mapping[int, float],
    last_epoch: int,
    epoch: int,
    reported: float,
    increment: float | None,
) -> float:
    """Seconds to charge for one reported epoch.

    ``increment`` (the epoch's own time) when known; otherwise the difference of the
    cumulative field from the epoch before — for a re-run of an epoch already seen
    (restart from an earlier checkpoint) from the time recorded at that checkpoint's epoch.
    """
    if increment is None:
        previous = epoch - 1 if epoch <= last_epoch else last_epoch
        increment = reported - reported_by_epoch.get(previous, 0.0)
    return max(float(increment), 0.0)


#: the ``summary.json`` field that records the log it was written from (:func:`ledger_digest`)
DIGEST_KEY = "ledger"


def ledger_digest(path: Path, size: int | None = None) -> dict[str, Any]:
    """The log's first ``size`` bytes (default: its whole lines, up to its last newline; a torn
    last line is no part of the record): their length and SHA-256. The log only grows, so a
    later log begins with these bytes."""
    if size is None:
        return LedgerMark().update(path)  # the whole lines, as a run's mark reads them
    data = path.read_bytes()[:size] if path.exists() else b""
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


#: beside Ray's state snapshots (``.ray_state/``): what the log held at the run's last save
MARK_FILE = "ledger-mark.json"


class LedgerMark:
    """The log's record (:func:`ledger_digest`'s ``{bytes, sha256}``) kept as a run goes: each
    :meth:`update` reads on from where the last stopped, so a save costs the new lines only.
    A run killed before its first ``summary.json`` still leaves this record for
    :func:`check_intact` (written with Ray's state snapshot, ``.ray_state/ledger-mark.json``)."""

    def __init__(self) -> None:
        self._size = 0
        self._hash = hashlib.sha256()

    def update(self, path: Path) -> dict[str, Any]:
        try:
            with path.open("rb") as fh:
                fh.seek(self._size)
                data = fh.read()
        except FileNotFoundError:
            data = b""
        whole = data[: data.rfind(b"\n") + 1]  # a line being written is no part of the record yet
        self._hash.update(whole)
        self._size += len(whole)
        return {"bytes": self._size, "sha256": self._hash.hexdigest()}


def _json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def check_intact(directory: Path | str) -> dict[str, Any]:
    """Refuse a run whose ``ledger.jsonl`` no longer holds what was recorded of it: a log cut
    short, edited or swapped for another run's would re-derive fewer dollars and trials, and a
    resume would write those over the tables. The records: ``summary.json``'s (the log the
    tables were derived from) and the run's last saved state's (:class:`LedgerMark`, which a
    run killed before its first summary has too). The log only grows, so it must begin with
    each. Raises :class:`ConfigError` in one line; a summary without the record (older runs)
    is checked by its trial count. A record file that exists but cannot be read (garbage, or
    made unreadable) is refused unless another record checks the log; a log with no record at
    all (a run killed before its first save, or both files deleted) is read with a
    :class:`LedgerWarning` saying it could not be checked.
    Returns the summary as written (``{}`` where there is none or it cannot be read)."""
    from costtune.errors import ConfigError

    directory = Path(directory)
    path = directory / LEDGER_FILE
    written = _json_object(directory / "summary.json")
    files = {"summary.json": directory / "summary.json", MARK_FILE: directory / RAY_STATE_COPIES / MARK_FILE}
    records = [
        (f"the run's {where}", record)
        for where, record in (
            ("summary.json", written.get(DIGEST_KEY)),
            (
                f"last saved state ({RAY_STATE_COPIES}/{MARK_FILE})",
                _json_object(directory / RAY_STATE_COPIES / MARK_FILE),
            ),
        )
        if isinstance(record, dict)
        and isinstance(record.get("bytes"), int)
        and isinstance(record.get("sha256"), str)
    ]
    if records:
        data = path.read_bytes() if path.exists() else b""
        for who, record in records:
            want = int(record["bytes"])
            if len(data) >= want and hashlib.sha256(data[:want]).hexdigest() == record["sha256"]:
                continue
            what = f"holds {len(data):,} bytes" if len(data) < want else "differs"
            raise ConfigError(
                f"ledger: {path} {what} where {who} recorded its first {want:,} bytes: it was cut "
                "short, edited or replaced, and is left as it is"
                + (" (trials.csv still holds the trials the summary counted)" if written else "")
            )
    trials = written.get("trials")
    damaged = [
        name
        for name, file in files.items()
        if (file.exists() or file.is_symlink()) and not (_json_object(file) if name == MARK_FILE else written)
    ]
    has_lines = path.exists() and path.stat().st_size > 0
    if not records and has_lines and damaged:
        raise ConfigError(
            f"ledger: {path} cannot be checked: {' and '.join(damaged)} cannot be read, and nothing else "
            "recorded what the log held; it is left as it is"
        )
    if not records and has_lines and not isinstance(trials, int):
        warnings.warn(
            LedgerWarning(
                f"ledger: {path} could not be checked (no summary.json or saved mark records what it held)"
            ),
            stacklevel=2,
        )
    if not isinstance(written.get(DIGEST_KEY), dict) and isinstance(trials, int) and trials > 0:
        ids = {e["trial_id"] for e in _read_events(path)} if path.exists() else set()
        if len(ids) < trials:
            raise ConfigError(
                f"ledger: {path} names {len(ids)} trial(s) where the run's summary.json counted "
                f"{trials}: it was cut short or replaced, and is left as it is (trials.csv still holds "
                "the trials the summary counted)"
            )
    return written


def repair_tail(directory: Path | str) -> int:
    """Cut a torn last line (a writer killed mid-line) off ``ledger.jsonl`` before appending.

    Without this the next event would be glued to the fragment and lost with it. The cut
    bytes are kept aside in ``ledger.jsonl.corrupt``. Returns how many bytes were cut.
    """
    path = Path(directory) / LEDGER_FILE
    if not path.exists():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    with (path.parent / f"{LEDGER_FILE}.corrupt").open("ab") as fh:
        fh.write(data[keep:] + b"\n")
    with path.open("r+b") as fh:
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    warnings.warn(
        LedgerWarning(
            f"ledger: cut a torn last line ({len(data) - keep} bytes) off {path}; kept in {path.name}.corrupt"
        ),
        stacklevel=2,
    )
    return len(data) - keep


def _read_events(path: Path, counter: Ledger | None = None) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = None
            if not isinstance(event, dict) or "trial_id" not in event:
                # a torn line from a killed writer, or damage: the rest of the log still stands
                if counter is not None:
                    counter.unreadable_lines += 1
                continue
            yield event


def _json_number(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _cell(value: Any) -> Any:
    return value if isinstance(value, int | float | str | bool) or value is None else str(value)


def _count(values: Iterator[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out
