"""The reference story, measured: the marginal-ROI stopper against running every trial to the end.

One command: `.venv/bin/python benchmarks/stopper_vs_full.py [CONFIG]` (default
experiments/digits_long.yaml). Runs the config twice, side by side on this machine with the
same seed and so the same configurations (random search): once as written, once with every
stopping rule off, and prints `costtune compare` of the two.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from costtune.core.config import StoppingConfig, load_config
from costtune.core.run import load_run
from costtune.report.text import compare_runs, compare_table, default_console
from costtune.sweep import run_sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="experiments/digits_long.yaml")
    parser.add_argument("--keep", type=Path, default=None, help="keep both run directories here")
    args = parser.parse_args()
    config = load_config(args.config)
    full = config.model_copy(update={"name": f"{config.name}-full", "stopping": StoppingConfig()})
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        runs = []
        for cfg, label in ((full, "full"), (config, "stopped")):
            result = run_sweep(cfg, base / label)
            runs.append(load_run(result.output_dir))
        frame = compare_runs(runs)
        default_console().print(compare_table(frame))
        for run in runs:
            s = run.ledger.summary()
            metrics = s["best_trial_metrics"] or {}
            print(
                f"{run.name}: ${s['total_cost_usd']:.6f}, {s['epochs']} epochs, best val_loss "
                f"{s['best_metric']:.4f}, val_accuracy {metrics.get('val_accuracy', float('nan')):.4f}"
            )


if __name__ == "__main__":
    main()
