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

    .venv/bin/python benchmarks/screening_floor.py

prints one table per target (the pool's best final loss and its 5th best): per family, the
clairvoyant's geometric-mean dollars ÷ budget, and the geometric mean over paired runs of
its ratio to each recorded method.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

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


def perfect_ranks(table: Sequence[Curve], seed: int) -> Simulation:
    """The default's replay of ``table`` in the random order of ``seed``, its rungs told each
    trial's final loss (its last recorded epoch's) in place of its loss at the rung."""
    settings = ReplaySettings(searcher="random", seed=seed, price=PRICE)
    longest = max(c.epochs for c in table)
    policy = policy_of(settings, longest)
    final = {c.config_id: float(c.val_loss[-1]) for c in table}

    def on_result(trial_id: str, epoch: int, loss: float, cost_usd: float) -> object:
        return AsyncHyperband.on_result(policy, trial_id, epoch, final[trial_id], cost_usd)

    policy.on_result = on_result  # type: ignore[method-assign]
    return replay_pool(table, settings, policy=policy).simulation


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs",
        type=Path,
        default=HERE / "results" / "families-random.csv.gz",
        help="the recorded random-search runs to pair with (families.py --out)",
    )
    parser.add_argument(
        "--methods", default="default,optuna-sha,ray-asha", help="the recorded methods to compare with"
    )
    args = parser.parse_args(argv)
    runs = pd.read_csv(args.runs)
    methods = args.methods.split(",")
    runs = runs[(runs["searcher"] == "random") & runs["method"].isin(methods)]
    rows = []
    for (family, pool, seed), _ in runs.groupby(["family", "pool", "seed"]):
        table, budget, targets = _table(family, pool)
        ranked = perfect_ranks(table, int(seed))
        for name, target in targets.items():
            floor = floor_cost(table, int(seed), target)
            perfect = ranked.cost_to_target(target)
            rows.append(
                {
                    "family": family,
                    "pool": pool,
                    "seed": seed,
                    "target": name,
                    "clairvoyant": 1.0 if floor is None else floor / budget,
                    "perfect ranks": 1.0 if perfect is None else perfect / budget,
                    "perfect ranks reached": perfect is not None,
                }
            )
    bounds = pd.DataFrame(rows)
    for name in ("best", "top5"):
        what = "best final loss" if name == "best" else "5th best final loss"
        print(
            f"\n| {what}, random search | runs | bound | reached | $ ÷ budget | "
            + " | ".join(f"× {m}" for m in methods)
            + " |"
        )
        print("|---|---:|---|---:|---:|" + "---:|" * len(methods))
        for family, part in bounds[bounds["target"] == name].groupby("family"):
            for bound in ("clairvoyant", "perfect ranks"):
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
