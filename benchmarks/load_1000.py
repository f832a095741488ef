"""Load: a 1,000-trial sweep of a near-free trainable; the driver's peak memory and wall time.

One command: `.venv/bin/python benchmarks/load_1000.py [--trials 1000] [--epochs 3]`.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from costtune.core.config import parse_config
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
    ended = sum(s["stop_reasons"].values())
    head = ("trials", "ended", "epochs", "wall s", "s/trial", "driver peak MB", "before sweep MB")
    row = (
        s["trials"],
        ended,
        s["epochs"],
        f"{wall:.1f}",
        f"{wall / s['trials']:.3f}",
        f"{rss_peak:.0f}",
        f"{rss_before:.0f}",
    )
    print(" ".join(f"{h:>15}" for h in head))
    print(" ".join(f"{v!s:>15}" for v in row))


if __name__ == "__main__":
    main()
