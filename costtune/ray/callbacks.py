"""Ray Tune callbacks that meter trials into the costtune :class:`~costtune.core.ledger.Ledger`."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ray.tune import Callback

from costtune.core.config import param_value
from costtune.core.cost import device_hours, is_gpu
from costtune.core.files import write_json_atomic
from costtune.core.ledger import (
    COST_FIELDS,
    LEDGER_FILE,
    MARK_FILE,
    RAY_RESULT_FIELDS,
    Ledger,
    LedgerMark,
    LedgerWriteError,
)
from costtune.core.policy import StopReason
from costtune.core.rundir import RAY_STATE_COPIES, disk_full, keep_ray_state, relocated
from costtune.ray.placement import actor_lifetime, actor_of, trial_devices
from costtune.ray.private import forget_missing_checkpoints

_log = logging.getLogger("costtune")

#: what a result carries besides the trainable's own metrics (the cost fields are this callback's)
_NOT_METRICS = RAY_RESULT_FIELDS | COST_FIELDS


#: an actor's shutdown longer than this after its trial let go is not that trial's to pay
_MAX_SHUTDOWN_S = 60.0


class LedgerCallback(Callback):
    """Records every reported epoch and every trial end in the ledger.

    Args:
        ledger: where rows go.
        hyperparameters: config keys that are hyperparameters (the ledger's ``hp.*`` columns).
        stop_reason_of: asks the scheduler why a trial stopped; ``None`` means it ran its course.
        seconds_field: result field of metered seconds.
        tables_dir: where ``trials.csv`` / ``trials.parquet`` / ``summary.json`` are
            rewritten as trials end (at most every ``tables_every_s`` seconds) and at the end.
        charged: told ``(trial_id, epochs, dollars so far)`` whenever the ledger charges a
            trial between reports (work lost with a failed node, time held while hung), so
            that the sweep budget counts it at once, not at the trial's next report.

    With Ray's wall-clock time field (``time_total_s``), each stretch a trial holds its
    devices (from its actor's start to its end, a restart or a failure) is billed whole: Ray
    times only the epochs, so what it held but did not time (each report's hand-off to the
    driver, the first epoch's set-up, the shutdown) is charged when the stretch ends, as an
    ``unmetered`` charge. A replayed (custom) time field is simulated time: nothing is added.
    """

    def __init__(
        self,
        ledger: Ledger,
        hyperparameters: Iterable[str],
        stop_reason_of: Callable[[str], str | None] | None = None,
        seconds_field: str = "time_total_s",
        extra_seconds_of: Callable[[str], float] | None = None,
        tables_dir: Path | None = None,
        tables_every_s: float = 5.0,
        charged: Callable[[str, int, float], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.charged = charged
        self.hyperparameters = list(hyperparameters)
        self.stop_reason_of = stop_reason_of or (lambda _trial_id: None)
        self.extra_seconds_of = extra_seconds_of or (lambda _trial_id: 0.0)
        self.seconds_field = seconds_field
        self.tables_dir = tables_dir
        self.tables_every_s = tables_every_s
        self._last_tables = 0.0
        self._unpriced: set[str] = set()
        #: trial id → (wall time its devices were taken, its metered seconds then, its actor)
        self._held: dict[str, tuple[float, float, str | None]] = {}
        #: actor id → (the last trial on it, when that trial let go): its shutdown is that trial's
        self._actors: dict[str, tuple[str, float | None]] = {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Restored by Tuner.restore as it was pickled when the Tuner was built: re-read
        # the log, so that a resumed sweep continues the ledger instead of forgetting it.
        self.__dict__.update(state)
        self._held, self._actors = {}, {}  # what the process that pickled it held is not ours
        self.ledger = self.ledger.shared()  # the one the stopper meters from
        if self.tables_dir is not None:
            self.tables_dir = relocated(Path(self.tables_dir), is_run_dir=True)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # a trial paused (PBT, a rung) and started again: its last stretch ended when it
        # last reported (Tune tells no callback of a pause)
        self._release(trial.trial_id, self.ledger.last_report_time(trial.trial_id))
        record = self.ledger.trials.get(trial.trial_id)
        began = time.time()
        actor = actor_of(trial)
        if actor is not None:
            if actor not in self._actors:  # a new actor: its start-up was held for this trial
                started, _ = actor_lifetime(actor)
                began = min(began, started or began)
            self._actors[actor] = (trial.trial_id, None)
        self._held[trial.trial_id] = (began, record.seconds if record is not None else 0.0, actor)
        # placed (again, after a restart): the node it landed on decides its price, and
        # the stopper, which sees only the trial's id, learns it here before any result
        kind, _ = trial_devices(trial)
        model = self.ledger.spec.cost_model
        if not model.knows(kind) and kind not in self._unpriced:
            self._unpriced.add(kind)
            _log.warning(
                "trial %s runs on %s, which has no price in cost.prices: billed as %s at $%.2f per hour",
                trial.trial_id,
                kind,
                model.accelerator,
                model.usd_per_device_hour(kind),
            )

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        kind, devices = trial_devices(trial)
        metrics = {
            k: float(v)
            for k, v in result.items()
            if k not in _NOT_METRICS and isinstance(v, int | float) and not isinstance(v, bool)
        }
        record = self.ledger.record_result(
            trial.trial_id,
            epoch=int(result.get("training_iteration", 0)),
            seconds=float(result.get(self.seconds_field, 0.0)),
            metrics=metrics,
            config={k: param_value(trial.config, k) for k in self.hyperparameters},
            device_kind=kind,
            devices=devices,
            # Ray's per-epoch time survives restarts, pauses and PBT clones that reset or
            # jump the cumulative field; a custom (replayed) field is differenced instead
            increment_seconds=result.get("time_this_iter_s")
            if self.seconds_field == "time_total_s"
            else None,
        )
        # what the trial has cost so far, for every callback after this one (trackers, loggers)
        hours = device_hours(record.seconds, record.devices)
        result["cost_usd"] = self.ledger.cost_usd(record)
        result["device_hours"] = hours
        result["gpu_hours"] = hours if is_gpu(record.device_kind) else 0.0
        if self.stop_reason_of(trial.trial_id) == StopReason.RUNG_PRUNED.value:
            # a rung stopped it with this result (Tune has asked the scheduler already). Paused
            # at its checkpoint, it ends here in the books; if it makes the rung's cut once no
            # configuration is left, its next report opens it again.
            self._end(trial, "TERMINATED", StopReason.RUNG_PRUNED.value)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # The trial failed (its node or process died) and restarts from its last
        # checkpoint: the time since its last report was held and lost. Charge it once.
        self._charge_lost_work(trial)
        self._release(trial.trial_id, time.time())

    def _release(self, trial_id: str, until: float | None, hung_s: float = 0.0) -> None:
        """End a stretch the trial held its devices: charge what it held that was not
        metered (``hung_s`` is about to be charged by the trial's end)."""
        held = self._held.pop(trial_id, None)
        record = self.ledger.trials.get(trial_id)
        if held is None or until is None or record is None or self.seconds_field != "time_total_s":
            return
        since, metered_then, actor = held
        if self.ledger.charge_held(
            trial_id, held_s=until - since, charged_then=metered_then, pending_s=hung_s
        ):
            self._tell_charged(trial_id)
        if actor is not None and self._actors.get(actor, (None, None))[0] == trial_id:
            self._actors[actor] = (trial_id, until)  # its last trial let go: a shutdown may follow

    def _charge_shutdowns(self) -> None:
        """Each actor that has ended since its last trial let go: that trial held its devices
        until then (an actor kept for the next trial is that trial's, not charged here)."""
        for actor, (trial_id, let_go) in list(self._actors.items()):
            if let_go is None:
                continue
            _, ended = actor_lifetime(actor)
            if ended is None:
                continue
            del self._actors[actor]
            if 0 < ended - let_go < _MAX_SHUTDOWN_S:
                self.ledger.charge(trial_id, seconds=ended - let_go, why="shutdown")
                self._tell_charged(trial_id)

    def _charge_lost_work(self, trial: Any) -> None:
        last = self.ledger.last_report_time(trial.trial_id)
        if last is not None:
            self.ledger.charge(trial.trial_id, seconds=time.time() - last, why="lost_work")
            self._tell_charged(trial.trial_id)

    def _tell_charged(self, trial_id: str) -> None:
        record = self.ledger.trials.get(trial_id)
        if record is not None and self.charged is not None:
            self.charged(trial_id, record.epochs, self.ledger.cost_usd(record))

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        reason = self.stop_reason_of(trial.trial_id) or StopReason.COMPLETED.value
        self._end(trial, "TERMINATED", reason)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._charge_lost_work(trial)
        self._end(trial, "ERROR", StopReason.ERROR.value)
        # a trial that failed because the disk is full is the first of many: stop them all
        full = disk_full(self.tables_dir) if self.tables_dir is not None else None
        if full is not None:
            raise LedgerWriteError(f"{full}; the sweep stopped, every ledger line written before is kept")

    def _end(self, trial: Any, status: str, reason: str) -> None:
        record = self.ledger.trials.get(trial.trial_id)
        if record is not None and record.status != "RUNNING":
            return  # already ended in the log (a resumed sweep closing it again)
        hung_s = self.extra_seconds_of(trial.trial_id)
        # a trial paused at a rung and ended there let go of its devices when it last reported
        paused = getattr(trial, "status", None) == "PAUSED"
        self._release(
            trial.trial_id, self.ledger.last_report_time(trial.trial_id) if paused else time.time(), hung_s
        )
        self.ledger.end(
            trial.trial_id,
            status=status,
            stop_reason=reason,
            config={k: param_value(trial.config, k) for k in self.hyperparameters},
            extra_seconds=hung_s,
        )
        self._tell_charged(trial.trial_id)  # time held while hung, charged at the end
        now = time.monotonic()
        if self.tables_dir is not None and now - self._last_tables >= self.tables_every_s:
            self._write_tables()
            self._last_tables = now

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self._charge_shutdowns()
        self._write_tables()

    def _write_tables(self) -> None:
        if self.tables_dir is None:
            return
        # the tables are a view of the ledger, rebuilt at the end and by `costtune report`:
        # failing to refresh them (a full disk) must not end the sweep; the ledger decides
        with contextlib.suppress(OSError):
            self.ledger.write_tables(self.tables_dir)


class ForgetVanishedCheckpoints(Callback):
    """After a resume, forget the checkpoints Tune's restored state tracks but that are gone.

    Tune's experiment snapshot lags the run by a few seconds. A driver killed in between
    leaves a snapshot that lists checkpoints ``num_to_keep`` has since deleted (Tune would
    delete them again at the next checkpoint and print a ``FileNotFoundError`` traceback for
    each), or names as a trial's latest a checkpoint its worker never finished writing (the
    trial would fail with "Could not recover from checkpoint"). Once, at the first step after
    a restore, each trial's tracked checkpoints are cut to what exists on disk, and one whose
    latest is gone resumes from its newest existing checkpoint, or from the start.
    """

    def __init__(self) -> None:
        self._restored = False

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._restored = True

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if not self._restored:
            return
        self._restored = False
        for trial in trials:
            forget_missing_checkpoints(trial)


class KeepRayState(Callback):
    """Keeps a complete copy of Ray's experiment state beside the run (:func:`keep_ray_state`).

    Tune rewrites that file in place; a kill during the write cuts it, and a resume would
    then restart the sweep from nothing. After each step of Tune's loop, a state file that
    changed and reads whole is copied (a stat per step; a parse only when it changed). With
    each copy goes the ledger's record at that moment (:class:`~costtune.core.ledger.LedgerMark`):
    what a log cut short is checked against where no ``summary.json`` was written yet.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._seen: dict[str, tuple[int, int]] = {}
        self._mark = LedgerMark()

    def __getstate__(self) -> dict[str, Any]:
        return {"run_dir": self.run_dir}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.run_dir = relocated(state["run_dir"], is_run_dir=True)  # a copied or moved run
        self._seen = {}
        self._mark = LedgerMark()

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        with contextlib.suppress(OSError):  # a full disk must not end the sweep here
            if keep_ray_state(self.run_dir, self._seen, _driver_staging(trials)):
                mark = self._mark.update(self.run_dir / LEDGER_FILE)
                write_json_atomic(self.run_dir / RAY_STATE_COPIES / MARK_FILE, mark)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.on_step_end(0, trials)


def _driver_staging(trials: list) -> Path | None:
    """The driver's staging folder, where Tune's save writes its files before a background
    thread copies them into the run (``None``: no trial yet, or a Ray that names it otherwise;
    then the run's copy is read)."""
    try:
        return Path(trials[0].storage.experiment_driver_staging_path)
    except (IndexError, AttributeError, TypeError):
        return None


class MlflowCallback(Callback):
    """Ray Tune's side of :class:`costtune.ray.tracking.MlflowLive` (placed after the
    :class:`LedgerCallback`, whose cost fields it logs with every result)."""

    def __init__(self, live: Any) -> None:
        self.live = live

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        self.live.on_trial_result(trial, result)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.live.on_trial_end(trial, failed=False)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.live.on_trial_end(trial, failed=True)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.live.on_experiment_end(trials)
