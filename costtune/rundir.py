"""A run directory belongs to one sweep: created empty, locked while a sweep writes to it.

``fcntl.flock`` on ``RUN_DIR/.costtune.lock``, held by the driver for the whole sweep (or
resume): a second sweep or resume on the same directory gets one line and exit 2 instead of
mixing its books with the first. The lock dies with the process, so a killed sweep leaves no
stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

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
