"""Files that are never half-written: a temporary file in the same directory, then a rename."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_atomic(path: Path, write: Callable[[str], Any]) -> None:
    """``write(a temporary path in the same directory)``, then a rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Bytes to ``path`` via a temporary file and a rename: never half-written."""
    write_atomic(path, lambda p: Path(p).write_bytes(data))


def write_json_atomic(path: Path, data: Any) -> None:
    """JSON to ``path`` via a temporary file and a rename: never half-written."""
    write_atomic(path, lambda p: Path(p).write_text(json.dumps(data, default=json_default, allow_nan=False)))


def json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)
