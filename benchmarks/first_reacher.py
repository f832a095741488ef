"""Where the dollars to target go: was a configuration that could reach the target sampled
early, and stopped before it got there?

For each run of METHOD (a benchmarks/lcbench.py method with a searcher in the loop) on TASKS
× SEEDS, prints: the cost to the GRID target (÷ the grid's); when the first sampled
configuration whose curve reaches the target started (÷ the grid's); the share of the cost to
target spent before that start; that configuration's fate (it reached the target, or what
stopped it, at which epoch); and the epoch it needed to reach the target. For a run that
never reached the target: how many configurations it started, how many of them could have
reached it, and what stopped those (the reason and the epoch).

    .venv/bin/python benchmarks/first_reacher.py costtune-hb-rel-tpe:r0.3s 3945,7593 5
    .venv/bin/python benchmarks/first_reacher.py costtune-hb-rel-tpe:r0.3sGCW10i5 7593 3 --stretch 4

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

import costtune.core.simulate


class Capture:
    """Wraps the simulator lcbench calls, keeping the last searcher-driven run's simulation,
    policy and every curve its searcher proposed."""

    def __init__(self) -> None:
        self.simulate = costtune.core.simulate.simulate
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


def reachers(sim: Any, policy: Any, proposed: dict[str, Any], target: float) -> list[dict[str, Any]]:
    """The configurations a run started whose whole curve reaches ``target``, in start order:
    ``order`` (0-based start index), ``start_usd`` (the sweep's dollars when it started),
    ``ran`` (its last epoch), ``needed`` (the first epoch at or below the target) and ``fate``
    (``reached it``, the policy's stop reason, or ``stopper``: ended with no reason from the
    policy, by the stopping rule or by the end of the budget)."""
    started: dict[str, tuple[int, float]] = {}
    ran: dict[str, int] = {}
    for e in sim.epochs:
        started.setdefault(e.config_id, (len(started), e.sweep_usd))
        ran[e.config_id] = e.epoch
    out = []
    for config_id, (order, start_usd) in sorted(started.items(), key=lambda item: item[1][0]):
        curve = proposed.get(config_id)
        if curve is None or not curve.val_loss.min() <= target:
            continue
        needed = int((curve.val_loss <= target).argmax()) + 1
        if ran[config_id] >= needed:
            end = "reached it"
        else:
            reason = policy.stop_reason(config_id) if policy is not None else None
            end = reason.value if reason is not None else "stopper"
        out.append(
            {"order": order, "start_usd": start_usd, "ran": ran[config_id], "needed": needed, "fate": end}
        )
    return out


def fate(task: lcbench.Task, seed: int, method: str, capture: Capture) -> dict[str, Any]:
    lcbench.run_method(task, lcbench.task_seed(task.name, seed), method)
    sim, policy, proposed = capture.last["sim"], capture.last["policy"], capture.last["proposed"]
    target = task.targets["GRID"]
    could = reachers(sim, policy, proposed, target)
    hit = next((e for e in sim.epochs if e.val_loss <= target), None)
    if hit is None:
        return {"reached": False, "started": len({e.config_id for e in sim.epochs}), "could": could}
    first = could[0]
    return {
        "reached": True,
        "cost": hit.sweep_usd / task.budget,
        "first_start": first["start_usd"] / task.budget,
        "share": first["start_usd"] / hit.sweep_usd,
        "fate": first["fate"],
        "stopped_at": first["ran"],
        "needed": first["needed"],
    }


def fates_line(could: list[dict[str, Any]]) -> str:
    """``rung_pruned at 5: 30, stopper at 12: 1`` — what ended the configurations that could have
    reached the target, most common first."""
    counts = Counter(f"{c['fate']} at {c['ran']}" for c in could)
    return ", ".join(f"{what}: {n}" for what, n in counts.most_common()) or "none started"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("method")
    parser.add_argument("tasks", help="comma-separated task ids, or dev / test")
    parser.add_argument("seeds", type=int, help="seeds 0..N-1")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--stretch", type=int, default=1, help="curves K times longer (lcbench.py)")
    args = parser.parse_args()
    if args.stretch < 1:
        parser.error(f"--stretch: must be an integer >= 1, got {args.stretch}")
    lcbench.bench(args.data_dir)
    lcbench.STRETCH = args.stretch
    lcbench.MAX_EPOCHS = lcbench.peers.MAX_EPOCHS = lcbench.stretched_epochs(args.stretch)
    capture = Capture()
    lcbench.simulate = capture  # what run_method calls
    named = {"dev": list(lcbench.DEV_TASKS), "test": list(lcbench.TEST_TASKS)}
    rows = []
    for name in named.get(args.tasks) or args.tasks.split(","):
        task = lcbench.prepare(name)
        for seed in range(args.seeds):
            row = fate(task, seed, args.method, capture)
            if not row["reached"]:
                print(
                    f"{name} {seed}: target not reached; {len(row['could'])} of the {row['started']} "
                    f"configurations started could have; what ended them: {fates_line(row['could'])}",
                    flush=True,
                )
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
