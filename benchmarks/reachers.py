"""What the oracle floor asks of a search: how many of a task's configurations reach each
target, and what their full runs cost beside the floor (the cheapest of them).

For each LCBench task (protocol v3's pool: 2,000 random configurations and the grid), per
target: the configurations whose curve reaches it at any epoch, the oracle floor in dollars,
the median and 10th-percentile full-run cost of those reachers ÷ the floor, the median
configuration's full run ÷ the floor, and ``screen``: what a search that knew nothing would
spend to meet its first reacher ÷ the floor — pool ÷ reachers draws, each run for the first
rung's epochs at the pool's mean price, plus the median reacher's full run. A search that
found a reacher at no cost and ran it alone would still pay ``reacher`` × the floor.

    .venv/bin/python benchmarks/reachers.py dev [--data-dir ../shared/benchmarks/yahpo_lcbench]
    .venv/bin/python benchmarks/reachers.py 3945,167190 --first-rung 5

Needs the LCBench surrogate (``--data-dir``, or COSTTUNE_LCBENCH_DIR).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from costtune.core.curves import Curve


@dataclass(frozen=True)
class Reachers:
    count: int  # configurations whose curve reaches the target at some epoch
    floor: float  # the cheapest full run whose final loss reaches it, $ (lcbench.oracle_floor)
    median: float  # the reachers' median full run ÷ floor
    q10: float  # their 10th percentile ÷ floor
    typical: float  # the median configuration's full run ÷ floor
    screen: float  # a blind search's first-rung screening until its first reacher, and that run, ÷ floor


def reacher_stats(
    curves: list[Curve], target: float, floor: float, first_rung: int, usd_per_hour: float
) -> Reachers:
    """:class:`Reachers` of ``curves`` for ``target``; ``floor`` from ``lcbench.oracle_floor``."""
    if floor <= 0:
        raise ValueError(f"floor: must be positive, got {floor!r}")
    full = np.array([c.seconds_until(c.epochs) for c in curves]) / 3600 * usd_per_hour
    rung = np.array([c.seconds_until(min(first_rung, c.epochs)) for c in curves]) / 3600 * usd_per_hour
    reach = np.array([float(c.val_loss.min()) <= target for c in curves])
    count = int(reach.sum())
    if count == 0:
        nan = float("nan")
        return Reachers(0, floor, nan, nan, float(np.median(full)) / floor, nan)
    draws = len(curves) / count  # the expected draws, with replacement, to meet the first reacher
    median = float(np.median(full[reach]))
    return Reachers(
        count=count,
        floor=floor,
        median=median / floor,
        q10=float(np.quantile(full[reach], 0.1)) / floor,
        typical=float(np.median(full)) / floor,
        screen=(draws * float(rung.mean()) + median) / floor,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", help="dev, test, or comma-separated task ids")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--first-rung", type=int, default=5, help="the screening epochs (default 5)")
    args = parser.parse_args(argv)
    if args.first_rung < 1:
        parser.error(f"--first-rung: must be an integer >= 1, got {args.first_rung}")
    import lcbench

    lcbench.bench(args.data_dir)
    named = {"dev": list(lcbench.DEV_TASKS), "test": list(lcbench.TEST_TASKS)}
    columns = (
        "task",
        "target",
        "reachers",
        "floor $",
        "reacher median ÷ floor",
        "q10 ÷ floor",
        "typical ÷ floor",
    )
    print("| " + " | ".join(columns) + " | screen ÷ floor |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    medians: dict[str, list[float]] = {name: [] for name in lcbench.TARGETS}
    for name in named.get(args.tasks) or args.tasks.split(","):
        task = lcbench.prepare(name)
        curves = lcbench.curves_of(name, lcbench.random_configs(2000, 12345), prefix="pool-")
        curves += lcbench.curves_of(name, lcbench.reference_grid(), prefix="grid-")
        for target in lcbench.TARGETS:
            r = reacher_stats(
                curves, task.targets[target], task.floor[target], args.first_rung, lcbench.USD_PER_HOUR
            )
            medians[target].append(r.median)
            print(
                f"| {name} | {target} | {r.count} | {r.floor:.3f} | {r.median:.1f} | {r.q10:.1f} | "
                f"{r.typical:.1f} | {r.screen:.1f} |",
                flush=True,
            )
    for target, values in medians.items():
        median = statistics.median(values)
        print(f"{target}: median over tasks of the reachers' median full run ÷ floor: {median:.1f}")


if __name__ == "__main__":
    main()
