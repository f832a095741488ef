"""A run directory belongs to one sweep: created empty, locked while a sweep writes to it.

``fcntl.flock`` on ``RUN_DIR/.costtune.lock``, held by the driver for the whole sweep (or
resume): a second sweep or resume on the same directory gets one line and exit 2 instead of
mixing its books with the first. The lock dies with the process, so a killed sweep leaves no
stale lock behind.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from costtune.core.files import write_bytes_atomic
from costtune.errors import ConfigError

LOCK_FILE = ".costtune.lock"
#: files that make a directory a costtune run
RUN_MARKERS = ("ledger.jsonl", "config.yaml")
#: where a sweep records where its ``module:function`` trainable was found (written with the config)
SOURCE_FILE = "source.json"


def run_holding(path: Path) -> Path | None:
    """The costtune run directory that ``path`` is, or lies under (``None``: none): one with a
    ledger, or with the config and source record a sweep writes first (a ``config.yaml`` alone
    is any project's)."""
    ledger, config = RUN_MARKERS
    path = path.resolve()
    for directory in (path, *path.parents):
        if (directory / ledger).is_file() or (
            (directory / config).is_file() and (directory / SOURCE_FILE).is_file()
        ):
            return directory
    return None


def never_metered(directory: Path) -> bool:
    """A sweep that was stopped before any trial reported an epoch: its config was written but
    its ledger holds nothing, so there is nothing to continue and nothing to lose."""
    ledger = directory / "ledger.jsonl"
    return (directory / "config.yaml").is_file() and (not ledger.exists() or ledger.stat().st_size == 0)


def _never_metered_line(field: str, directory: Path) -> str:
    return (
        f"{field}: {directory} holds a sweep stopped before any trial reported an epoch (nothing was "
        "metered); start it again into a new directory, or delete this one"
    )


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
    outer = run_holding(directory.parent)
    if outer is not None:
        raise ConfigError(
            f"output: {directory} lies inside the costtune run {outer}; give a directory outside it"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"output: cannot create {directory}: {exc.strerror}") from None
    full = disk_full(directory)
    if full is not None:
        raise ConfigError(f"output: {full}; nothing was started")
    entries = [p.name for p in directory.iterdir()]
    if entries and LOCK_FILE not in entries and not any(name in RUN_MARKERS for name in entries):
        _refuse_foreign(directory, entries)  # before the lock file: nothing is left in the user's folder
    lock = _lock(directory, "output")
    entries = [p.name for p in directory.iterdir() if p.name != LOCK_FILE]
    if any(name in RUN_MARKERS for name in entries):
        lock.release()
        if never_metered(directory):
            raise ConfigError(_never_metered_line("output", directory))
        raise ConfigError(
            f"output: {directory} already holds a sweep; continue it with costtune sweep --resume "
            f"{directory} (in Python: costtune.resume_sweep)"
        )
    if entries:
        lock.release()
        _refuse_foreign(directory, entries)
    return lock


def _refuse_foreign(directory: Path, entries: list[str]) -> None:
    raise ConfigError(
        f"output: {directory} is not empty and holds no costtune run ({len(entries)} entries); "
        "choose a new directory"
    )


def claim_existing(directory: Path) -> RunLock:
    """Lock a run directory for a resume (refused while another sweep holds it)."""
    return _lock(directory, "--resume")


def refuse_unresumable(directory: Path) -> None:
    """The one line for a ``--resume`` of a directory that holds nothing to continue."""
    if never_metered(directory):
        raise ConfigError(_never_metered_line("--resume", directory))
    raise ConfigError(f"--resume: {directory} holds no resumable costtune sweep")


#: Ray Tune's experiment folder inside a run directory (``RunConfig(name=...)``)
EXPERIMENT_NAME = "ray"


@dataclass(frozen=True)
class Relocation:
    """Where a resume restores a run: the directory that was passed, which may be a copy or a
    move of the one the run's saved objects name."""

    run_dir: Path

    def of(self, path: Path, *, is_run_dir: bool = False) -> Path:
        """``path`` (a run directory, or a file directly in one) in this run."""
        return self.run_dir if is_run_dir else self.run_dir / path.name


#: the resume under way in this context (thread, task) (:func:`relocating`), ``None`` outside one
_ACTIVE: ContextVar[Relocation | None] = ContextVar("costtune_relocation", default=None)


@contextmanager
def relocating(directory: Path) -> Iterator[Relocation]:
    """While a resume unpickles a run's saved state, whatever pointed into the run directory
    it was saved in points into ``directory`` instead (:func:`relocated`).

    A run directory may have been copied or moved since: everything a resumed sweep writes
    must go to the directory that was passed, never back to the original. Tune restores the
    Tuner's callbacks, stoppers and scheduler as they were pickled, with the old absolute
    paths; costtune's objects ask :func:`relocated` on unpickling (and Ray's own storage is
    rebased by :func:`costtune.ray.private.storage_rebased`).
    """
    relocation = Relocation(directory)
    token = _ACTIVE.set(relocation)
    try:
        yield relocation
    finally:
        _ACTIVE.reset(token)


def relocated(path: Path, *, is_run_dir: bool = False) -> Path:
    """``path`` — a run directory, or a file directly in one — in the run being resumed
    (unchanged outside a resume)."""
    active = _ACTIVE.get()
    return path if active is None else active.of(path, is_run_dir=is_run_dir)


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


#: where a run keeps the last complete snapshot of Ray's experiment state
RAY_STATE_COPIES = ".ray_state"
_RAY_STATE_GLOB = "experiment_state-*.json"
_STATE_PREFIX = "experiment_state-"


def _complete_json(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
        json.loads(data)
    except (OSError, ValueError):
        return None
    return data


def _session(state: Path) -> str:
    """``2026-12-01_10-00-00`` of ``experiment_state-2026-12-01_10-00-00.json``."""
    return state.name[len(_STATE_PREFIX) : -len(".json")]


def _session_files(experiment: Path, session: str) -> dict[str, Path]:
    """What one of Tune's saves writes for ``session``: the experiment state, the searcher's
    (``search_gen_state-``, ``searcher-state-``, ``basic-variant-state-``) and the callbacks'
    states, each named ``<what>-<session>.<json|pkl>`` (``tmp-`` files are Tune's own half-writes)."""
    return {
        p.name: p
        for suffix in (".json", ".pkl")
        for p in experiment.glob(f"*-{session}{suffix}")
        if not p.name.startswith("tmp-")
    }


def _snapshot_path(run_dir: Path, session: str) -> Path:
    return run_dir / RAY_STATE_COPIES / f"snapshot-{session}.zip"


def _read_snapshot(path: Path) -> dict[str, bytes] | None:
    try:
        with zipfile.ZipFile(path) as archive:
            files = {name: archive.read(name) for name in archive.namelist()}
    except (OSError, zipfile.BadZipFile, KeyError, EOFError):
        return None
    if not all(_whole(data) for data in files.values()):  # taken mid-copy by an older costtune
        return None
    return files if any(name.startswith(_STATE_PREFIX) for name in files) else None


def _whole(data: bytes) -> bool:
    """Whether one of Tune's state files reads whole: JSON that parses, or a pickle (the
    searcher's and the search generator's states, whatever their suffix) that ends in its
    STOP opcode. A cheap check, not a proof: it catches the empty and the cut file."""
    try:
        json.loads(data)
    except ValueError:
        return data[:1] == b"\x80" and data.endswith(b".")  # PROTO ... STOP
    return True


def _file_whole(path: Path) -> bool:
    try:
        return _whole(path.read_bytes())
    except OSError:
        return False


def keep_ray_state(run_dir: Path, seen: dict[str, tuple[int, int]], source: Path | None = None) -> bool:
    """Snapshot Ray's experiment state after each of Tune's saves, whole and consistent.

    One save writes several files in turn: the experiment state, then the searcher's state
    and its count of trials created, into the driver's staging folder; a background thread
    then copies them into the run (each rewritten in place: open, truncate, write). A kill
    between or during those writes leaves a set that disagrees (a cut file; or a searcher
    that counts one trial more or fewer than the experiment holds, and a resume that ends
    with 5 trials or 7 instead of 6). Called after each step of Tune's loop, when the save
    has completed, this copies the whole set into one zip written atomically (temporary
    file, rename): what :func:`repair_ray_state` puts back.

    ``source`` is where the set is read: the driver's staging folder, which the driver's own
    thread wrote (the run's copy may be mid-copy at that moment); the run's ``ray/`` folder
    when not given. A set with a file that does not read whole is not snapshotted. Returns
    whether a snapshot was written.
    """
    experiment = source if source is not None else run_dir / EXPERIMENT_NAME
    wrote = False
    for state in experiment.glob(_RAY_STATE_GLOB):
        try:
            stat = state.stat()
        except OSError:
            continue
        key = (stat.st_mtime_ns, stat.st_size)  # every save rewrites it first: one stat per step
        if seen.get(state.name) == key:
            continue
        try:
            files = {
                name: path.read_bytes()
                for name, path in sorted(_session_files(experiment, _session(state)).items())
            }
        except OSError:
            continue
        if not all(_whole(data) for data in files.values()):
            continue  # mid-write or mid-copy: the next step sees the set whole
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, data in files.items():
                archive.writestr(name, data)
        seen[state.name] = key
        write_bytes_atomic(_snapshot_path(run_dir, _session(state)), buffer.getvalue())
        wrote = True
    return wrote


def repair_ray_state(run_dir: Path) -> str | None:
    """Before a resume: make Ray's newest experiment state whole and consistent again.

    If the files of Tune's newest save differ from the last snapshot (:func:`keep_ray_state`)
    the kill landed inside a save: the snapshot is put back, all files together. Returns a
    one-line note of what was repaired (``None``: nothing to repair). A cut file with no
    snapshot is set aside (``.corrupt``) when an older state file can stand in; with none,
    the resume is refused in one line (Tune would restart the whole sweep).
    """
    experiment = run_dir / EXPERIMENT_NAME
    states = sorted(experiment.glob(_RAY_STATE_GLOB))
    if not states:
        return None
    newest = states[-1]
    state_whole = _complete_json(newest) is not None
    # the experiment state, or another file of its save (the searcher's state, say)
    session = sorted(_session_files(experiment, _session(newest)).values())
    cut = newest if not state_whole else next((p for p in session if not _file_whole(p)), None)
    whole = cut is None
    snapshot = _read_snapshot(_snapshot_path(run_dir, _session(newest)))
    never_snapshotted = not _snapshot_path(run_dir, _session(newest)).exists()  # not: unreadable
    if never_snapshotted and any(_read_snapshot(_snapshot_path(run_dir, _session(p))) for p in states[:-1]):
        # a resumed session killed inside its first save: back to the session before it
        for path in _session_files(experiment, _session(newest)).values():
            os.replace(path, path.with_name(path.name + ".unsaved"))
        repair_ray_state(run_dir)
        return (
            f"Ray's run state {newest.name} was caught in its first save by the interruption; "
            f"resuming from {states[-2].name}"
        )
    if snapshot is None:  # a run from before snapshots: a copy of the state file alone
        copy = _complete_json(run_dir / RAY_STATE_COPIES / newest.name)
        snapshot = {newest.name: copy} if copy is not None and not state_whole else None
    if snapshot is not None:
        live = {
            name: path.read_bytes() for name, path in _session_files(experiment, _session(newest)).items()
        }
        if whole and all(live.get(name) == data for name, data in snapshot.items()):
            return None
        for name, data in snapshot.items():
            write_bytes_atomic(experiment / name, data)
        if cut is not None and cut.name not in snapshot:  # nothing to put back: not loaded cut
            os.replace(cut, cut.with_name(cut.name + ".corrupt"))
        if cut is not None:
            return (
                f"Ray's run state {cut.name} was cut off by the interruption; put back its last complete copy"
            )
        return (
            f"Ray's run state {newest.name} was caught mid-save by the interruption; "
            "put back its last complete snapshot"
        )
    if whole:
        return None
    assert cut is not None
    older = [
        p for p in states[:-1] if all(map(_file_whole, _session_files(experiment, _session(p)).values()))
    ]
    if older:
        # the whole session is set aside: Tune loads the searcher's newest state by name
        for path in _session_files(experiment, _session(newest)).values():
            os.replace(path, path.with_name(path.name + ".corrupt"))
        return f"Ray's run state {cut.name} was cut off by the interruption; resuming from {older[-1].name}"
    raise ConfigError(
        f"--resume: Ray's run state {cut} was cut off by the interruption and no complete copy exists; "
        "the ledger and tables are intact (costtune report works), but the sweep cannot continue"
    )


def tune_known_trials(run_dir: Path) -> set[str] | None:
    """The trial ids held by Tune's newest experiment state (what a restore will see), or
    ``None`` when it cannot be read (then nothing is adjusted)."""
    states = sorted((run_dir / EXPERIMENT_NAME).glob(_RAY_STATE_GLOB))
    data = _complete_json(states[-1]) if states else None
    if data is None:
        return None
    try:
        trials = json.loads(data)["trial_data"]
        return {str(json.loads(state)["trial_id"]) for state, _ in trials}
    except (KeyError, TypeError, ValueError):
        return None
