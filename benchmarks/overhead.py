"""Scheduler overhead: costtune's CostAwareHyperBand against Ray's ASHA, and pure-core speed.

One command: `.venv/bin/python benchmarks/overhead.py [--trials 1000] [--iterations 10]`.
Runs a no-op trainable under each scheduler in one local Ray instance, side by side
(interleaved repeats), and times the pure policy alone (decisions per second).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")

import optuna
import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler

from costtune.core.policy import (
    AsyncHyperband,
    Decision,
    Rung,
    RungEntry,
)
from costtune.ray import CostAwareHyperBand

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lab.hyperband import LabHyperband
from lab.outlook import OutlookRule, OutlookStopping
from lab.promotion import PromotionRule, is_promotable
from lab.stopping import LabStopping, LabStoppingRule

#: the space the searchers' asks are timed over: mixed types, as a sweep's
SPACE = {
    "batch_size": optuna.distributions.IntDistribution(16, 512, log=True),
    "learning_rate": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
    "momentum": optuna.distributions.FloatDistribution(0.1, 0.99),
    "weight_decay": optuna.distributions.FloatDistribution(1e-5, 1e-1, log=True),
    "num_layers": optuna.distributions.IntDistribution(1, 5),
    "max_units": optuna.distributions.IntDistribution(64, 1024, log=True),
    "max_dropout": optuna.distributions.FloatDistribution(0.0, 1.0),
}


def smooth_loss(p: dict[str, Any]) -> float:
    """A loss of LCBench's parameters that a model can learn (``overhead.py --searchers``)."""
    return (
        (math.log10(p["learning_rate"]) + 2) ** 2
        + 0.1 * abs(p["num_layers"] - 3)
        + p["max_dropout"] ** 2
        + 0.01 * math.log(p["batch_size"])
    )


def random_configuration(rng: random.Random) -> dict[str, Any]:
    """A uniform draw of :data:`SPACE` (log-uniform where a parameter is log), as told."""
    out = {}
    for name, d in SPACE.items():
        if isinstance(d, optuna.distributions.IntDistribution):
            value: float = rng.randint(d.low, d.high)
        elif d.log:
            value = math.exp(rng.uniform(math.log(d.low), math.log(d.high)))
        else:
            value = rng.uniform(d.low, d.high)
        out[name] = d.to_external_repr(d.to_internal_repr(value))
    return out


class Timed:
    """Adds the seconds spent inside the scheduler's hooks to ``Timed.seconds[class name]``.

    The scheduler's own cost, free of the machine's noise in Ray's other work."""

    seconds: ClassVar[dict[str, float]] = {}

    def _timed(self, name: str, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return getattr(super(), name)(*args)
        finally:
            key = type(self).__name__
            Timed.seconds[key] = Timed.seconds.get(key, 0.0) + time.perf_counter() - started

    def on_trial_add(self, *args: Any) -> Any:
        return self._timed("on_trial_add", *args)

    def on_trial_result(self, *args: Any) -> Any:
        return self._timed("on_trial_result", *args)

    def on_trial_complete(self, *args: Any) -> Any:
        return self._timed("on_trial_complete", *args)

    def choose_trial_to_run(self, *args: Any) -> Any:
        return self._timed("choose_trial_to_run", *args)


class TimedASHA(Timed, ASHAScheduler):
    pass


class TimedCostAwareHyperBand(Timed, CostAwareHyperBand):
    pass


def noop(config: dict) -> None:
    for i in range(1, int(config["iterations"]) + 1):
        tune.report({"loss": config["x"] / i})


def run(scheduler: object, trials: int, iterations: int) -> tuple[float, int, float]:
    """(wall seconds, results reported, seconds inside the scheduler) of one sweep."""
    Timed.seconds.clear()
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
        grid = tuner.fit()
        wall = time.perf_counter() - started
        inside = sum(Timed.seconds.values())
        return wall, sum(int(r.metrics.get("training_iteration", 0)) for r in grid), inside


class PlainRung(dict):  # type: ignore[type-arg]
    """The previous rung: a dict, and a one-pass O(n) promotion check per arrival."""

    def record(self, trial_id: str, entry: RungEntry) -> None:
        self[trial_id] = entry


def decisions_per_second(trials: int = 10_000, results_per_trial: int = 20, plain: bool = False) -> float:
    """Results decided per second by the pure policy: ``trials`` trials reporting in turn.

    Trials report round-robin (so every rung fills with the whole population, the
    expensive case), rungs at 1/3/9 of 81 epochs; a stopped trial's
    later results are still decided (STOP at once).
    """
    rng = random.Random(0)
    policy = AsyncHyperband(max_epochs=81, grace_epochs=1, eta=3)
    if plain:
        policy.rungs = [{at: PlainRung() for at in rungs} for rungs in policy.rungs]
    losses = [rng.random() for _ in range(trials)]
    ids = [f"t{i}" for i in range(trials)]
    started = time.perf_counter()
    for epoch in range(1, results_per_trial + 1):
        for trial, loss in zip(ids, losses, strict=True):
            policy.on_result(trial, epoch, loss / epoch, float(epoch))
    return trials * results_per_trial / (time.perf_counter() - started)


def core_table() -> None:
    print("\npure-core decisions per second (round-robin results, rungs 1/3/9 of 81, cost-share)")
    print(f"{'trials':>10}{'Rung (blocks)':>16}{'dict, one pass':>16}{'ratio':>8}")
    for n in (1_000, 10_000, 100_000):
        fast = decisions_per_second(n)
        # the one-pass check is O(n) per arrival: 100,000 trials would take hours
        slow = decisions_per_second(n, plain=True) if n <= 10_000 else math.nan
        print(f"{n:>10,}{fast:>16,.0f}{slow:>16,.0f}{fast / slow:>8.1f}")


def decision_latency(
    trials: int, epochs: int = 52, relative: bool = False, noise: float = 0.0
) -> tuple[float, float]:
    """Median and p99 seconds of one decision (rungs + the outlook rule, or
    with ``relative`` + the relative-ROI stopper, ρ 0.3, sparing the best, noise-aware) when
    ``trials`` trials report round-robin for ``epochs`` epochs — every result decided.
    ``noise``: each loss times exp(noise · z), so that the noise-aware rule's estimate runs on
    the stops it judges."""
    rng = random.Random(0)
    policy = AsyncHyperband(max_epochs=epochs, grace_epochs=5, eta=5)
    outlook: OutlookStopping | LabStopping = OutlookStopping(OutlookRule(epochs, optimism=2.0))
    if relative:
        outlook = LabStopping(LabStoppingRule(min_relative_roi=0.3, spare_best=True, noise_aware=True))
    finals = [rng.random() for _ in range(trials)]
    stopped: set[int] = set()
    took: list[float] = []
    for epoch in range(1, epochs + 1):
        for i, final in enumerate(finals):
            if i in stopped:
                continue
            loss = (final + 1.0 / epoch**0.5) * math.exp(noise * rng.gauss(0.0, 1.0))
            started = time.perf_counter()
            if isinstance(outlook, OutlookStopping):
                stop = outlook.on_result(f"t{i}", loss) is not None
            else:
                stop = outlook.on_result(f"t{i}", loss, epoch / 3600, epoch * 2.5 / 3600) is not None
            stop = policy.on_result(f"t{i}", epoch, loss, float(epoch)) is Decision.STOP or stop
            took.append(time.perf_counter() - started)
            if stop:
                stopped.add(i)
    took.sort()
    return statistics.median(took), took[int(0.99 * (len(took) - 1))]


def lookahead_latency(trials: int, lookahead: int | None, epochs: int = 52) -> tuple[float, float]:
    """Median and p99 seconds of one decision of the rungs (grace 5, η 5, keep floor) with the
    look-ahead (m = ``lookahead``) + the relative-ROI stopper, when ``trials`` trials run one
    after another (one worker: the rungs fill to ``trials`` entries, the look-ahead's worst
    case), each until it is stopped. Curves: loss = final + 1/√epoch, finals random."""
    rng = random.Random(0)
    policy = LabHyperband(max_epochs=epochs, grace_epochs=5, eta=5, lookahead=lookahead)
    stopper = LabStopping(LabStoppingRule(min_relative_roi=0.3, spare_best=True, max_epochs=epochs))
    took: list[float] = []
    for i in range(trials):
        final = rng.random()
        for epoch in range(1, epochs + 1):
            loss = final + 1.0 / epoch**0.5
            started = time.perf_counter()
            stop = stopper.on_result(f"t{i}", loss, epoch / 3600, epoch * 2.5 / 3600) is not None
            stop = policy.on_result(f"t{i}", epoch, loss, float(epoch)) is Decision.STOP or stop
            took.append(time.perf_counter() - started)
            if stop:
                break
    took.sort()
    return statistics.median(took), took[int(0.99 * (len(took) - 1))]


def pareto_check_ms(trials: int, repeats: int = 20) -> float:
    """Median milliseconds of one Pareto-rule promotion check in a rung of ``trials`` trials."""
    rng = random.Random(1)
    rung = Rung((f"t{i}", RungEntry(rng.random(), rng.random())) for i in range(trials))
    took = []
    for k in range(repeats):
        started = time.perf_counter()
        is_promotable(f"t{k}", rung, 3, PromotionRule.PARETO)
        took.append(time.perf_counter() - started)
    return 1000 * statistics.median(took)


def latency_table() -> None:
    print("\ndecision latency: rungs (grace 5, η 5, keep floor) + a stopper, every result of 52 epochs")
    print(f"{'stopper':>22}{'trials':>8}{'median µs':>11}{'p99 µs':>9}")
    rows = (
        ("outlook (κ 2)", False, 0.0),
        ("relative ROI (ρ 0.3)", True, 0.0),
        ("the same, noise 5%", True, 0.05),
    )
    for name, relative, noise in rows:
        for n in (100, 1_000):
            median, p99 = decision_latency(n, relative=relative, noise=noise)
            print(f"{name:>22}{n:>8,}{1e6 * median:>11.1f}{1e6 * p99:>9.1f}")
    print("\none worker, trials one after another (rungs fill up), + relative ROI (ρ 0.3)")
    print(f"{'look-ahead':>22}{'trials':>8}{'median µs':>11}{'p99 µs':>9}")
    for m in (None, 10):
        for n in (100, 1_000):
            median, p99 = lookahead_latency(n, m)
            print(f"{'off' if m is None else f'm = {m}':>22}{n:>8,}{1e6 * median:>11.1f}{1e6 * p99:>9.1f}")
    print("\nPareto promotion check (non-dominated sorting of (loss, dollars) in the rung)")
    for n in (100, 1_000, 10_000):
        print(f"{n:>8,} trials: {pareto_check_ms(n):.2f} ms per check")


def searcher_latency(kind: str, trials: int, asks: int = 10, running: int = 0) -> tuple[float, float, float]:
    """Median and p99 seconds of one ask (a proposal for all seven LCBench parameters) by
    costtune's searchers, with ``trials`` told trials behind it (a smooth synthetic loss) and
    ``running`` asked but not yet told (as with ``running`` + 1 asynchronous workers: each ask
    is timed with that many running, then the oldest running trial is told). The GP runs with
    a sweep's default ``model_check``; ``gp-noise`` is the default GP told losses no
    hyperparameter explains, so that its check hands the asks to TPE; the third value is the
    share of the timed asks TPE answered. ``optuna`` is Optuna's univariate ``TPESampler``,
    ``quick-tpe`` the sweep's ``searcher: {type: optuna}`` (the same proposals)."""
    import random

    import optuna
    from optuna_forks.pools import MODEL_CHECK_DEFAULT, gp_sampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    fast_from = {"gp": None, "gp-optuna": 10**9, "gp-fast": 0, "gp-noise": None}
    from optuna_forks.tpe import QuickTPESampler

    sampler = (
        gp_sampler(0, fast_from=fast_from[kind], model_check=MODEL_CHECK_DEFAULT)
        if kind in fast_from
        else QuickTPESampler(seed=0)
        if kind == "quick-tpe"
        else optuna.samplers.TPESampler(seed=0, multivariate=False)
    )
    study = optuna.create_study(sampler=sampler)
    dists = SPACE
    noise = random.Random(1)

    def loss(p: dict) -> float:
        if kind == "gp-noise":
            return noise.gauss(0.0, 1.0)
        return smooth_loss(p)

    rng = random.Random(0)
    for _ in range(trials):  # told at once: random configurations, their losses
        params = random_configuration(rng)
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=loss(params)))
    pending = [study.ask(dists) for _ in range(running)]
    took, timed = [], []
    for _ in range(asks):
        started = time.perf_counter()
        pending.append(study.ask(dists))
        took.append(time.perf_counter() - started)
        timed.append(pending[-1].number)
        trial = pending.pop(0)
        study.tell(trial, loss(trial.params))
    took.sort()
    to_tpe = len(set(timed) & set(getattr(sampler, "_fell_back", ()))) / asks
    return statistics.median(took), took[min(len(took) - 1, round(0.99 * (len(took) - 1)))], to_tpe


def searcher_table() -> None:
    print("\nsearcher: seconds to propose one configuration (LCBench's 7 parameters), n trials told")
    print(f"{'searcher':>44}{'trials':>8}{'running':>9}{'median s':>10}{'p99 s':>9}{'to TPE':>8}")
    names = {
        "optuna": "univariate TPE (Optuna's TPESampler)",
        "quick-tpe": "univariate TPE, a sweep's (QuickTPESampler)",
        "gp": "GP (default: fast ask past 200 trials)",
        "gp-optuna": "GP, Optuna's acquisition search throughout",
        "gp-fast": "GP, fast ask from the start",
        "gp-noise": "GP on noise: its check hands asks to TPE",
    }
    for kind, n, asks, running in (
        ("optuna", 100, 50, 0),
        ("optuna", 1_000, 50, 0),
        ("quick-tpe", 100, 50, 0),
        ("quick-tpe", 1_000, 200, 0),
        ("gp", 100, 20, 0),
        ("gp", 1_000, 200, 0),
        ("gp", 1_000, 200, 7),  # 8 asynchronous workers: 7 trials running at each ask
        ("gp-optuna", 1_000, 10, 0),
        ("gp-fast", 100, 200, 0),
        ("gp-noise", 100, 20, 0),
        ("gp-noise", 1_000, 200, 0),
        ("gp-noise", 1_000, 200, 7),
    ):
        median, p99, to_tpe = searcher_latency(kind, n, asks, running)
        print(f"{names[kind]:>44}{n:>8,}{running:>9}{median:>10.4f}{p99:>9.4f}{to_tpe:>8.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--core-only", action="store_true", help="only the pure-core decisions per second")
    parser.add_argument(
        "--searchers", action="store_true", help="only the searchers' seconds per proposal (TPE, GP)"
    )
    args = parser.parse_args()
    if args.searchers:
        searcher_table()
        return
    if args.core_only:
        core_table()
        latency_table()
        return
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    schedulers = {
        "ray-asha": lambda: TimedASHA(max_t=args.iterations, grace_period=1, reduction_factor=3),
        # one bracket, promotion by loss, as ASHA: both do the same work
        "costtune": lambda: TimedCostAwareHyperBand(
            max_epochs=args.iterations, grace_epochs=1, eta=3, brackets=1
        ),
    }
    runs: dict[str, list[tuple[float, int, float]]] = {name: [] for name in schedulers}
    for _ in range(args.repeats):  # interleaved, so that machine noise hits both
        for name, make in schedulers.items():
            runs[name].append(run(make(), args.trials, args.iterations))
    ray.shutdown()
    best = {name: min(runs[name]) for name in runs}
    print(f"{args.trials} trials × up to {args.iterations} iterations, no-op trainable, 2 CPUs")
    print(
        f"{'scheduler':12}{'best wall s':>12}{'results':>9}{'ms/result':>11}"
        f"{'in scheduler µs/result':>24}   all runs: wall s (in scheduler s)"
    )
    inside = {}
    for name, values in runs.items():
        wall, results, _ = best[name]
        inside[name] = min(i / r for _, r, i in values)
        listed = ", ".join(f"{w:.1f} ({i:.2f})" for w, _, i in values)
        print(
            f"{name:12}{wall:>12.1f}{results:>9}{1000 * wall / results:>11.2f}"
            f"{1e6 * inside[name]:>24.0f}   {listed}"
        )
    ratio = best["costtune"][0] / best["ray-asha"][0]
    per_result = (best["costtune"][0] / best["costtune"][1]) / (best["ray-asha"][0] / best["ray-asha"][1])
    median = statistics.median(w for w, _, _ in runs["costtune"]) / statistics.median(
        w for w, _, _ in runs["ray-asha"]
    )
    print(
        f"costtune / ASHA wall-clock ratio: best {ratio:.3f}, median {median:.3f} "
        f"(best per result: {per_result:.3f})"
    )
    inside_ratio = inside["costtune"] / inside["ray-asha"]
    print(f"costtune / ASHA time inside the scheduler per result: {inside_ratio:.2f}")
    core_table()
    latency_table()


if __name__ == "__main__":
    main()
