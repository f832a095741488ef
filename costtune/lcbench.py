"""LCBench learning curves through the YAHPO Gym surrogate (onnxruntime, CPU).

The data directory (``model.onnx``, ``encoding.json``, ``config_space.json``) is never
copied into a project: pass it (``data_dir``) or set ``COSTTUNE_LCBENCH_DIR``. Curves come
back in the recorded-curves format (:mod:`costtune.core.curves`) with ``val_loss`` = validation
cross-entropy and per-epoch ``epoch_seconds`` = first difference of the running maximum of
the surrogate's cumulative ``time`` (clipped at 0), one device per configuration
(../shared/benchmarks/PROTOCOL.md).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from costtune.errors import ConfigError

ENV_VAR = "COSTTUNE_LCBENCH_DIR"
FILES = ("model.onnx", "encoding.json", "config_space.json")
#: the surrogate's continuous inputs, in its order (epoch first)
PARAMS = ("batch_size", "learning_rate", "momentum", "weight_decay", "num_layers", "max_units", "max_dropout")
EPOCHS = 52


class LCBench:
    def __init__(self, data_dir: str | Path | None = None) -> None:
        chosen = data_dir or os.environ.get(ENV_VAR)
        if not chosen:
            raise ConfigError(f"lcbench: no data directory; pass --data-dir or set {ENV_VAR}")
        self.data_dir = Path(chosen)
        missing = [f for f in FILES if not (self.data_dir / f).is_file()]
        if missing:
            raise ConfigError(
                f"lcbench: {self.data_dir} is not the LCBench surrogate directory (no {missing[0]})"
            )
        try:
            import onnxruntime
        except ImportError:
            raise ConfigError("lcbench: onnxruntime is not installed (pip install onnxruntime)") from None
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            str(self.data_dir / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self._codes: dict[str, int] = json.loads((self.data_dir / "encoding.json").read_text())[
            "OpenML_task_id"
        ]
        space = json.loads((self.data_dir / "config_space.json").read_text())
        self.tasks: list[str] = next(
            h["choices"] for h in space["hyperparameters"] if h["name"] == "OpenML_task_id"
        )

    def curves(self, task: str, configs: Sequence[Mapping[str, Any]], epochs: int = EPOCHS) -> pd.DataFrame:
        """Learning curves of ``configs`` on ``task`` as a recorded-curves table."""
        task = str(task)
        if task not in self.tasks:
            raise ConfigError(f"lcbench: unknown task {task!r}; choose one of {', '.join(self.tasks)}")
        n = len(configs)
        epoch_col = np.tile(np.arange(1, epochs + 1, dtype=np.float32), n)
        x_cont = np.empty((n * epochs, 8), dtype=np.float32)
        x_cont[:, 0] = epoch_col
        for j, name in enumerate(PARAMS, start=1):
            x_cont[:, j] = np.repeat(np.array([float(c[name]) for c in configs], dtype=np.float32), epochs)
        x_cat = np.full((n * epochs, 1), self._codes[task], dtype=np.int32)
        out = self._session.run(None, {"x_cat": x_cat, "x_cont": x_cont})[0].reshape(n, epochs, 6)
        cumulative = np.maximum.accumulate(out[:, :, 0], axis=1)
        epoch_seconds = np.clip(np.diff(cumulative, axis=1, prepend=0.0), 0.0, None)
        rows = {
            "config_id": np.repeat([f"{task}-{i}" for i in range(n)], epochs),
            **{f"hp.{name}": np.repeat([c[name] for c in configs], epochs) for name in PARAMS},
            "epoch": epoch_col.astype(int),
            "val_loss": out[:, :, 2].ravel(),
            "val_accuracy": out[:, :, 1].ravel() / 100.0,
            "epoch_seconds": epoch_seconds.ravel(),
            "devices": 1.0,
        }
        return pd.DataFrame(rows)


def reference_grid() -> list[dict[str, float]]:
    """The protocol's 64-job grid: lr × weight decay × layers, the rest fixed."""
    return [
        {
            "batch_size": 128,
            "learning_rate": lr,
            "momentum": 0.9,
            "weight_decay": wd,
            "num_layers": layers,
            "max_units": 256,
            "max_dropout": 0.2,
        }
        for lr in (1e-4, 1e-3, 1e-2, 1e-1)
        for wd in (1e-5, 1e-4, 1e-3, 1e-2)
        for layers in (1, 2, 3, 4)
    ]


def random_configs(n: int, seed: int = 0) -> list[dict[str, float]]:
    """``n`` configurations drawn from the protocol's search space, parameters in its order
    (weight decay log-uniform)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        out.append(
            {
                "batch_size": round(math.exp(rng.uniform(math.log(16), math.log(512)))),
                "learning_rate": math.exp(rng.uniform(math.log(1e-4), math.log(1e-1))),
                "momentum": rng.uniform(0.1, 0.99),
                "weight_decay": math.exp(rng.uniform(math.log(1e-5), math.log(1e-1))),
                "num_layers": int(rng.integers(1, 6)),
                "max_units": round(math.exp(rng.uniform(math.log(64), math.log(1024)))),
                "max_dropout": rng.uniform(0.0, 1.0),
            }
        )
    return out
