"""Speed: `costtune report --html` on a run of 1,000 trials × 100 epochs (target ≤ 5 s).

The run is written through costtune's own Ledger (fsync switched off while writing it, which
only makes the set-up faster): 1,000 trials, each reporting 100 epochs of a noisy power-law
curve, four hyperparameters. Then, in one process each, timed:

- the whole command, ``costtune report RUN --html OUT`` (imports included), three times;
- its parts in this process: reading the run, building the report, rendering the page.

One command: `.venv/bin/python benchmarks/report_1000.py [--trials 1000] [--epochs 100]`.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from costtune.core.config import parse_config
from costtune.core.ledger import Ledger
from costtune.core.run import ledger_spec


def write_run(out: Path, trials: int, epochs: int, seed: int = 0) -> None:
    config = parse_config(
        {
            "name": "report-1000",
            "trainable": {"name": "costtune.trainables.synthetic:curve"},
            "metric": "loss",
            "max_epochs": epochs,
            "num_samples": trials,
            "search_space": {
                "lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1},
                "width": {"type": "choice", "values": [64, 128, 256, 512]},
                "dropout": {"type": "uniform", "low": 0.0, "high": 0.5},
                "depth": {"type": "int", "low": 1, "high": 4},
            },
            "searcher": {"type": "random"},
            "scheduler": {"type": "fifo"},
        }
    )
    out.mkdir(parents=True)
    (out / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    rng = random.Random(seed)
    fsync, os.fsync = os.fsync, lambda fd: None  # type: ignore[assignment]
    try:
        ledger = Ledger(ledger_spec(config), out)
        for t in range(trials):
            cfg = {
                "lr": 10 ** rng.uniform(-4, -1),
                "width": rng.choice([64, 128, 256, 512]),
                "dropout": rng.uniform(0, 0.5),
                "depth": rng.randint(1, 4),
            }
            floor = 0.05 + abs(math.log10(cfg["lr"]) + 2.5) * 0.1 + cfg["dropout"] * 0.2
            seconds = 0.0
            for epoch in range(1, epochs + 1):
                seconds += rng.uniform(0.8, 1.2) * cfg["width"] / 128
                loss = floor + 2.0 * epoch**-0.7 + rng.gauss(0, 0.01)
                ledger.record_result(
                    f"{t:05d}", epoch=epoch, seconds=seconds, metrics={"loss": loss}, config=cfg
                )
            ledger.end(f"{t:05d}", status="TERMINATED", stop_reason="completed")
        ledger.write_tables(out)  # as a finished sweep leaves it: the tables record the log they read
    finally:
        os.fsync = fsync  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from costtune.core.run import load_run
    from costtune.report import html as hp
    from costtune.report import text as rp

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        write_run(run_dir, args.trials, args.epochs)
        page = Path(tmp) / "report.html"
        command = [sys.executable, "-m", "costtune.cli", "report", str(run_dir), "--html", str(page)]
        walls = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            walls.append(time.perf_counter() - started)
        size_mb = page.stat().st_size / 1e6
        started = time.perf_counter()
        run = load_run(run_dir)
        read = time.perf_counter() - started
        started = time.perf_counter()
        built = rp.build_report(run)
        build = time.perf_counter() - started
        started = time.perf_counter()
        hp.report_html(built)
        render = time.perf_counter() - started
    head = ("trials", "epochs", "command s (median)", "runs", "read s", "build s", "html s", "page MB")
    row = (
        args.trials,
        args.epochs,
        f"{statistics.median(walls):.2f}",
        " ".join(f"{w:.2f}" for w in walls),
        f"{read:.2f}",
        f"{build:.2f}",
        f"{render:.2f}",
        f"{size_mb:.1f}",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    print("| " + " | ".join(str(v) for v in row) + " |")


if __name__ == "__main__":
    main()
