"""How cheap a scheduler with these rungs could be: two bounds that read the future.

Every scheduler with a first rung at epoch ``grace`` (Optuna's SHA, Ray's ASHA, costtune's
rungs) runs each configuration it starts for at least ``grace`` epochs, in the searcher's
order. A clairvoyant scheduler does only that, and runs on only the first configuration
whose curve reaches the target, to the epoch it does: the least any such scheduler can pay
with one worker and that order (:func:`floor_cost`). With random search the order does not
depend on the scheduler, so the clairvoyant's dollars, paired with the recorded runs of the
same pool and seed (``benchmarks/results/families-random.csv.gz``), bound the ratio any
scheduling rule can reach against a peer: no curve model, promotion rule or stop can take
the default below ``floor ÷ peer``.

The second bound is nearer what a model of the curves could buy: the default's own rungs
(late promotion included, replayed by :func:`costtune.replay.replay_pool` as ``costtune
replay`` does), each rung ranking a trial by the loss its curve ends at instead of the loss
it has now (:func:`perfect_ranks`): a perfect curve model inside the default's decisions.
With ``--searcher tpe`` only this one is measured (the clairvoyant's order would not be the
one TPE proposes); it is paired with the TPE runs of the same pool and seed, whose searcher
heard other results, so it is a comparison, not a bound.

    .venv/bin/python benchmarks/screening_floor.py [--searcher tpe] [--jobs 2]

prints one table per target (the pool's best final loss and its 5th best): per family, the
clairvoyant's geometric-mean dollars ÷ budget, and the geometric mean over paired runs of
its ratio to each recorded method.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from families import PRICE, _table, geo

from costtune.core.curves import Curve
from costtune.core.policy.hyperband import AsyncHyperband
from costtune.core.simulate import Simulation
from costtune.replay import ReplaySettings, policy_of, replay_pool
from costtune.search.pool import OrderedPool

HERE = Path(__file__).resolve().parent
GRACE = 5


def floor_cost(table: Sequence[Curve], seed: int, target: float, grace: int = GRACE) -> float | None:
    """Dollars a clairvoyant pays to reach ``target`` in the random order of ``seed`` (the
    order ``families.py``'s random searcher draws): ``grace`` epochs of every configuration
    before the first that reaches the target, then that one to the epoch it does (``None``:
    no configuration reaches it)."""
    pool = OrderedPool(table, seed=seed)
    seconds = 0.0
    while (curve := pool.ask()) is not None:
        losses = np.asarray(curve.val_loss, dtype=float)
        costs = np.asarray(curve.epoch_seconds, dtype=float) * curve.devices
        hits = np.flatnonzero(np.isfinite(losses) & (losses <= target))
        if hits.size:
            return (seconds + float(costs[: hits[0] + 1].sum())) / 3600 * PRICE
        seconds += float(costs[:grace].sum())
    return None


def perfect_ranks(table: Sequence[Curve], seed: int, searcher: str = "random") -> Simulation:
    """The default's replay of ``table`` with ``searcher`` and ``seed``, its rungs told each
    trial's final loss (its last recorded epoch's) in place of its loss at the rung (the
    searcher is told what the trial observed, as in every replay)."""
    settings = ReplaySettings(searcher=searcher, seed=seed, price=PRICE)
    longest = max(c.epochs for c in table)
    policy = policy_of(settings, longest)
    final = {c.config_id: float(c.val_loss[-1]) for c in table}

    def on_result(trial_id: str, epoch: int, loss: float, cost_usd: float) -> object:
        return AsyncHyperband.on_result(policy, trial_id, epoch, final[trial_id], cost_usd)

    policy.on_result = on_result  # type: ignore[method-assign]
    return replay_pool(table, settings, policy=policy).simulation


def bound_rows(family: str, pool: str, seed: int, searcher: str) -> list[dict[str, Any]]:
    """Both bounds (the clairvoyant's with random search only) for one pool and seed."""
    table, budget, targets = _table(family, pool)
    ranked = perfect_ranks(table, seed, searcher)
    rows = []
    for name, target in targets.items():
        perfect = ranked.cost_to_target(target)
        row = {
            "family": family,
            "pool": pool,
            "seed": seed,
            "target": name,
            "perfect ranks": 1.0 if perfect is None else perfect / budget,
            "perfect ranks reached": perfect is not None,
        }
        if searcher == "random":
            floor = floor_cost(table, seed, target)
            row["clairvoyant"] = 1.0 if floor is None else floor / budget
        rows.append(row)
    return rows


def _bound_rows(args: tuple[str, str, int, str]) -> list[dict[str, Any]]:
    return bound_rows(*args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs",
        type=Path,
        default=None,
        help="the recorded runs to pair with (families.py --out; default: "
        "results/families-<searcher>.csv.gz)",
    )
    parser.add_argument("--searcher", choices=["random", "tpe"], default="random")
    parser.add_argument("--families", default="lcbench,real,synthetic")
    parser.add_argument(
        "--methods", default="default,optuna-sha,ray-asha", help="the recorded methods to compare with"
    )
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write every run's bounds (CSV)")
    parser.add_argument(
        "--from", dest="from_", type=Path, default=None, help="run nothing: tables of these bounds"
    )
    args = parser.parse_args(argv)
    runs = pd.read_csv(args.runs or HERE / "results" / f"families-{args.searcher}.csv.gz")
    methods = args.methods.split(",")
    runs = runs[
        (runs["searcher"] == args.searcher)
        & runs["method"].isin(methods)
        & runs["family"].isin(args.families.split(","))
    ]
    if args.from_ is not None:
        bounds = pd.read_csv(args.from_)
    else:
        jobs = [
            (str(family), str(pool), int(seed), args.searcher)
            for (family, pool, seed), _ in runs.groupby(["family", "pool", "seed"])
        ]
        with ProcessPoolExecutor(args.jobs) as executor:
            bounds = pd.DataFrame([row for rows in executor.map(_bound_rows, jobs) for row in rows])
        if args.out is not None:
            bounds.to_csv(args.out, index=False)
    kinds = ["clairvoyant", "perfect ranks"] if "clairvoyant" in bounds else ["perfect ranks"]
    for name in ("best", "top5"):
        what = "best final loss" if name == "best" else "5th best final loss"
        print(
            f"\n| {what}, {args.searcher} | runs | bound | reached | $ ÷ budget | "
            + " | ".join(f"× {m}" for m in methods)
            + " |"
        )
        print("|---|---:|---|---:|---:|" + "---:|" * len(methods))
        for family, part in bounds[bounds["target"] == name].groupby("family"):
            for bound in kinds:
                cells = []
                for method in methods:
                    theirs = runs[(runs["family"] == family) & (runs["method"] == method)]
                    paired = part.merge(theirs, on=["pool", "seed"])
                    ratio = paired[bound] / paired[f"{name}_ratio"]
                    if bound == "clairvoyant" and (ratio > 1 + 1e-9).any():  # no bound at all
                        raise SystemExit(f"{family}/{method}: the clairvoyant paid more than a recorded run")
                    cells.append(f"{geo(ratio):.2f}")
                medians = part.groupby("pool")[bound].median()
                reached = len(part) if bound == "clairvoyant" else int(part["perfect ranks reached"].sum())
                print(
                    f"| {family} | {len(part)} | {bound} | {reached} | {geo(medians):.4f} | "
                    + " | ".join(cells)
                    + " |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
