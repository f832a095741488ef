"""Load: a 1,000-trial sweep of a near-free trainable; the driver's peak memory and wall time.

One command: `.venv/bin/python benchmarks/load_1000.py [--trials 1000] [--epochs 3]`.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from costtune.config import parse_config
from costtune.sweep import run_sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    config = parse_config(
        {
            "name": "load",
            "trainable": {"name": "costtune.trainables.synthetic:curve"},
            "metric": "loss",
            "max_epochs": args.epochs,
            "num_samples": args.trials,
            "search_space": {"x": {"type": "uniform", "low": 0.0, "high": 1.0}},
            "searcher": {"type": "random"},
            "scheduler": {"type": "fifo"},
        }
    )
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = run_sweep(config, Path(tmp) / "run")
        wall = time.perf_counter() - started
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = result.summary
    print(
        f"{'trials':>7} {'ended':>6} {'epochs':>7} {'wall s':>8} {'s/trial':>8} {'driver peak MB':>15} {'before sweep MB':>16}"
    )
    ended = sum(s["stop_reasons"].values())
    print(
        f"{s['trials']:>7} {ended:>6} {s['epochs']:>7} {wall:>8.1f} {wall / s['trials']:>8.3f} {rss_peak:>15.0f} {rss_before:>16.0f}"
    )


if __name__ == "__main__":
    main()
