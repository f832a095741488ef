"""How close is `costtune estimate --calibrate` to what a sweep then really costs?

One command: `.venv/bin/python benchmarks/estimate_vs_metered.py [CONFIG] [--repeats N]`.
For each repeat: calibrate on this machine, estimate, run the sweep, and print estimate
and metered cost side by side (same machine, same minute, so the ratio is what matters).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from costtune.calibrate import calibrate_epoch_seconds
from costtune.core.config import load_config
from costtune.core.estimate import estimate
from costtune.sweep import run_sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="experiments/digits.yaml")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--calibrate-trials", type=int, default=4)
    args = parser.parse_args()
    config = load_config(args.config)
    rows = []
    for repeat in range(args.repeats):
        measured = calibrate_epoch_seconds(config, trials=args.calibrate_trials)
        est = estimate(
            config,
            measured.mean_seconds,
            worst_epoch_seconds=measured.max_seconds,
            startup_seconds=measured.startup_seconds,
        )
        with tempfile.TemporaryDirectory() as tmp:
            result = run_sweep(config, Path(tmp) / "run", seed=config.seed + repeat)
        metered = result.summary["total_cost_usd"]
        rows.append((repeat, est, result.summary, metered))
    print(
        f"\n{'seed':>4} {'epochs est/run':>15} {'expected $':>11} {'metered $':>11} {'worst $':>11} "
        f"{'expected/metered':>17} {'worst/metered':>14}"
    )
    for repeat, est, summary, metered in rows:
        print(
            f"{config.seed + repeat:>4} {est.expected_epochs:>7.0f}/{summary['epochs']:<7} "
            f"{est.expected_cost_usd:>11.3g} {metered:>11.3g} {est.worst_cost_usd:>11.3g} "
            f"{est.expected_cost_usd / metered:>17.2f} {est.worst_cost_usd / metered:>14.2f}"
        )


if __name__ == "__main__":
    main()
