"""A run directory belongs to one sweep: created empty, locked while a sweep writes to it.

``fcntl.flock`` on ``RUN_DIR/.costtune.lock``, held by the driver for the whole sweep (or
resume): a second sweep or resume on the same directory gets one line and exit 2 instead of
mixing its books with the first. The lock dies with the process, so a killed sweep leaves no
stale lock behind.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from costtune.errors import ConfigError

LOCK_FILE = ".costtune.lock"
#: files that make a directory a costtune run
RUN_MARKERS = ("ledger.jsonl", "config.yaml")


class RunLock:
    """The exclusive lock on a run directory (release it, or let the process end)."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def _lock(directory: Path, field: str) -> RunLock:
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ConfigError(f"{field}: cannot write to {directory}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(f"{field}: {directory} is in use by another costtune sweep") from None
    return RunLock(directory, fd)


def claim_new(directory: Path) -> RunLock:
    """Create ``directory`` (or take an empty one) for a new sweep and lock it.

    Refuses, with one line naming ``output``: a file, a place that cannot be created or
    written, a directory in use by another sweep, one that already holds a sweep, and a
    non-empty directory that is not a costtune run (it would be overwritten).
    """
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"output: {directory} is a file, not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"output: cannot create {directory}: {exc.strerror}") from None
    full = disk_full(directory)
    if full is not None:
        raise ConfigError(f"output: {full}; nothing was started")
    lock = _lock(directory, "output")
    entries = [p.name for p in directory.iterdir() if p.name != LOCK_FILE]
    if any(name in RUN_MARKERS for name in entries):
        lock.release()
        raise ConfigError(
            f"output: {directory} already holds a sweep; continue it with costtune sweep --resume {directory}"
        )
    if entries:
        lock.release()
        raise ConfigError(
            f"output: {directory} is not empty and holds no costtune run ({len(entries)} entries); "
            "choose a new directory"
        )
    return lock


def claim_existing(directory: Path) -> RunLock:
    """Lock a run directory for a resume (refused while another sweep holds it)."""
    return _lock(directory, "--resume")


#: the run directory a resume is restoring into, while it restores (see :func:`resuming`)
_resume_dir: Path | None = None
#: Ray Tune's experiment folder inside a run directory (``RunConfig(name=...)``)
EXPERIMENT_NAME = "ray"


@contextmanager
def resuming(directory: Path) -> Iterator[None]:
    """While a resume unpickles a run's saved state, whatever pointed into the run directory
    it was saved in points into ``directory`` instead.

    A run directory may have been copied or moved since: everything a resumed sweep writes
    must go to the directory that was passed, never back to the original. Tune restores the
    Tuner's callbacks, stoppers and scheduler as they were pickled (with the old absolute
    paths), and its search generator's saved experiment with the old storage path (new trials
    would write their checkpoints into the original run). costtune's objects ask
    :func:`relocated` on unpickling; Ray's ``StorageContext`` is rebased here.
    """
    from ray.train._internal.storage import StorageContext

    global _resume_dir
    previous = _resume_dir
    had_own = "__setstate__" in StorageContext.__dict__
    _resume_dir = directory
    StorageContext.__setstate__ = _rebased_storage_state
    try:
        yield
    finally:
        _resume_dir = previous
        if not had_own:
            del StorageContext.__setstate__


def relocated(path: Path, *, is_run_dir: bool = False) -> Path:
    """``path`` — a run directory, or a file directly in one — in the run being resumed."""
    if _resume_dir is None:
        return path
    return _resume_dir if is_run_dir else _resume_dir / path.name


def _rebased_storage_state(self: Any, state: dict[str, Any]) -> None:
    self.__dict__.update(state)
    # the experiment's own context (new trials copy it); a trial's context is left to Tune,
    # which moves it and its tracked checkpoints together (Trial.set_storage)
    if (
        _resume_dir is not None
        and state.get("experiment_dir_name") == EXPERIMENT_NAME
        and state.get("trial_dir_name") is None
    ):
        self.storage_fs_path = _resume_dir.as_posix()


#: free bytes below which a run directory's disk counts as full (a ledger line, a checkpoint)
DISK_RESERVE_BYTES = 64 << 10


def disk_full(directory: Path, reserve: int = DISK_RESERVE_BYTES) -> str | None:
    """One line if the filesystem holding ``directory`` has under ``reserve`` bytes free."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return None
    free = stat.f_bavail * stat.f_frsize
    if free >= reserve:
        return None
    return f"disk full: the filesystem holding {directory} has {free} bytes free"


#: where a run keeps the last complete copy of each of Ray's experiment-state files
RAY_STATE_COPIES = ".ray_state"
_RAY_STATE_GLOB = "experiment_state-*.json"


def _complete_json(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
        json.loads(data)
    except (OSError, ValueError):
        return None
    return data


def keep_ray_state(run_dir: Path, seen: dict[str, tuple[int, int]]) -> None:
    """Copy each of Ray's experiment-state files that changed since ``seen`` and is complete.

    Tune rewrites its experiment state in place (open, truncate, write): a driver killed
    during the write leaves an empty or cut file, and Tune then silently restarts the
    experiment on resume. The copy (written to a temporary file, then renamed) is what
    :func:`repair_ray_state` puts back.
    """
    from costtune.ledger import write_bytes_atomic

    experiment = run_dir / EXPERIMENT_NAME
    for path in experiment.glob(_RAY_STATE_GLOB):
        try:
            stat = path.stat()
        except OSError:
            continue
        key = (stat.st_mtime_ns, stat.st_size)
        if seen.get(path.name) == key:
            continue
        data = _complete_json(path)
        if data is None:
            continue  # mid-write: the next step sees it whole
        seen[path.name] = key
        write_bytes_atomic(run_dir / RAY_STATE_COPIES / path.name, data)


def repair_ray_state(run_dir: Path) -> str | None:
    """Before a resume: put back Ray's newest experiment state if a kill cut it off.

    Returns a one-line note of what was repaired (``None``: nothing to repair). A cut file
    with no complete copy is set aside (``.corrupt``) when an older state file can stand in;
    with none, the resume is refused in one line (Tune would restart the whole sweep).
    """
    from costtune.ledger import write_bytes_atomic

    experiment = run_dir / EXPERIMENT_NAME
    states = sorted(experiment.glob(_RAY_STATE_GLOB))
    if not states or _complete_json(states[-1]) is not None:
        return None
    newest = states[-1]
    copy = _complete_json(run_dir / RAY_STATE_COPIES / newest.name)
    if copy is not None:
        write_bytes_atomic(newest, copy)
        return (
            f"Ray's run state {newest.name} was cut off by the interruption; put back its last complete copy"
        )
    older = [p for p in states[:-1] if _complete_json(p) is not None]
    if older:
        os.replace(newest, newest.with_name(newest.name + ".corrupt"))
        return (
            f"Ray's run state {newest.name} was cut off by the interruption; resuming from {older[-1].name}"
        )
    raise ConfigError(
        f"--resume: Ray's run state {newest} was cut off by the interruption and no complete copy exists; "
        "the ledger and tables are intact (costtune report works), but the sweep cannot continue"
    )
