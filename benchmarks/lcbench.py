"""costtune against its peers on LCBench learning curves (../shared/benchmarks/PROTOCOL.md).

One command: `.venv/bin/python benchmarks/lcbench.py --data-dir ../shared/benchmarks/yahpo_lcbench
[--tasks 3945,7593,...] [--seeds 10]`. Prints one table.

Methods (one worker each; every epoch charged its surrogate seconds at $2.50/h; budget =
the 64-job reference grid's cost; targets: GRID = the grid's best epoch-52 val CE, TOP1 =
the 1st percentile of epoch-52 val CE over 2,000 random configurations, rng 12345):
- grid: the 64-job grid, every job to epoch 52, no stopping;
- random: random search, every trial to epoch 52;
- costtune-hb: random sampling + costtune's CostAwareHyperBand policy (defaults: grace 5,
  eta 5, all brackets, cost-share promotion), on the pure-core simulator;
- costtune-hb-tpe: the same policy with Optuna's TPE in the loop (ask a configuration
  when a worker frees up, tell it the loss the trial ended with — at its last rung for a
  pruned trial);
- optuna-tpe-hb: Optuna's TPESampler + HyperbandPruner, run through Optuna itself
  (a fixed study name per task and seed, so brackets are reproducible).

Not yet here (next increments): Ray Tune ASHA / HyperBand through Ray with the replay
trainable, marginal-ROI stopping and PBT.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics

import numpy as np
import optuna

from costtune.curves import Curve, curves_from_frame
from costtune.lcbench import LCBench, random_configs, reference_grid
from costtune.policy import AsyncHyperband
from costtune.simulate import simulate

DEV_TASKS = ("3945", "7593", "34539", "126025", "146212", "167190", "168330", "189909")
USD_PER_HOUR = 2.50


def curves_of(bench: LCBench, task: str, configs: list[dict[str, float]]) -> list[Curve]:
    return list(curves_from_frame(bench.curves(task, configs)).values())


def top1_target(bench: LCBench, task: str) -> float:
    configs = random_configs(2000, 12345)
    frame = bench.curves(task, configs, epochs=52)
    final = frame[frame["epoch"] == 52]["val_loss"].to_numpy()
    return float(np.percentile(final, 1))


def suggest(trial: optuna.Trial) -> dict[str, float]:
    return {
        "batch_size": trial.suggest_int("batch_size", 16, 512, log=True),
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-1, log=True),
        "momentum": trial.suggest_float("momentum", 0.1, 0.99),
        "weight_decay": trial.suggest_float("weight_decay", 1e-5, 1e-1, log=True),
        "num_layers": trial.suggest_int("num_layers", 1, 5),
        "max_units": trial.suggest_int("max_units", 64, 1024, log=True),
        "max_dropout": trial.suggest_float("max_dropout", 0.0, 1.0),
    }


def run_costtune_tpe(bench: LCBench, task: str, seed: int, budget: float):  # type: ignore[no-untyped-def]
    """costtune's CostAwareHyperBand policy on the simulator, TPE asked and told in the loop."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=f"costtune-{task}-{seed}", sampler=optuna.samplers.TPESampler(seed=seed)
    )
    asked: dict[str, optuna.Trial] = {}

    def next_curve() -> Curve:
        trial = study.ask()
        curve = dataclasses.replace(curves_of(bench, task, [suggest(trial)])[0], config_id=f"t{trial.number}")
        asked[curve.config_id] = trial
        return curve

    def on_trial_end(config_id: str, epoch: int, loss: float) -> None:
        study.tell(asked.pop(config_id), loss)

    return simulate(
        [],
        AsyncHyperband(52),
        usd_per_device_hour=USD_PER_HOUR,
        budget_usd=budget,
        next_curve=next_curve,
        on_trial_end=on_trial_end,
    )


def run_optuna(bench: LCBench, task: str, seed: int, budget: float) -> list[tuple[float, float]]:
    """(cumulative $, val CE) of every epoch Optuna's TPE + Hyperband pruner ran."""
    spent = 0.0
    trace: list[tuple[float, float]] = []
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial: optuna.Trial) -> float:
        nonlocal spent
        config = suggest(trial)
        curve = curves_of(bench, task, [config])[0]
        loss = math.inf
        for epoch in range(1, curve.epochs + 1):
            spent += curve.epoch_seconds[epoch - 1] / 3600 * USD_PER_HOUR
            loss = float(curve.val_loss[epoch - 1])
            trace.append((spent, loss))
            if spent >= budget:
                trial.study.stop()
                return loss
            trial.report(loss, epoch)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return loss

    study = optuna.create_study(
        study_name=f"lcbench-{task}-{seed}",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.HyperbandPruner(min_resource=1, max_resource=52),
    )
    study.optimize(objective, n_trials=5000)
    return trace


def cost_to(trace: list[tuple[float, float]], target: float) -> float | None:
    for usd, loss in trace:
        if loss <= target:
            return usd
    return None


def sim_trace(sim) -> list[tuple[float, float]]:  # type: ignore[no-untyped-def]
    return [(e.sweep_usd, e.val_loss) for e in sim.epochs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="the LCBench surrogate (or COSTTUNE_LCBENCH_DIR)")
    parser.add_argument("--tasks", default=",".join(DEV_TASKS))
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    bench = LCBench(args.data_dir)
    methods = ("grid", "random", "costtune-hb", "costtune-hb-tpe", "optuna-tpe-hb")
    # per method and target: successes, and cost-to-target / grid cost of each success
    results: dict[tuple[str, str], list[float | None]] = {}
    per_task_median: dict[tuple[str, str], list[float]] = {}
    for task in args.tasks.split(","):
        grid = curves_of(bench, task, reference_grid())
        grid_sim = simulate(grid, None, usd_per_device_hour=USD_PER_HOUR)
        budget = grid_sim.total_usd
        targets = {"GRID": grid_sim.best_loss, "TOP1": top1_target(bench, task)}
        task_ratios: dict[tuple[str, str], list[float | None]] = {}
        for seed in range(args.seeds):
            stream = curves_of(bench, task, random_configs(600, 1000 + seed))
            traces = {
                "grid": sim_trace(grid_sim),
                "random": sim_trace(
                    simulate(stream, None, usd_per_device_hour=USD_PER_HOUR, budget_usd=budget)
                ),
                "costtune-hb": sim_trace(
                    simulate(stream, AsyncHyperband(52), usd_per_device_hour=USD_PER_HOUR, budget_usd=budget)
                ),
                "costtune-hb-tpe": sim_trace(run_costtune_tpe(bench, task, seed, budget)),
                "optuna-tpe-hb": run_optuna(bench, task, seed, budget),
            }
            for method, trace in traces.items():
                for name, target in targets.items():
                    c = cost_to(trace, target)
                    ratio = None if c is None or c > budget else c / budget
                    task_ratios.setdefault((method, name), []).append(ratio)
        for key, ratios in task_ratios.items():
            results.setdefault(key, []).extend(ratios)
            reached = [r for r in ratios if r is not None]
            if reached:
                per_task_median.setdefault(key, []).append(statistics.median(reached))
        print(
            f"task {task}: budget ${budget:.2f}, GRID {targets['GRID']:.4f}, TOP1 {targets['TOP1']:.4f}",
            flush=True,
        )
    print(
        f"\n{len(args.tasks.split(','))} tasks × {args.seeds} seeds; "
        "cost-to-target as a fraction of the grid's cost"
    )
    print(f"{'method':16}{'target':8}{'success':>12}{'geo-mean of per-task median cost/grid':>40}")
    for method in methods:
        for target in ("GRID", "TOP1"):
            ratios = results[(method, target)]
            ok = sum(r is not None for r in ratios)
            medians = per_task_median.get((method, target), [])
            geo = math.exp(statistics.fmean(math.log(m) for m in medians)) if medians else math.nan
            print(f"{method:16}{target:8}{ok:>6}/{len(ratios):<5}{geo:>40.3f}  (over {len(medians)} tasks)")


if __name__ == "__main__":
    main()
