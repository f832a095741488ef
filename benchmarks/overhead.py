"""Scheduler overhead: costtune's CostAwareHyperBand against Ray's ASHA, and pure-core speed.

One command: `.venv/bin/python benchmarks/overhead.py [--trials 1000] [--iterations 10]`.
Runs a no-op trainable under each scheduler in one local Ray instance, side by side
(interleaved repeats), and times the pure policy alone (decisions per second).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")

import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler

from costtune.policy import AsyncHyperband
from costtune.schedulers import CostAwareHyperBand


def noop(config: dict) -> None:
    for i in range(1, int(config["iterations"]) + 1):
        tune.report({"loss": config["x"] / i})


def run(scheduler: object, trials: int, iterations: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        tuner = tune.Tuner(
            noop,
            param_space={"x": tune.uniform(0, 1), "iterations": iterations},
            tune_config=tune.TuneConfig(
                metric="loss", mode="min", num_samples=trials, scheduler=scheduler, reuse_actors=True
            ),
            run_config=tune.RunConfig(storage_path=tmp, verbose=0),
        )
        started = time.perf_counter()
        tuner.fit()
        return time.perf_counter() - started


def decisions_per_second(n: int = 200_000) -> float:
    rng = random.Random(0)
    policy = AsyncHyperband(max_epochs=81, grace_epochs=1, eta=3)
    epochs = {}
    started = time.perf_counter()
    for k in range(n):
        trial = f"t{k // 20}"
        epochs[trial] = epochs.get(trial, 0) + 1
        policy.on_result(trial, epochs[trial], rng.random(), float(epochs[trial]))
    return n / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    times: dict[str, list[float]] = {"ray-asha": [], "costtune": []}
    for _ in range(args.repeats):  # interleaved, so that machine noise hits both
        times["ray-asha"].append(
            run(
                ASHAScheduler(max_t=args.iterations, grace_period=1, reduction_factor=3),
                args.trials,
                args.iterations,
            )
        )
        times["costtune"].append(
            run(
                CostAwareHyperBand(max_epochs=args.iterations, grace_epochs=1, eta=3, brackets=1),
                args.trials,
                args.iterations,
            )
        )
    ray.shutdown()
    best = {k: min(v) for k, v in times.items()}
    print(f"{args.trials} trials × up to {args.iterations} iterations, no-op trainable, 2 CPUs")
    print(f"{'scheduler':12}{'best wall s':>12}{'all runs':>30}")
    for name, values in times.items():
        print(f"{name:12}{best[name]:>12.1f}{', '.join(f'{v:.1f}' for v in values):>30}")
    print(f"costtune / ASHA wall-clock ratio: {best['costtune'] / best['ray-asha']:.3f}")
    print(f"pure-core decisions per second: {decisions_per_second():,.0f}")


if __name__ == "__main__":
    main()
