"""The GP searcher's fast ask against Optuna's acquisition search, past 200 trials.

Each run is a study of the GP searcher on an LCBench task, a configuration's value being the
best validation loss its whole curve reaches (as a run trained to the last epoch, with a
checkpoint per epoch, would keep). The first ``--from`` trials are asked once, by costtune's
sampler with the default thresholds (Optuna's own asks up to 200). The study is then copied,
sampler state and all, and both copies go on to ``--trials`` (300): one with costtune's fast ask
(the default past 200 trials: a subset of 128 trials, 320 candidates), one with Optuna's
acquisition search throughout (``fast_from`` beyond reach). So the two differ only in how
they ask past the fork.

Prints, per run and over all runs: each side's best loss at the end, the median loss of the
configurations it proposed after the fork, how many of those repeat a configuration already
tried (fast / Optuna), how far it is above the
best loss known on the task (2,000 random configurations and the grid), the paired sign test
on the final best, and each side's median seconds per ask after the fork, measured side by
side in the same run.

    .venv/bin/python benchmarks/gp_fast_ask.py --data-dir ../shared/benchmarks/yahpo_lcbench \\
        --tasks 3945,7593,34539,126025 --seeds 2

Needs the LCBench surrogate (``--data-dir``, or COSTTUNE_LCBENCH_DIR).
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lcbench
import optuna
from optuna_forks.pools import gp_sampler

NEVER = 10**9


def _tell_one(study: optuna.Study, task: str, took: list[float]) -> float:
    started = time.perf_counter()
    trial = study.ask()
    config = lcbench.suggest(trial)
    took.append(time.perf_counter() - started)
    loss = float(lcbench.curves_of(task, [config])[0].val_loss.min())
    study.tell(trial, loss)
    return loss


def run(task: str, seed: int, fork_at: int, trials: int) -> dict[str, float]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=gp_sampler(seed))
    for _ in range(fork_at):
        _tell_one(study, task, [])
    out: dict[str, float] = {}
    for name, fast_from in (("fast", None), ("optuna", NEVER)):
        sampler = copy.deepcopy(study.sampler)
        if fast_from is not None:
            sampler._fast_from = fast_from
        copied = optuna.create_study(sampler=sampler)
        copied.add_trials(study.trials)
        took: list[float] = []
        proposed = [_tell_one(copied, task, took) for _ in range(trials - fork_at)]
        out[name] = min(t.value for t in copied.trials)
        out[f"{name}_median"] = statistics.median(proposed)
        after = copied.trials[fork_at:]
        out[f"{name}_repeats"] = sum(  # proposals that repeat a configuration already tried
            any(t.params == u.params for u in copied.trials[: fork_at + i]) for i, t in enumerate(after)
        )
        out[f"{name}_s"] = statistics.median(took)
    out["at_fork"] = min(t.value for t in study.trials)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="the LCBench surrogate (or COSTTUNE_LCBENCH_DIR)")
    parser.add_argument("--tasks", default="3945,7593,34539,126025", help="task ids, or 'dev' / 'test'")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--from", dest="fork_at", type=int, default=200, help="trials before the fork")
    parser.add_argument("--trials", type=int, default=300, help="trials in all")
    args = parser.parse_args()
    if not 10 <= args.fork_at < args.trials:
        raise SystemExit(
            f"--from: must be at least 10 and below --trials ({args.trials}), got {args.fork_at}"
        )
    lcbench.bench(args.data_dir)
    named = {"dev": list(lcbench.DEV_TASKS), "test": list(lcbench.TEST_TASKS)}
    tasks = named.get(args.tasks) or args.tasks.split(",")
    print(f"fork at {args.fork_at} trials, {args.trials} in all; loss = the best validation loss of a curve")
    head = f"{'task':>8}{'seed':>5}{'at fork':>10}{'fast':>10}{'optuna':>10}"
    print(f"{head}{'fast med':>10}{'optuna med':>12}{'repeats':>9}{'fast s/ask':>12}{'optuna s/ask':>14}")
    gaps: dict[str, list[float]] = {"fast": [], "optuna": []}
    seconds: dict[str, list[float]] = {"fast": [], "optuna": []}
    wins = losses = closer = 0
    for task in tasks:
        best_known = lcbench.prepare(task).best_known
        for seed in range(args.seeds):
            r = run(task, seed, args.fork_at, args.trials)
            print(
                f"{task:>8}{seed:>5}{r['at_fork']:>10.4f}{r['fast']:>10.4f}{r['optuna']:>10.4f}"
                f"{r['fast_median']:>10.4f}{r['optuna_median']:>12.4f}"
                f"{int(r['fast_repeats']):>4}/{int(r['optuna_repeats']):<4}{r['fast_s']:>12.4f}{r['optuna_s']:>14.4f}"
            )
            for name in gaps:
                gaps[name].append(max(r[name] - best_known, 1e-9) / max(abs(best_known), 1e-9))
                seconds[name].append(r[f"{name}_s"])
            wins += r["fast"] < r["optuna"]
            losses += r["fast"] > r["optuna"]
            closer += r["fast_median"] < r["optuna_median"]
    print(f"\n{'side':>10}{'geo-mean relative gap to the best known':>42}{'median s/ask':>14}")
    for name in gaps:
        geo = math.exp(statistics.fmean(math.log(g) for g in gaps[name]))
        print(f"{name:>10}{geo:>42.4g}{statistics.median(seconds[name]):>14.4f}")
    decided = wins + losses
    tail = sum(math.comb(decided, k) for k in range(min(wins, losses) + 1))
    p = min(1.0, 2 * tail / 2**decided) if decided else 1.0
    ties = len(gaps["fast"]) - decided
    print(f"\nfast lower / higher final best: {wins}/{losses} (ties {ties}), sign test p = {p:.2g}")
    runs = len(gaps["fast"])
    print(
        f"fast's proposals better on the median (a proposal's loss after the fork): {closer} of {runs} runs"
    )


if __name__ == "__main__":
    main()
