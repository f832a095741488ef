"""The driver's decision time as a share of a sweep's wall clock (#65's overhead target, ≤ 1%).

One command: `.venv/bin/python benchmarks/overhead_share.py [--trials 1000] [--searchers optuna,gp]`.

A sweep of ``--trials`` trials of ``--epochs`` epochs of ``--epoch-seconds`` seconds each on
``--workers`` workers, on the simulator's clock (:func:`costtune.core.simulate.simulate`), with the
real decision code in the loop: the default scheduler's policy
(:class:`costtune.core.policy.AsyncHyperband` with :data:`costtune.core.policy.defaults.DEFAULTS`, what
``CostAwareHyperBand`` asks at every result) and the sweep's searcher as a sweep builds it
(:func:`costtune.search.make_searcher`: Ray Tune's ``OptunaSearch`` around Optuna's own sampler),
asked for every trial and told every result and every end, as Ray Tune's controller does. Each
configuration's curve is a smooth function of its seven LCBench-like hyperparameters, so the
model-based searchers have something to learn and ask as they would in a real sweep.

Decision seconds are measured on this host (``time.perf_counter`` around every call); the
share is decision seconds ÷ the simulated wall clock, an upper bound of what the driver's
decisions add (Ray's driver decides while the workers train). Not counted: Ray's own
bookkeeping and the ledger's writes, which are the same for any scheduler.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from costtune.core.config import ParamSpec, SearcherConfig
from costtune.core.curves import Curve
from costtune.core.policy import AsyncHyperband
from costtune.core.policy.defaults import DEFAULTS
from costtune.core.simulate import simulate
from costtune.search import build_search_space, make_searcher

#: LCBench's seven hyperparameters, as a sweep's search space
SPACE = {
    "batch_size": ParamSpec(type="logint", low=16, high=512),
    "learning_rate": ParamSpec(type="loguniform", low=1e-4, high=1e-1),
    "momentum": ParamSpec(type="uniform", low=0.1, high=0.99),
    "weight_decay": ParamSpec(type="loguniform", low=1e-5, high=1e-1),
    "num_layers": ParamSpec(type="int", low=1, high=5),
    "max_units": ParamSpec(type="logint", low=64, high=1024),
    "max_dropout": ParamSpec(type="uniform", low=0.0, high=1.0),
}


def curve_of(trial_id: str, p: dict[str, Any], epochs: int, epoch_seconds: float, seed: int) -> Curve:
    """A falling curve whose final loss a model can learn from ``p``; its pace and noise are
    seeded by the trial."""
    rng = np.random.default_rng([seed, int(trial_id[1:])])
    final = (
        0.2
        + (
            (math.log10(p["learning_rate"]) + 2) ** 2
            + 0.1 * abs(p["num_layers"] - 3)
            + p["max_dropout"] ** 2
            + 0.01 * math.log(p["batch_size"])
        )
        / 4
    )
    tau = rng.uniform(2.0, 8.0)
    t = np.arange(1, epochs + 1)
    losses = final + (2.0 - final) * np.exp(-t / tau) + rng.normal(0, 0.005, epochs)
    return Curve(trial_id, dict(p), losses, np.full(epochs, epoch_seconds), 1.0)


def run(kind: str, trials: int, epochs: int, epoch_seconds: float, workers: int, seed: int) -> dict[str, Any]:
    """One simulated sweep with searcher ``kind``; its decision seconds, split by caller."""
    searcher = make_searcher(SearcherConfig(type=kind), "loss", "min", seed, max_concurrent=workers)
    if not searcher.set_search_properties("loss", "min", build_search_space(SPACE)):
        raise RuntimeError(f"{kind}: the searcher refused the space")
    policy = AsyncHyperband(epochs, min(DEFAULTS.grace_epochs, epochs), DEFAULTS.eta, DEFAULTS.brackets)
    asks: list[float] = []
    tells = [0.0]
    started = [0]

    def ask() -> Curve | None:
        if started[0] >= trials:
            return None
        trial_id = f"t{started[0]}"
        started[0] += 1
        began = time.perf_counter()
        config = searcher.suggest(trial_id)
        asks.append(time.perf_counter() - began)
        return curve_of(trial_id, config, epochs, epoch_seconds, seed)

    def on_result(trial_id: str, epoch: int, loss: float, spent: float) -> Any:
        # the searcher hears every result (Ray's controller tells it before the scheduler
        # decides); inside the simulator's timed decision, with the policy's
        searcher.on_trial_result(trial_id, {"loss": loss, "training_iteration": epoch})
        return plain_on_result(trial_id, epoch, loss, spent)

    plain_on_result = policy.on_result
    policy.on_result = on_result  # type: ignore[method-assign]

    def tell(trial_id: str, epoch: int, loss: float) -> None:
        began = time.perf_counter()
        searcher.on_trial_complete(trial_id, result={"loss": loss, "training_iteration": epoch})
        tells[0] += time.perf_counter() - began

    sim = simulate([], policy, workers=workers, max_epochs=epochs, next_curve=ask, on_trial_end=tell)
    # the simulator's decision seconds: the policy and the searcher's per-result tells
    decisions = sim.decision_seconds + sum(asks) + tells[0]
    return {
        "searcher": kind,
        "trials": len(sim.stopped_at),
        "epochs": len(sim.epochs),
        "wall_h": sim.wall_clock_s / 3600,
        "decision_s": decisions,
        "ask_s": sum(asks),
        "ask_median_ms": 1000 * statistics.median(asks),
        "ask_last_ms": 1000 * statistics.median(asks[-20:]),
        "share": decisions / sim.wall_clock_s,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--epoch-seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--searchers", default="optuna,gp,hyperopt")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    kinds = [k for k in args.searchers.split(",") if k]
    bad = [k for k in kinds if k not in ("optuna", "gp", "hyperopt")]
    if bad or args.trials < 1 or args.epochs < 1 or args.workers < 1 or args.epoch_seconds <= 0:
        parser.exit(2, f"overhead_share.py: error: bad arguments ({', '.join(bad) or 'a count below 1'})\n")
    print(
        f"# {args.trials} trials × {args.epochs} epochs × {args.epoch_seconds:g} s on {args.workers} "
        f"workers (simulated clock), the default rungs (grace {DEFAULTS.grace_epochs}, eta {DEFAULTS.eta})"
    )
    print(
        "| searcher | trials | epochs run | wall clock (h) | decisions (s) | of which asks (s) "
        "| median ask (ms) | ask near the end (ms) | share of wall clock |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind in kinds:
        r = run(kind, args.trials, args.epochs, args.epoch_seconds, args.workers, args.seed)
        print(
            f"| {r['searcher']} | {r['trials']} | {r['epochs']} | {r['wall_h']:.2f} | {r['decision_s']:.1f} "
            f"| {r['ask_s']:.1f} | {r['ask_median_ms']:.1f} | {r['ask_last_ms']:.1f} | {r['share']:.2%} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
