"""Record real learning curves of costtune's own trainable on the bundled digits data.

One family of PROTOCOL v4 (``../shared/benchmarks/PROTOCOL.md``): pools of configurations
drawn at random from a search space, each trained to the last epoch with the built-in AMP
trainable (``costtune.trainables.amp.run_training``, no Ray), on one CPU thread, with every
epoch's validation loss and measured seconds written as a recorded-curves table
(``../shared/DESIGN.md``; gzipped CSV). ``costtune replay POOL.csv.gz`` replays one.

    .venv/bin/python benchmarks/record_curves.py --pool mlp-adamw --configs 256 --epochs 50 \\
        --out benchmarks/pools/digits-mlp-adamw.csv.gz

The pools (``--pool``) differ in model family and optimiser, so their curves differ in kind:
``mlp-adamw`` (an MLP trained with AdamW), ``mlp-sgd`` (the same with SGD and momentum:
slower, more learning-rate-sensitive curves), ``cancer-mlp-adamw`` (an MLP on the bundled
breast-cancer data: two classes, 455 training samples, noisy validation losses) and
``cnn-adamw`` (a small CNN; about 10× the seconds per epoch). Each
configuration's seed is its index, so a pool is the same every time except for its seconds.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

POOLS: dict[str, dict[str, Any]] = {
    "mlp-adamw": {
        "fixed": {"model": "mlp", "optimizer": "adamw"},
        "space": {
            "lr": ("loguniform", 1e-4, 3e-1),
            "weight_decay": ("loguniform", 1e-6, 1e-1),
            "width": ("choice", [16, 32, 64, 128, 256]),
            "depth": ("int", 1, 3),
            "dropout": ("uniform", 0.0, 0.6),
            "batch_size": ("choice", [32, 64, 128, 256]),
        },
    },
    "mlp-sgd": {
        "fixed": {"model": "mlp", "optimizer": "sgd"},
        "space": {
            "lr": ("loguniform", 1e-4, 1.0),
            "momentum": ("uniform", 0.0, 0.99),
            "weight_decay": ("loguniform", 1e-6, 1e-1),
            "width": ("choice", [16, 32, 64, 128]),
            "depth": ("int", 1, 3),
            "dropout": ("uniform", 0.0, 0.5),
            "batch_size": ("choice", [64, 128, 256, 512]),
        },
    },
    "cancer-mlp-adamw": {
        "fixed": {"model": "mlp", "optimizer": "adamw", "dataset": "breast_cancer"},
        "space": {
            "lr": ("loguniform", 1e-5, 1e-1),
            "weight_decay": ("loguniform", 1e-6, 1e-1),
            "width": ("choice", [8, 16, 32, 64, 128]),
            "depth": ("int", 1, 3),
            "dropout": ("uniform", 0.0, 0.7),
            "batch_size": ("choice", [16, 32, 64, 128]),
        },
    },
    "cnn-adamw": {
        "fixed": {"model": "cnn", "optimizer": "adamw"},
        "space": {
            "lr": ("loguniform", 1e-4, 3e-2),
            "weight_decay": ("loguniform", 1e-6, 1e-1),
            "width": ("choice", [8, 16, 32]),
            "depth": ("int", 1, 2),
            "dropout": ("uniform", 0.0, 0.5),
            "batch_size": ("choice", [64, 128, 256]),
        },
    },
}


def sample(space: dict[str, tuple], rng: np.random.Generator) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (kind, *args) in space.items():
        if kind == "loguniform":
            out[name] = float(math.exp(rng.uniform(math.log(args[0]), math.log(args[1]))))
        elif kind == "uniform":
            out[name] = float(rng.uniform(args[0], args[1]))
        elif kind == "int":
            out[name] = int(rng.integers(args[0], args[1] + 1))
        else:
            out[name] = args[0][int(rng.integers(len(args[0])))]
    return out


def _writer(writer: Any, pool: str, i: int, hp: dict[str, Any], names: list[str]) -> Any:
    """The report function of configuration ``i``: one row per epoch, its measured seconds."""
    last = [time.perf_counter()]

    def report(metrics: dict[str, float], state: dict[str, Any]) -> None:
        now = time.perf_counter()
        loss = metrics["val_loss"]
        row = [f"{pool}-{i:04d}", *(hp[n] for n in names), int(metrics["epoch"])]
        row += [loss if math.isfinite(loss) else "nan", metrics["val_accuracy"], f"{now - last[0]:.5f}", 1]
        writer.writerow(row)
        last[0] = now

    return report


def record(pool: str, configs: int, epochs: int, out: Path, seed: int = 0) -> None:
    from costtune.trainables.amp import run_training

    torch.set_num_threads(1)
    spec = POOLS[pool]
    rng = np.random.default_rng([seed, sum(map(ord, pool))])
    out.parent.mkdir(parents=True, exist_ok=True)
    names = list(spec["space"])
    partial = out.with_suffix(out.suffix + ".partial")
    # one untimed epoch first: the data's loading and torch's first calls are not an epoch's cost
    run_training({**spec["fixed"], "max_epochs": 1}, lambda m, s: None, device=torch.device("cpu"))
    started = time.perf_counter()
    with gzip.open(partial, "wt", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "config_id",
                *(f"hp.{n}" for n in names),
                "epoch",
                "val_loss",
                "val_accuracy",
                "epoch_seconds",
                "devices",
            ]
        )
        for i in range(configs):
            hp = sample(spec["space"], rng)
            config = {**spec["fixed"], **hp, "max_epochs": epochs, "seed": i, "precision": "fp32"}
            report = _writer(writer, pool, i, hp, names)
            run_training(config, report, device=torch.device("cpu"))
            if (i + 1) % 16 == 0:
                print(
                    f"{pool}: {i + 1}/{configs} configurations, {time.perf_counter() - started:.0f} s",
                    flush=True,
                )
    partial.rename(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", choices=sorted(POOLS), required=True)
    parser.add_argument("--configs", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    record(args.pool, args.configs, args.epochs, args.out, args.seed)


if __name__ == "__main__":
    main()
