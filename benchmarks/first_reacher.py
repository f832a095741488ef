"""Where the dollars to target go: was a configuration that could reach the target sampled
early, and stopped before it got there?

For each run of METHOD (a benchmarks/lcbench.py method with a searcher in the loop) on TASKS
× SEEDS, prints: the cost to the GRID target (÷ the grid's); when the first sampled
configuration whose curve reaches the target started (÷ the grid's); the share of the cost to
target spent before that start; that configuration's fate (it reached the target, or what
stopped it, at which epoch); and the epoch it needed to reach the target.

    .venv/bin/python benchmarks/first_reacher.py costtune-hb-rel-tpe:r0.3s 3945,7593 5

Needs the LCBench surrogate (``--data-dir``, or COSTTUNE_LCBENCH_DIR).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lcbench

import costtune.simulate


class Capture:
    """Wraps the simulator lcbench calls, keeping the last searcher-driven run's simulation,
    policy and every curve its searcher proposed."""

    def __init__(self) -> None:
        self.simulate = costtune.simulate.simulate
        self.last: dict[str, Any] = {}

    def __call__(self, curves: Any, policy: Any = None, **kwargs: Any) -> Any:
        if "next_curve" not in kwargs:
            return self.simulate(curves, policy, **kwargs)
        proposed: dict[str, Any] = {}
        ask = kwargs["next_curve"]

        def next_curve() -> Any:
            curve = ask()
            if curve is not None:  # None: the searcher stopped asking (--until-target)
                proposed[curve.config_id] = curve
            return curve

        sim = self.simulate(curves, policy, **{**kwargs, "next_curve": next_curve})
        self.last = {"sim": sim, "policy": policy, "proposed": proposed}
        return sim


def fate(task: lcbench.Task, seed: int, method: str, capture: Capture) -> dict[str, Any] | None:
    lcbench.run_method(task, seed, method)
    sim, policy, proposed = capture.last["sim"], capture.last["policy"], capture.last["proposed"]
    target = task.targets["GRID"]
    hit = next((e for e in sim.epochs if e.val_loss <= target), None)
    if hit is None:
        return None
    started: dict[str, float] = {}
    for e in sim.epochs:
        started.setdefault(e.config_id, e.sweep_usd)
    at, first = min(
        (started[c], c) for c, curve in proposed.items() if c in started and curve.val_loss.min() <= target
    )
    if first == hit.config_id:
        end = "reached it"
    else:
        reason = policy.stop_reason(first) if policy is not None else None
        end = reason.value if reason is not None else "stopper"
    return {
        "cost": hit.sweep_usd / task.budget,
        "first_start": at / task.budget,
        "share": at / hit.sweep_usd,
        "fate": end,
        "stopped_at": sim.stopped_at.get(first),
        "needed": int((proposed[first].val_loss <= target).argmax()) + 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("method")
    parser.add_argument("tasks", help="comma-separated task ids, or dev / test")
    parser.add_argument("seeds", type=int, help="seeds 0..N-1")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    lcbench.bench(args.data_dir)
    capture = Capture()
    lcbench.simulate = capture  # what run_method calls
    named = {"dev": list(lcbench.DEV_TASKS), "test": list(lcbench.TEST_TASKS)}
    rows = []
    for name in named.get(args.tasks) or args.tasks.split(","):
        task = lcbench.prepare(name)
        for seed in range(args.seeds):
            row = fate(task, seed, args.method, capture)
            if row is None:
                print(f"{name} {seed}: target not reached", flush=True)
                continue
            rows.append(row)
            print(
                f"{name} {seed}: cost to target {row['cost']:.3f}, first reacher started at "
                f"{row['first_start']:.3f} (share {row['share']:.2f}), fate: {row['fate']}"
                + (f" at epoch {row['stopped_at']}" if row["fate"] != "reached it" else "")
                + f", needed {row['needed']} epochs",
                flush=True,
            )
    stopped = [r for r in rows if r["fate"] != "reached it"]
    print(
        f"\n{len(rows)} runs reached the target; in {len(stopped)} the first configuration that could "
        f"was stopped before it did ({dict(Counter(r['fate'] for r in stopped))})"
    )
    if stopped:
        print(
            f"  those needed {min(r['needed'] for r in stopped)}–{max(r['needed'] for r in stopped)} epochs; "
            f"median share of the cost to target spent before it started: "
            f"{statistics.median(r['share'] for r in stopped):.2f}"
        )


if __name__ == "__main__":
    main()
