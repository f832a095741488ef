"""Recorded learning curves (../shared/DESIGN.md): one row per (configuration, epoch).

Columns: ``config_id``, ``hp.<name>`` per hyperparameter, ``epoch`` (1, 2, …),
``val_loss`` (other metrics may follow), ``epoch_seconds`` (wall seconds of that epoch on
the recorded hardware), ``devices`` (accelerators the configuration held).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from costtune.errors import ConfigError

REQUIRED = ("config_id", "epoch", "val_loss", "epoch_seconds", "devices")


@dataclass(frozen=True)
class Curve:
    config_id: str
    hyperparameters: dict[str, Any]
    val_loss: np.ndarray
    epoch_seconds: np.ndarray
    devices: float
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def epochs(self) -> int:
        return len(self.val_loss)

    def seconds_until(self, epoch: int) -> float:
        return float(self.epoch_seconds[:epoch].sum())


def read_table(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"curves: no such file: {path}")
    try:
        return pd.read_parquet(path) if path.suffix in (".parquet", ".pq") else pd.read_csv(path)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"curves: cannot read {path}: {exc}") from None


def curves_from_frame(frame: pd.DataFrame) -> dict[str, Curve]:
    """Validate a curves table and split it into one :class:`Curve` per configuration."""
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ConfigError(f"curves: missing column {missing[0]!r} (need {', '.join(REQUIRED)})")
    for column in ("epoch", "val_loss", "epoch_seconds", "devices"):
        numbers = pd.to_numeric(frame[column], errors="coerce")
        bad = numbers.isna() & frame[column].notna()
        if column != "val_loss":  # a loss may be NaN (a diverged epoch); the rest may not
            bad |= frame[column].isna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise ConfigError(
                f"curves: {column!r} must be a number in every row; data row {row + 1} is not "
                "(value not shown)"
            )
        frame = frame.assign(**{column: numbers})
    hp = [c for c in frame.columns if c.startswith("hp.")]
    metrics = [c for c in frame.columns if c not in (*REQUIRED, *hp)]
    out: dict[str, Curve] = {}
    for config_id, rows in frame.groupby("config_id", sort=False):
        rows = rows.sort_values("epoch")
        epochs = rows["epoch"].to_numpy()
        if not np.array_equal(epochs, np.arange(1, len(rows) + 1)):
            raise ConfigError(f"curves: config_id {config_id!r}: epochs must run 1, 2, … without gaps")
        seconds = rows["epoch_seconds"].to_numpy(dtype=float)
        if (seconds < 0).any() or not np.isfinite(seconds).all():
            raise ConfigError(f"curves: config_id {config_id!r}: epoch_seconds must be finite and >= 0")
        first = rows.iloc[0]
        out[str(config_id)] = Curve(
            config_id=str(config_id),
            hyperparameters={c[3:]: _plain(first[c]) for c in hp},
            val_loss=rows["val_loss"].to_numpy(dtype=float),
            epoch_seconds=seconds,
            devices=float(first["devices"]),
            extra={
                m: rows[m].to_numpy(dtype=float) for m in metrics if pd.api.types.is_numeric_dtype(rows[m])
            },
        )
    if not out:
        raise ConfigError("curves: the table has no rows")
    return out


@lru_cache(maxsize=8)
def load_curves(path: str) -> dict[str, Curve]:
    """Curves of a CSV/Parquet file (cached per process: every replayed trial reads it)."""
    return curves_from_frame(read_table(path))


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
