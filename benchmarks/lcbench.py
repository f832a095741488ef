"""costtune against its peers on LCBench learning curves (../shared/benchmarks/PROTOCOL.md, v3).

One command per table:

    .venv/bin/python benchmarks/lcbench.py --data-dir ../shared/benchmarks/yahpo_lcbench --tasks dev
    .venv/bin/python benchmarks/lcbench.py --data-dir ../shared/benchmarks/yahpo_lcbench --tasks test
    ... --tasks test --workers 8        # 8 asynchronous workers, wall-clock hours to target

Settings are chosen on the dev tasks and reported on the test tasks (never chosen there).
Every method runs on the same tasks and seeds on ``--workers`` simulated asynchronous
workers (default 1); run ``seed`` of a task seeds every method's searchers and streams with
:func:`task_seed` (one seed per task and seed, the same for every method); every epoch is
charged its surrogate seconds at $2.50/h; the budget of a run is the 64-job reference grid's
cost. Targets per task: GRID = the grid's best epoch-52
val CE; TOP1 = the 1st percentile of epoch-52 val CE over 2,000 random configurations (rng
12345). A run that misses a target counts as the whole budget (1.0) in the geo-means.
Methods (``--methods``):

- ``grid``: the 64-job grid, every job to epoch 52;
- ``random``: random search (seed → a fixed configuration stream), every trial to epoch 52;
- ``costtune-hb``: that same stream through costtune's CostAwareHyperBand policy;
- ``costtune-hb-tpe``: the same policy with Optuna's TPE (default settings, univariate)
  asked and told in the loop — costtune's default sweep; the paired tests' reference;
- ``costtune-hb-outlook-tpe``: the same plus the outlook rule (policy/outlook.py);
  ``costtune-outlook-tpe``: the outlook rule without rungs;
- ``costtune-roi-tpe``, ``costtune-hb-roi-tpe``, ``costtune-hb-patience-tpe``: the
  marginal-ROI stopper (ε = 0.5 val CE per device-hour, chosen on LCBench dev tasks), alone,
  on top of the rungs, and its patience rule alone;
- ``costtune-pbt``: costtune's PBT decisions, an approximation on a surrogate (see
  :func:`run_pbt`);
- ``optuna-tpe-hb`` (HyperbandPruner(min_resource=1, max_resource=52)),
  ``optuna-tpe-hb-default`` (HyperbandPruner()), ``optuna-tpe-hb-5-52-5`` and
  ``optuna-tpe-sha-5-5``: Optuna's TPESampler (default settings) + a pruner, through
  Optuna's ask/tell (peers.py);
- ``dehb``, ``smac-hb``, ``synetune-bohb``, ``synetune-asha-cqr``: the multi-fidelity peers
  through their own packages, settings in peers.py (``pip install 'costtune[bench]'``);
- ``ray-asha``, ``ray-asha-rf5``, ``ray-hyperband``: Ray Tune's ASHAScheduler (defaults;
  reduction factor 5) and HyperBandScheduler run by Ray Tune itself on the replay trainable,
  on the same configuration stream as ``random`` / ``costtune-hb``, one trial at a time.

A variant of a costtune method takes a suffix: ``costtune-hb-tpe:g1e3b1pl`` = grace 1,
η 3, one bracket, promotion by loss (``pc`` cost share, ``pp`` Pareto); more below
(:func:`parse_variant`).

Per run: dollars and simulated wall-clock hours to each target (a failure when not reached
within the budget), the relative regret at budget ((best val CE seen − the best val CE at
any epoch of the 2,000 random and 64 grid configurations) ÷ that best), and the oracle floor
(the cheapest 52-epoch run among those configurations reaching the target). ``--out`` keeps
every run as CSV; ``--from`` re-prints the table of earlier CSVs.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import dataclasses
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers
from paired import bootstrap_interval, geo_mean, mcnemar, sign_test
from peers import PEER_SETTINGS, run_peer

from costtune.core.curves import Curve, curves_from_frame
from costtune.core.policy import (
    AsyncHyperband,
    Decision,
    MarginalRoiStopping,
    Member,
    Mutation,
    OutlookRule,
    OutlookStopping,
    StoppingRule,
    StopReason,
    choose_donor,
    explore,
    quantiles,
)
from costtune.core.policy.curve_model import outlook_multiple
from costtune.core.policy.hyperband import TrialState, bracket_weights
from costtune.core.simulate import simulate
from costtune.lcbench import LCBench, random_configs, reference_grid

#: protocol v3 (../shared/benchmarks/PROTOCOL.md): choose settings on DEV_TASKS, report on TEST_TASKS
DEV_TASKS = ("3945", "7593", "34539", "126025", "146212", "167190", "168330", "189909")
TEST_TASKS = ("126026", "126029", "167149", "167184", "167185", "167201", "168335", "168908")
#: the 18 usable tasks in neither set: a wider check (protocol v3: at >= 5 seeds)
WIDER_TASKS = (
    "167104", "167152", "167161", "167168", "167181", "167200", "168329", "168331", "168868",
    "168910", "189354", "189862", "189865", "189866", "189873", "189905", "189906", "189908",
)  # fmt: skip
USD_PER_HOUR = 2.50
REFERENCE = "costtune-hb-tpe"
DEFAULT_METHODS = (
    "grid",
    "random",
    "costtune-hb",
    "costtune-hb-tpe",
    "costtune-roi-tpe",
    "costtune-hb-roi-tpe",
    "costtune-pbt",
    "optuna-tpe-hb",
)
RAY_METHODS = ("ray-asha", "ray-asha-rf5", "ray-hyperband")
TARGETS = ("GRID", "TOP1")
#: simulated asynchronous workers per run (--workers); set per process by measure_task
WORKERS = 1
#: --stretch K: every curve is K times longer (module docstring); set per process by measure_task
STRETCH = 1
#: --spread: with --stretch K, each configuration's own factor in [1, K] (see :func:`stretch`):
#: "" (off), "random" or "lr"
SPREAD = ""
#: the epochs of a full run: 52, or 51 K + 1 stretched
MAX_EPOCHS = 52
#: --noise σ: every epoch's val CE × exp(σ z), z standard normal, fixed per (task,
#: configuration); set per process by measure_task (see :func:`noisy`)
NOISE = 0.0
#: --until-target: a run with a searcher in the loop stops asking for configurations once an
#: ended trial has reached every target (a peer's run ends at that epoch). Cost and time to
#: target are the same (the trace up to that point is unchanged); the rest of the budget,
#: its spend and regret, are not run.
UNTIL_TARGET = False
#: set by a run that --until-target stopped short of its budget
_stopped_short = False
#: the marginal-ROI stopper used on LCBench: stop a trial whose 5-epoch median val CE fell
#: by less than 0.5 per device-hour (≈ 0.0007 per 5 s epoch), or after 10 epochs without
#: a 0.001 improvement
ROI_RULE = StoppingRule(
    patience_epochs=10, min_delta=1e-3, min_slope_per_device_hour=0.5, window_epochs=5, min_epochs=5
)

#: the scale-free stopper: a trial stops when its smoothed improvement per dollar over 5
#: epochs falls below ρ × the sweep's average improvement per dollar (policy/stopping.py)
RELATIVE_RULE = StoppingRule(min_relative_roi=0.1, window_epochs=5, min_epochs=5)

#: patience alone (no slope threshold), to tell which half of ROI_RULE does the work
PATIENCE_RULE = StoppingRule(patience_epochs=10, min_delta=1e-3, window_epochs=5, min_epochs=5)

#: the protocol's search space, in its order; TPE samples it, PBT mutates within it
SPACE = {
    "batch_size": Mutation("logint", 16, 512),
    "learning_rate": Mutation("loguniform", 1e-4, 1e-1),
    "momentum": Mutation("uniform", 0.1, 0.99),
    "weight_decay": Mutation("loguniform", 1e-5, 1e-1),
    "num_layers": Mutation("int", 1, 5),
    "max_units": Mutation("logint", 64, 1024),
    "max_dropout": Mutation("uniform", 0.0, 1.0),
}
#: the hyperparameters the surrogate knows; SPACE may hold --unused ones beside them
RECORDED = tuple(SPACE)


def set_unused(n: int) -> None:
    """SPACE (and the peers' spaces) with ``n`` hyperparameters ``unused_0``… uniform in [0, 1]
    that no curve depends on: a searcher has to learn to ignore them (--unused N, set per
    process by measure_task)."""
    peers.UNUSED = n
    for name in [k for k in SPACE if k not in RECORDED]:
        del SPACE[name]
    SPACE.update({f"unused_{i}": Mutation("uniform", 0.0, 1.0) for i in range(n)})


#: what PBT may change mid-training: the optimiser's and regulariser's settings, not the
#: architecture (num_layers, max_units stay the donor's)
PBT_MUTABLE = {
    k: SPACE[k] for k in ("batch_size", "learning_rate", "momentum", "weight_decay", "max_dropout")
}

Trace = list[tuple[float, float, float]]  # (cumulative $, val CE, clock s) of every epoch in the order run


@dataclass
class Task:
    name: str
    budget: float
    grid_trace: Trace
    targets: dict[str, float]
    floor: dict[str, float]  # oracle floor $ per target
    best_known: float


_BENCH: LCBench | None = None


def bench(data_dir: str | None = None) -> LCBench:
    global _BENCH
    if _BENCH is None:
        _BENCH = LCBench(data_dir)
    return _BENCH


def stretched_epochs(k: int) -> int:
    """The epochs of a full run with every curve trained ``k`` times longer (52 when k = 1)."""
    return 51 * k + 1


def _config_rng(curve: Curve, salt: str) -> np.random.Generator:
    """A generator seeded by ``salt`` and the configuration's recorded values (not its id): every
    method's run of one configuration draws the same numbers."""
    key = repr(sorted((k, float(v)) for k, v in curve.hyperparameters.items() if k in RECORDED))
    return np.random.default_rng(zlib.crc32(f"{salt}|{key}".encode()))


def stretch(curve: Curve, k: int, task: str = "", spread: bool | str = False) -> Curve:
    """``curve`` trained ``k`` times longer: 51 k + 1 epochs in place of 52, the same total cost.

    Epoch e of the stretched curve is epoch u = 1 + (e - 1) / k of the recorded one (the loss
    interpolated linearly between recorded epochs), and costs 1/k of recorded epoch ⌈u⌉'s
    seconds; epoch 1 is the recorded epoch 1. The final loss, the best loss and the full run's
    cost are the recorded ones, so the grid's budget, the targets and the oracle floor do not
    change; a stretched epoch 5 is recorded epoch 2 when k = 4, where early ranks say less.

    ``spread`` (``--spread``): each configuration learns at its own pace, k_c = k^U, U uniform
    in [0, 1] drawn from a seed of the task and the configuration's values (the same for every
    method, unrelated to its hyperparameters, so no searcher can learn it). Epoch e is recorded
    epoch min(52, 1 + (e - 1) / k_c): a fast configuration reaches its recorded final loss at
    epoch 51 k_c + 1 and stays there to the run's 51 k + 1 epochs, as a run with a high learning
    rate flattens and then buys nothing. Epoch e costs what it costs without ``spread`` (1/k of
    recorded epoch ⌈1 + (e - 1) / k⌉'s seconds: the price of an epoch is the model's, not its
    pace), so a full run costs what it did; the final losses, the targets and the grid's budget
    are the recorded ones. Fast starters that plateau and slow ones that end best cross: early
    ranks say less.

    ``spread="lr"`` (``--spread lr``): the pace follows the learning rate, as real training's
    does: U = (log 0.1 − log lr) / (log 0.1 − log 1e-4), the protocol's learning-rate range,
    so the smallest learning rate learns k times slower and the largest at the recorded pace.
    Early ranks then err the same way in every run (a first rung keeps the large learning
    rates), and a searcher can learn the pace. On LCBench, where large learning rates mostly
    end best, that is the gentler of the two (benchmarks/RESULTS.md, stop 29).

    ``spread="trap"`` (``--spread trap``): the same pace the other way round, the largest
    learning rate k times slower and the smallest at the recorded pace. Not how training
    behaves, but the trap ``lr`` is not: on LCBench the large learning rates mostly end best, so
    here the configurations that end best are the slow starters and the fast starters end worst,
    and a first rung's ranks point the wrong way in every run.
    """
    if k == 1:
        return curve
    pace = float(k)
    if spread in ("lr", "trap"):
        low, high = SPACE["learning_rate"].low, SPACE["learning_rate"].high
        lr = float(np.clip(curve.hyperparameters["learning_rate"], low, high))
        slow = math.log(high / lr) / math.log(high / low)  # 1 at the smallest learning rate
        pace = float(k) ** (slow if spread == "lr" else 1.0 - slow)
    elif spread:
        pace = float(k) ** _config_rng(curve, f"spread|{task}").uniform()
    u = np.minimum(1.0 + np.arange(stretched_epochs(k)) / pace, curve.epochs)
    recorded = np.arange(1, curve.epochs + 1)
    # the price follows the clock of a k-times-longer run, whatever the pace: recorded epoch j
    # (j ≥ 2) is paid k times at 1/k of its seconds (the surrogate's seconds vary by epoch, so
    # pricing by the pace's recorded epoch would make a fast configuration's run cheaper or dearer)
    priced = 1.0 + np.arange(stretched_epochs(k)) / k
    seconds = curve.epoch_seconds[np.ceil(priced).astype(int) - 1] / k
    seconds[0] = curve.epoch_seconds[0]
    return dataclasses.replace(
        curve,
        val_loss=np.interp(u, recorded, curve.val_loss),
        epoch_seconds=seconds,
        extra={name: np.interp(u, recorded, v) for name, v in curve.extra.items()},
    )


def noisy(curve: Curve, sigma: float, task: str) -> Curve:
    """``curve`` as a real training run reports it: each epoch's val CE times exp(σ z).

    The surrogate's curves are smooth; a recorded one is not (a small validation set, SGD's
    randomness). z is standard normal, i.i.d. over epochs, and drawn from a seed of the task
    and the configuration's values: the same configuration has the same noisy curve in every
    method's run, as a recorded curve would. Targets and the oracle floor are computed on the
    noisy curves (the grid's best noisy epoch-52 loss; the 1st percentile of noisy finals), and
    any observed epoch reaching a target counts, a lucky dip included, for every method alike.
    """
    if sigma == 0:
        return curve
    rng = _config_rng(curve, task)
    factors = np.exp(sigma * rng.standard_normal(curve.epochs))
    return dataclasses.replace(curve, val_loss=curve.val_loss * factors)


def curves_of(task: str, configs: list[dict[str, float]], prefix: str = "") -> list[Curve]:
    configs = [{k: v for k, v in c.items() if k in RECORDED} for c in configs]  # not --unused ones
    recorded = curves_from_frame(bench().curves(task, configs)).values()
    curves = [noisy(stretch(c, STRETCH, task, SPREAD), NOISE, task) for c in recorded]
    return [dataclasses.replace(c, config_id=f"{prefix}{c.config_id}") for c in curves] if prefix else curves


def oracle_floor(candidates: list[Curve], target: float) -> float:
    """The dollars of the cheapest full run among ``candidates`` whose final loss reaches
    ``target``. With --noise, GRID's target is the grid's luckiest epoch, which no final loss
    may reach (--spread's flat tails draw hundreds of noisy epochs): then the cheapest full run
    among those whose curve reaches it at any epoch."""
    reaching = [c for c in candidates if c.val_loss[-1] <= target]
    reaching = reaching or [c for c in candidates if c.val_loss.min() <= target]
    return min(c.seconds_until(c.epochs) / 3600 * USD_PER_HOUR for c in reaching)


def prepare(task: str) -> Task:
    grid = curves_of(task, reference_grid(), prefix="grid-")
    pool = curves_of(task, random_configs(2000, 12345), prefix="pool-")
    grid_sim = simulate(grid, None, usd_per_device_hour=USD_PER_HOUR, workers=WORKERS)
    finals = np.array([c.val_loss[-1] for c in pool])
    targets = {"GRID": grid_sim.best_loss, "TOP1": float(np.percentile(finals, 1))}
    candidates = pool + grid
    floor = {name: oracle_floor(candidates, target) for name, target in targets.items()}
    return Task(
        name=task,
        budget=grid_sim.total_usd,
        grid_trace=sim_trace(grid_sim),
        targets=targets,
        floor=floor,
        best_known=float(min(c.val_loss.min() for c in candidates)),
    )


def random_stream(task: str, seed: int, chunk: int = 100) -> Iterator[Curve]:
    """Seed ``seed``'s random configurations, evaluated by the surrogate a chunk at a time."""
    configs = random_configs(20_000, 1000 + seed)
    for start in range(0, len(configs), chunk):
        yield from curves_of(task, configs[start : start + chunk], prefix=f"s{seed}-{start}-")


# ----------------------------------------------------------------------- methods
#: a variant's one-letter flags (see :func:`parse_variant`): letter → (keyword, value)
_FLAGS: dict[str, tuple[str, Any]] = {
    "x": ("tell_pruned", True),
    "m": ("multivariate", True),
    "u": ("multivariate", False),
    "w": ("wait_for_rungs", True),
    "v": ("tell_estimate", True),
    "L": ("constant_liar", True),
    "O": ("oracle_rungs", True),
    "G": ("gp", True),
    "T": ("oracle_tell", True),
    "s": ("spare_best", True),
    "d": ("tell_predicted", True),
    "R": ("value_transform", "rank"),
    "C": ("value_transform", "clip"),
    "X": ("expected", True),
    "Q": ("sobol_start", True),
    "K": ("fast_ask", True),
    "P": ("predicted_rungs", True),
    "B": ("believer", False),
    "J": ("escalate", True),
    "Y": ("guard_brackets", True),
    "D": ("dollar_grace", True),
    "Z": ("flat_guard", True),
    "I": ("noise_credit", True),
    "F": ("noise_veto", True),
    "V": ("noise_aware", True),
    "j": ("hedge", True),
    "!": ("tell_at_rung", True),
}


_REAL, _WHOLE = r"([0-9.]+)", r"([0-9]+)"
#: parse_variant's numbered letters: letter → (keyword, its number); ``a0``, ``W0`` and ``S0`` mean off (None)
_NUMBERED: dict[str, tuple[str, str]] = {
    "o": ("optimism", _REAL),
    "n": ("outlook_min_epochs", _WHOLE),
    "q": ("cheapest_of", _WHOLE),
    "r": ("relative_roi", _REAL),
    "a": ("lookahead", _WHOLE),
    "i": ("n_startup", _WHOLE),
    "U": ("n_random", _WHOLE),
    "N": ("n_local", _WHOLE),
    "E": ("cost_exponent", _REAL),
    "W": ("warmup_trials", _WHOLE),
    "M": ("smooth_rungs", _WHOLE),
    "H": ("rung_free_every", _WHOLE),
    "A": ("stall_min_gain", _REAL),
    "t": ("tell_at", _WHOLE),
    "z": ("random_every", _WHOLE),
    "h": ("rung_checks", _WHOLE),
    "y": ("probe_paces", _REAL),
    "S": ("misrank_min", _WHOLE),
    "f": ("forget_misled", _WHOLE),
    "l": ("judge_every_bracket", _WHOLE),
    "c": ("fidelity", _WHOLE),
    "@": ("longest_min", _WHOLE),
    "~": ("weak_rank_tau", _REAL),
    "^": ("misrank_tau", _REAL),
    "+": ("weak_rank_fit", _WHOLE),
    "%": ("model_check", _REAL),
    "=": ("oracle_stop_from", _WHOLE),
    "#": ("ratio_stop", _WHOLE),
    "&": ("tell_screen_at", _WHOLE),
}


def parse_variant(method: str) -> tuple[str, dict[str, Any]]:
    """``costtune-hb-tpe:g1e3b1pl`` → ("costtune-hb-tpe", {grace_epochs: 1, eta: 3, ...}).

    ``x`` (TPE methods): a trial that ended before epoch 52 is told to TPE as PRUNED with
    its last loss as an intermediate value (Optuna's way), not as a COMPLETE trial.
    ``m`` / ``u`` (TPE methods, Optuna peers too): multivariate / univariate TPE
    (``TPESampler(multivariate=True / False)``). costtune's rows default to univariate (as
    costtune's sweeps); the Optuna peers to Optuna's default, which in Optuna 5 is multivariate
    for a single objective.
    ``kf`` / ``kc``: rung keep floor / ceil; ``o2``: the outlook rule's optimism κ = 2; ``n6``:
    the outlook rule judges from epoch 6 on (after the first rung at 5).
    ``d`` (costtune-hb-tpe): a trial stopped before epoch 52 is told to TPE at its predicted
    final loss (its last loss less the median drop from that epoch to 52 of the trials the
    sweep finished, once three have), so that TPE compares trials at one fidelity.
    ``r<ρ>`` (costtune-hb-rel-tpe, costtune-rel-tpe): the scale-free relative-ROI stopper's ρ
    (RELATIVE_RULE; default 0.1); ``s``: it spares the trial holding the sweep's best.
    ``q<K>`` (costtune-hb-tpe): TPE proposes K configurations and the one predicted cheapest per
    epoch starts (``costtune.core.policy.epoch_cost``, learned from the epochs run so far).
    ``a<m>`` (any costtune-hb method): the scheduler's look-ahead between rungs, m trials of
    evidence (``AsyncHyperband(lookahead=m)``); ``a0``: off.
    ``X`` (costtune-hb-rel-tpe, costtune-rel-tpe): the relative stopper judges each trial by its
    expected gain of the sweep's best to the last epoch per dollar, from the curve model learned
    on the trials that got there (``StoppingRule(expected=True)``, policy/curve_model.py), not by
    its pace over the last window.
    ``Q`` (with ``G``): the GP's start-up trials at the first points of a scrambled Sobol
    sequence (``scipy.stats.qmc.Sobol``, seeded; log dimensions in log space) in place of
    random ones, enqueued in the study.
    ``K`` (with ``G``): every model-driven ask takes the GP's fast path, which by default starts
    past 200 trials (``CpuGPSampler(fast_from=0)``: a subset of at most 128 trials, and the
    acquisition's best of 320 candidates in place of Optuna's L-BFGS search).
    ``U<n>`` / ``N<n>`` (with ``K``): the fast ask's first round draws n uniform random
    candidates / n steps around the best trial (``fast_optimize``; defaults 128 / 64).
    ``B`` (with ``K``): with trials running, the fast ask searches Optuna's q-batch LogEI in
    place of the kriging believer's LogEI (``CpuGPSampler(believer=False)``).
    ``P`` (TPE methods, a prototype): the rungs rank each trial by its predicted loss at the last
    epoch (:class:`PredictedRungs`, the curve model of ``X`` on its curve so far).
    ``w`` (costtune-hb-rel-tpe): the stopper waits for the scheduler's last rung
    (``first_stop_epoch`` = 25): where rungs still judge a trial, the stopper does not.
    ``L`` (TPE methods, Optuna peers too): ``TPESampler(constant_liar=True)``, which Optuna
    advises when trials run in parallel (``--workers`` > 1): a running trial counts as a bad
    one, so parallel asks spread out.
    ``O`` (TPE methods): a diagnostic upper bound, not a method: the rungs rank each trial by
    the best loss its whole curve will reach (:class:`OracleRungs`); ``T``: TPE is told that
    loss for every trial, however early it stopped (a perfect curve model for the searcher).
    ``G`` (TPE methods, Optuna peers too): Optuna's ``GPSampler(seed)`` (a Gaussian-process
    searcher, defaults) in place of TPE, asked and told the same way. An Optuna peer tells a
    pruned trial as PRUNED, which the GP leaves out, as it does for any Optuna user.
    ``i<N>`` (with ``G``): the GP's random start-up trials (``n_startup_trials``; default 10).
    ``E<α>`` (with ``G``): the GP proposes by expected improvement per unit of cost^α, the cost
    a second GP's prediction of seconds per epoch, learned from the epochs the trials ran
    (``CpuGPSampler(cost_exponent=α)``).
    ``R`` / ``C`` (with ``G``): the GP fitted to warped values, their ranks through a Gaussian
    copula or the bad tail clipped at the Tukey fence (``CpuGPSampler(value_transform=...)``).
    ``W<w>`` (any costtune-hb method): the first rung promotes nobody until it holds w trials
    (``AsyncHyperband(warmup_trials=w)``); ``W0``: off.
    ``J`` (any costtune-hb method): every bracket that fits opens when the sweep stalls
    (``AsyncHyperband(escalate=True)``, a sweep's ``scheduler.escalate``, on by default since
    stop 31: the default row was ``costtune-hb-rel-tpe:r0.3sGCW10i5J`` until stop 35,
    ``costtune-hb-rel-tpe:r0.3sGCW10i5JV`` until stop 38, and is ``…JVj`` since); ``b<n>``: how
    many are open from the start.
    ``Y`` (costtune-hb-rel-tpe, a prototype): the stopper does not stop a trial of a later
    bracket before that bracket's first rung (:class:`BracketGuard`).
    ``D`` (costtune-hb-rel-tpe, a prototype): a trial meets its bracket's first rung at that
    rung's epochs or, sooner, once it has spent what that many epochs of the median trial cost
    (:class:`DollarGrace`): an expensive configuration is judged on fewer epochs.
    ``Z`` (costtune-hb-rel-tpe, a prototype): the flat-start guard of ``slow_starters.py``
    (:class:`slow_starters.FlatStartGuard`) around the policy and the stopper.
    ``V`` (costtune-hb-rel-tpe, costtune-rel-tpe): the relative stopper's stops wait while the
    window they judge cannot measure the gain that matters under the trial's own epoch noise
    (``StoppingRule(noise_aware=True)``, a sweep's ``stopping.noise_aware``, on by default since
    stop 35).
    ``F`` (the same methods, a prototype): stop 34's form of ``noise_aware`` (:class:`NoiseVeto`):
    a stop waits while the trial's noise could hide a worthwhile gain over its last window and
    the last half of its epochs, each window's gain credited with its standard error.
    ``I`` (the same methods, a prototype): stop 34's first form, the last window alone
    (:class:`NoiseVeto` with ``half_run=False``).
    ``H<k>`` (costtune-hb-rel-tpe, a prototype): every k-th trial starts in a bracket without
    rungs, judged by the stopper alone (:class:`RungFreeShare`; Hyperband's last bracket, open
    from the start).
    ``M<k>`` (TPE methods, a prototype): the rungs rank each trial by its lowest loss over its
    last k epochs (:class:`SmoothedRungs`), and the searcher is told that loss.
    ``A<f>`` (any costtune-hb method, with ``J``): the stall that opens the brackets ends only on a
    gain of the sweep's best of at least f × what the sweep had gained below its first loss
    (``AsyncHyperband(stall_min_gain=f)``; default 0: any gain ends it).
    ``t<k>`` (TPE methods, a prototype): the searcher is told every trial's loss at epoch k (or
    at its last epoch, if it ended sooner), not its last loss: one fidelity for every trial.
    ``z<k>`` (TPE methods, a prototype): every k-th model-driven trial starts at a uniform random
    point (seeded) in place of the searcher's proposal, as BOHB and SMAC interleave random
    configurations.
    ``j`` (any costtune-hb method, with ``J``): Hyperband's bracket without rungs among those a
    stall opens, the stopper's pace waiting for a later bracket's first rung (never, in that
    bracket), and every new trial going there once one of its trials is the sweep's best
    (``AsyncHyperband(hedge=True)``, a sweep's ``scheduler.hedge``). Stop 38 measured it first
    as a prototype written apart, ``H999999Y`` with a switch (the same decisions on LCBench's
    dev tasks and on ``slow_starters.py``'s tables; the commit before ``hedge`` has it).
    ``S<n>`` (any costtune-hb method, with ``J``): the brackets open also once n trials bracket 0's
    first rung kept reached its second rung with no more pairs of them in the same order there
    as at the first than reversed (``AsyncHyperband(misrank_min=n)``, on with n = 6 in every
    escalating sweep since stop 39); ``S0``: off, the default row before stop 39.
    ``f0`` (with ``G`` and ``j``): once the hedge has switched, the GP still fits every trial
    (the default row before stop 40); by default it fits only the trials that ran every epoch,
    as a sweep's searcher (``CpuGPSampler.forget_below``); ``f1`` is the default, spelt out.
    ``l0`` (with ``j``): only the full runs are judged against bracket 0's first rung at its epoch
    for the switch to full runs (``AsyncHyperband(judge_every_bracket=False)``, a sweep's
    ``scheduler.hedge_judges: full_runs``; the default row ``…JVj`` until stop 41 meant this);
    by default every later bracket's trials are (``l1``, spelt out; stop 41's option, the
    default since stop 42).
    ``c1`` (with ``G``): the GP models the loss over (configuration, epochs run), the epochs one
    more input (log e / log 52), and its expected improvement is searched at the last epoch
    (``CpuGPSampler(fidelity_epochs=52)``, MOBSTER's joint process, Klein et al. 2020): a trial
    the rungs stopped early says what it says of its configuration at that epoch, and the
    process learns how far that carries to the end; ``c0``: off (the default).
    ``@<n>`` (with ``G``): the GP fits only the trials that ran at least as many epochs as the
    n-th longest of those ended so far (BOHB's model on the largest budget with at least n
    observations; with the rungs' ties, a rung's epochs): once n trials passed the second rung,
    the losses trials were stopped at by the first no longer shape the process
    (``CpuGPSampler(longest_min=n)``); n at least the start-up trials (``i``).
    ``%<θ>`` (with ``G``): an ask whose process ranks its own trials, left out one at a time,
    with a Spearman correlation below θ takes univariate TPE's proposal instead
    (``CpuGPSampler(model_check=θ)``).
    ``~<θ>`` (any costtune-hb method, with ``J``; with ``G``): while the first rung's kept trials
    reach the second in an order whose Kendall τ with their first-rung order is below θ (at
    least ``S`` of them), the GP fits only the trials that ran as long as the ``S``-th longest
    that ended (``AsyncHyperband(weak_rank_tau=θ)``, read through ``searcher_min_epochs``): ``@``
    where the first rung's ranks are shown weak, every trial where they hold. ``+<n>`` (with
    ``~``): the n longest in place of ``S`` (``AsyncHyperband(weak_rank_fit=n)``; BOHB's d + 1 is 8
    on LCBench's 7 hyperparameters).
    ``^<θ>`` (any costtune-hb method, with ``J``): the brackets open once the first rung's kept
    trials reach the second with Kendall's τ ≤ θ (``AsyncHyperband(misrank_tau=θ)``; 0, the
    default, is ``S``'s rule: no more pairs in order than reversed).
    ``=<e>`` (TPE methods): a diagnostic upper bound, not a method: past epoch e, a trial stops
    once nothing left of its curve beats the lowest loss any trial has shown (:class:`OracleStop`,
    a perfect predictive termination against the incumbent).
    ``!`` (TPE methods, a diagnostic): a trial that ended before the first rung's epoch is
    told to the searcher at its loss there, as if it had run to the rung: with ``=e`` or ``#n``,
    the searcher learns what it would have learnt without the early stop, and the dollars alone
    differ.
    ``&<k>`` (TPE methods, a prototype): a trial that ended by the first rung's epoch (a screen
    the rungs or the stopper ended) is told to the searcher at its loss at epoch k, not its
    last: screens told where they stood earlier, worse, so the searcher's model sets them further
    apart from the trials that went on.
    ``#<n>`` (TPE methods, a prototype): a trial stops at epoch k once even the largest fall after
    epoch k of the n or more trials that ended past epoch 25 would leave it above the lowest loss
    any trial has shown (:class:`RatioStop`); ``#<n><hh>`` (n ≥ 1, hh two digits): past epoch hh.
    ``v``: a trial the look-ahead pruned is told to TPE at its estimated loss at the rung
    (``AsyncHyperband.rung_estimate``), not at its last loss.
    """
    base, _, spec = method.partition(":")
    kwargs: dict[str, Any] = {key: value for letter, (key, value) in _FLAGS.items() if letter in spec}
    for letter, (key, number) in _NUMBERED.items():
        for value in re.findall(re.escape(letter) + number, spec):
            if letter in "UN":  # the fast ask's first round
                kwargs.setdefault("fast_search", {})[key] = int(value)
            elif number == _REAL:
                kwargs[key] = float(value)
            else:
                kwargs[key] = None if letter in "aWS" and int(value) == 0 else int(value)
    numbered = "|".join(re.escape(letter) + number[1:-1] for letter, (_, number) in _NUMBERED.items())
    spec = re.sub(numbered + "|[" + "".join(_FLAGS) + "]", "", spec)
    unknown = re.sub(r"([gebpk])([0-9]+|[lcpf])", "", spec)
    if unknown:  # a mistyped or retired letter would otherwise run the plain method silently
        raise ValueError(f"--methods: {method!r}: unknown variant {unknown!r} (see parse_variant)")
    for key, value in re.findall(r"([gebpk])([0-9]+|[lcpf])", spec):
        if key == "k":
            kwargs["keep"] = {"c": "ceil", "f": "floor"}[value]
        elif key == "p":
            kwargs["promotion"] = {"l": "loss", "c": "cost_share", "p": "pareto"}[value]
        else:
            kwargs[{"g": "grace_epochs", "e": "eta", "b": "brackets"}[key]] = int(value)
    return base, kwargs


def sim_trace(sim) -> Trace:  # type: ignore[no-untyped-def]
    return [(e.sweep_usd, e.val_loss, e.clock_s) for e in sim.epochs]


def suggest(trial) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """A configuration from an Optuna trial, over the protocol's search space (SPACE)."""
    out = {}
    for name, m in SPACE.items():
        log = m.kind.startswith("log")
        if m.kind.endswith("int"):
            out[name] = trial.suggest_int(name, int(m.low), int(m.high), log=log)
        else:
            out[name] = trial.suggest_float(name, m.low, m.high, log=log)
    return out


def run_tpe_loop(
    task: Task,
    seed: int,
    policy: AsyncHyperband | None,
    stopping: MarginalRoiStopping | None,
    tell_pruned: bool = False,
    multivariate: bool = False,
    outlook: OutlookStopping | None = None,
    cheapest_of: int = 1,
    tell_predicted: bool = False,
    tell_estimate: bool = False,
    constant_liar: bool = False,
    oracle_rungs: bool = False,
    oracle_tell: bool = False,
    oracle_stop_from: int = 0,
    ratio_stop: int = 0,
    tell_at_rung: bool = False,
    tell_screen_at: int = 0,
    gp: bool = False,
    n_startup: int = 10,
    cost_exponent: float = 0.0,
    value_transform: str | None = None,
    sobol_start: bool = False,
    fast_ask: bool = False,
    fast_search: dict[str, int] | None = None,
    predicted_rungs: bool = False,
    believer: bool = True,
    smooth_rungs: int = 0,
    tell_at: int = 0,
    random_every: int = 0,
    forget_misled: bool = True,
    fidelity: bool = False,
    longest_min: int | None = None,
    model_check: float | None = None,
) -> Trace:
    """A costtune policy on the simulator with Optuna's TPE asked and told in the loop.

    ``cheapest_of`` K > 1: TPE is asked for K configurations and the one predicted cheapest
    per epoch (costtune.search.CostModelKNN on the epochs run so far) starts; the others are
    told FAILED (TPE ignores them).
    """
    import optuna
    from optuna_forks.gp import COST_ATTR, EPOCHS_ATTR, CpuGPSampler
    from optuna_forks.pools import gp_sampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=f"costtune-{task.name}-{seed}",
        sampler=gp_sampler(
            seed,
            n_startup_trials=n_startup,
            cost_exponent=cost_exponent,
            value_transform=value_transform,
            fast_from=0 if fast_ask else None,
            fast_search=fast_search,
            believer=believer,
            fidelity_epochs=MAX_EPOCHS if fidelity else None,
            longest_min=longest_min,
            model_check=model_check,
        )
        if gp
        else optuna.samplers.TPESampler(seed=seed, multivariate=multivariate, constant_liar=constant_liar),
    )

    def point_at(row: Any) -> dict[str, Any]:
        point = {}
        for u, (name, m) in zip(row, SPACE.items(), strict=True):
            lo, hi = (math.log(m.low), math.log(m.high)) if m.kind.startswith("log") else (m.low, m.high)
            x = lo + float(u) * (hi - lo)
            x = math.exp(x) if m.kind.startswith("log") else x
            point[name] = min(max(round(x), int(m.low)), int(m.high)) if m.kind.endswith("int") else x
        return point

    if sobol_start:  # the start-up trials at scrambled Sobol points in place of random ones
        from scipy.stats import qmc

        for row in qmc.Sobol(len(SPACE), scramble=True, seed=seed).random(n_startup):
            study.enqueue_trial(point_at(row))
    interleave = np.random.default_rng([seed, 7])  # random_every's points
    asked: dict[str, optuna.Trial] = {}
    from costtune.core.policy.epoch_cost import EpochCostModel

    costs = EpochCostModel(SPACE)
    finished: list[Curve] = []
    configs: dict[str, dict[str, float]] = {}

    hardest = min(task.targets.values())
    best_seen = math.inf  # the lowest loss any ended trial showed
    first_rung = policy.rungs_by_bracket[0][0] if policy is not None else MAX_EPOCHS

    def next_curve() -> Curve | None:
        global _stopped_short
        if UNTIL_TARGET and best_seen <= hardest:
            _stopped_short = True
            return None
        if cheapest_of > 1 and costs.ready():
            proposals = [study.ask() for _ in range(cheapest_of)]
            params = [suggest(t) for t in proposals]
            best = costs.cheapest(params)
            for i, t in enumerate(proposals):
                if i != best:
                    study.tell(t, state=optuna.trial.TrialState.FAIL)
            trial, config = proposals[best], params[best]
        else:
            model_driven = len(study.trials) - n_startup
            if random_every and model_driven >= 0 and model_driven % random_every == random_every - 1:
                study.enqueue_trial(point_at(interleave.uniform(size=len(SPACE))))
            trial = study.ask()
            config = suggest(trial)
        curve = curves_of(task.name, [config], prefix=f"t{trial.number}-")[0]
        asked[curve.config_id] = trial
        configs[curve.config_id] = config
        by_id[curve.config_id] = curve
        return curve

    by_id: dict[str, Curve] = {}

    def on_trial_end(config_id: str, epoch: int, loss: float) -> None:
        nonlocal best_seen
        best_seen = min(best_seen, float(by_id[config_id].val_loss[:epoch].min()))
        costs.observe(configs[config_id], float(by_id[config_id].epoch_seconds[:epoch].mean()))
        trial = asked.pop(config_id)
        curve = by_id[config_id]
        trial.set_user_attr(COST_ATTR, float(curve.epoch_seconds[:epoch].mean()))
        trial.set_user_attr(EPOCHS_ATTR, epoch)
        if forget_misled and policy is not None and isinstance(study.sampler, CpuGPSampler):
            # as a sweep's searcher (costtune.search)
            study.sampler.forget_below(policy.searcher_min_epochs())
        if epoch >= MAX_EPOCHS:
            finished.append(curve)
        estimate = policy.rung_estimate(config_id) if tell_estimate and policy is not None else None
        if oracle_tell:
            study.tell(trial, float(curve.val_loss.min()))
        elif tell_at_rung and epoch < first_rung:  # as if it had run to the first rung
            study.tell(trial, float(curve.val_loss[first_rung - 1]))
        elif tell_screen_at and epoch <= first_rung:  # a screen: its loss at an earlier epoch
            study.tell(trial, float(curve.val_loss[min(tell_screen_at, epoch) - 1]))
        elif estimate is not None:
            study.tell(trial, estimate)
        elif tell_pruned and epoch < MAX_EPOCHS:
            trial.report(loss, epoch)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        elif tell_predicted and epoch < MAX_EPOCHS and len(finished) >= 3:
            # the loss it would likely have ended at: its own, less the median drop from this
            # epoch to the last that the sweep's finished trials showed
            drops = sorted(float(c.val_loss[epoch - 1] - c.val_loss[MAX_EPOCHS - 1]) for c in finished)
            study.tell(trial, loss - drops[len(drops) // 2])
        elif tell_at:  # one fidelity for every trial: its loss at epoch tell_at, or at its end if sooner
            study.tell(trial, float(curve.val_loss[min(tell_at, epoch) - 1]))
        elif smooth_rungs and isinstance(policy, SmoothedRungs):
            study.tell(trial, policy.smoothed(config_id))
        else:
            study.tell(trial, loss)

    if smooth_rungs and policy is not None:
        policy = SmoothedRungs(policy, smooth_rungs)  # type: ignore[assignment]
    if oracle_rungs and policy is not None:
        policy = OracleRungs(policy, by_id)  # type: ignore[assignment]
    if oracle_stop_from and policy is not None:
        policy = OracleStop(policy, by_id, oracle_stop_from)  # type: ignore[assignment]
    if ratio_stop and policy is not None:
        n, horizon = divmod(ratio_stop, 100) if ratio_stop >= 100 else (ratio_stop, 25)
        policy = RatioStop(policy, n, horizon)  # type: ignore[assignment]
    if predicted_rungs and policy is not None:
        policy = PredictedRungs(policy)  # type: ignore[assignment]
    return sim_trace(
        simulate(
            [],
            policy,
            stopping=stopping,
            usd_per_device_hour=USD_PER_HOUR,
            budget_usd=task.budget,
            workers=WORKERS,
            outlook=outlook,
            next_curve=next_curve,
            on_trial_end=on_trial_end,
        )
    )


class RungFreeShare(AsyncHyperband):
    """A prototype: every ``every``-th trial goes to a bracket without rungs, judged by the
    stopper alone (Hyperband's most conservative bracket, open from the start); the others as
    the policy assigns them. On a stall (``escalate``) every bracket opens, this one included."""

    def __init__(self, max_epochs: int, every: int, **kwargs: Any) -> None:
        super().__init__(max_epochs, **kwargs)
        self.every = every
        self.rungs_by_bracket.append([])
        self.rungs.append({})
        self.added = 0

    def on_add(self, trial_id: str) -> int:
        if trial_id in self.trials:
            return self.trials[trial_id].bracket
        self.added += 1
        if self.added % self.every:
            return super().on_add(trial_id)
        bracket = len(self.rungs_by_bracket) - 1
        self.trials[trial_id] = TrialState(bracket=bracket)
        self.version += 1
        return bracket


class RungProbe(AsyncHyperband):
    """A prototype: a first rung that checks itself. A bracket-0 trial the first rung prunes by
    rank (not in its warm-up) while its curve is still falling fast (its loss less ``paces``
    times its fall over its last doubling of epochs is below the best loss at the rung; by
    default the outlook's paces to the last epoch, :func:`costtune.core.policy.curve_model.
    outlook_multiple`) is spared as a *probe*, judged by the stopper alone, one probe at a time.
    A probe better at some epoch than every trial the rung promoted was at that epoch has shown
    that the rung prunes what ends best: every bracket opens (as on a stall, with ``escalate``)
    and probing goes on. A probe whose pace no longer promises to beat the sweep's best, or that
    ends, without that is a failure; after ``failures`` of them, and none that contradicted the
    rung, nothing more is probed. Written apart from the product's ``rung_checks``
    (``AsyncHyperband(rung_checks=...)``, flag ``h<c>``), which makes the same decisions with
    one pace (flag ``h<c>y1``; tests/test_benchmark_scripts.py)."""

    def __init__(self, max_epochs: int, failures: int = 2, paces: float | None = None, **kwargs: Any) -> None:
        super().__init__(max_epochs, **kwargs)
        self.failures_left = failures
        #: how many more paces (its fall over its last doubling of epochs) a trial is credited with
        self.paces = outlook_multiple(self.rungs_by_bracket[0][0], max_epochs) if paces is None else paces
        self.early: dict[str, dict[int, float]] = {}
        self.probe: str | None = None
        self.contradicted = False
        self.others_best = math.inf
        #: by epoch, the best loss of the trials the first rung promoted (bracket 0, past it)
        self.promoted_best: dict[int, float] = {}
        self.probes: list[list[Any]] = []  # [trial, contradicted] per probe

    def on_result(self, trial_id: str, epoch: int, loss: float, cost_usd: float) -> Decision:
        first = self.rungs_by_bracket[0][0]
        if trial_id == self.probe:
            state = self.trials[trial_id]
            state.epochs = max(state.epochs, epoch)
            if self.escalate:
                self._track(trial_id, float(loss), float(cost_usd))
            curve = self.early.setdefault(trial_id, {})
            curve[epoch] = loss
            half = curve.get(epoch // 2)
            if (
                not self.probes[-1][1]
                and half is not None
                and loss - self.paces * max(half - loss, 0.0) >= self.others_best
            ):  # a probe whose pace no longer promises to beat the sweep's best ends: a failure
                state.stop_reason = StopReason.RUNG_PRUNED
                self.on_end(trial_id)
                return Decision.STOP
            if loss < self.promoted_best.get(epoch, -math.inf) and not self.probes[-1][1]:
                self.probes[-1][1] = True
                if not self.contradicted and self.escalate:
                    self.open_brackets = len(self.rungs_by_bracket)
                    self._weights = bracket_weights(self.open_brackets, self.eta)
                    self._wrr = [0] * self.open_brackets
                self.contradicted = True
            if epoch >= self.max_epochs:
                state.stop_reason = StopReason.COMPLETED
                self.on_end(trial_id)
                return Decision.STOP
            return Decision.CONTINUE
        self.others_best = min(self.others_best, loss)
        if trial_id in self.trials and self.trials[trial_id].bracket == 0 and epoch > first:
            self.promoted_best[epoch] = min(self.promoted_best.get(epoch, math.inf), loss)
        if epoch <= first:
            self.early.setdefault(trial_id, {})[epoch] = loss
        decision = super().on_result(trial_id, epoch, loss, cost_usd)
        state = self.trials[trial_id]
        rung = self.rungs[0].get(first)
        if (
            decision is Decision.STOP
            and state.bracket == 0
            and epoch == first
            and state.stop_reason is StopReason.RUNG_PRUNED
            and rung is not None
            and (self.warmup_trials is None or len(rung) >= self.warmup_trials)
            and self.probe is None
            and (self.contradicted or self.failures_left > 0)
        ):
            before = self.early.get(trial_id, {}).get(first // 2)
            if before is not None:
                drop = max(before - loss, 0.0)
                if loss - self.paces * drop < rung.nth_loss(0):
                    state.stop_reason = None
                    self.probe = trial_id
                    self.probes.append([trial_id, False])
                    return Decision.CONTINUE
        if epoch >= first and trial_id != self.probe:
            self.early.pop(trial_id, None)
        return decision

    def on_end(self, trial_id: str, reason: Any = None) -> None:
        if reason is None:
            super().on_end(trial_id)
        else:
            super().on_end(trial_id, reason)
        if trial_id == self.probe:
            self.probe = None
            if not self.probes[-1][1] and not self.contradicted:
                self.failures_left -= 1


class DollarGrace(AsyncHyperband):
    """A prototype: a trial meets its bracket's first rung at that rung's epochs or, sooner, once
    it has spent what that many epochs cost the sweep's median trial (the median of the trials'
    first-epoch dollars so far), whichever comes first; later rungs are by epochs. An expensive
    configuration is judged on fewer epochs, for the dollars a typical one's first rung costs."""

    def __init__(self, max_epochs: int, **kwargs: Any) -> None:
        super().__init__(max_epochs, **kwargs)
        self.first_epoch_usd: list[float] = []

    def on_result(self, trial_id: str, epoch: int, loss: float, cost_usd: float) -> Any:
        if epoch == 1:
            bisect.insort(self.first_epoch_usd, float(cost_usd))
        state = self.trials.get(trial_id)
        ladder = self.rungs_by_bracket[state.bracket if state is not None else 0]
        typical = statistics.median(self.first_epoch_usd) if self.first_epoch_usd else math.inf
        if ladder and epoch < ladder[0] and cost_usd >= ladder[0] * typical:
            epoch = ladder[0]  # judged at the first rung now
        return super().on_result(trial_id, epoch, loss, cost_usd)


class NoiseVeto:
    """The relative rule as it is, but a stop it calls is vetoed while the trial's own epoch
    noise could hide a worthwhile gain over both its last window and (``half_run``) the last
    half of its epochs. Each window's gain is credited with its standard error under the trial's
    noise (``epoch_noise``); the stop stands if either window, so credited, still bought less
    than ρ × the sweep's average per dollar. The long window's dollars dilute the credit: a flat
    noisy trial is stopped once it has spent enough for its noise not to hide the gain that
    matters, and a slow improver is judged by its pace over half its run. A curve without noise
    is judged as without it.

    With ``half_run`` (flag ``F``) this is stop 34's ``stopping.noise_aware``; without, the last
    window alone (flag ``I``), stop 34's first form, which credited the window's gain with its
    standard error and so stopped nothing on noisy curves. With ``measurable`` it is the rule a
    sweep's ``stopping.noise_aware`` runs now, written apart from it (a test holds the two to
    the same stops; flag ``V`` runs the product's): a window's gain is evidence when its
    standard error is below the gain that matters; a stop called on a window that is not is
    decided on the last half of the epochs if that is, and waits if neither is; a trial risen
    more than three standard errors above its best is stopped as without the veto."""

    def __init__(
        self, stopping: MarginalRoiStopping, half_run: bool = True, measurable: bool = False
    ) -> None:
        self._stopping = stopping
        self._half_run = half_run
        self._measurable = measurable
        self._raw: dict[str, list[float]] = {}

    def on_result(self, trial_id: str, loss: float, hours: float, usd: float) -> Any:
        from costtune.core.policy.stopping import _MEDIAN_SE, epoch_noise

        said = self._stopping.on_result(trial_id, loss, hours, usd)
        rule = self._stopping.rule
        w = rule.window_epochs
        raw = self._raw.setdefault(trial_id, [])
        if not math.isnan(loss):
            raw.append(loss)
            del raw[: -(2 * w + 2)]
        if said is None or rule.min_relative_roi is None:
            return said
        credit = epoch_noise(raw) * _MEDIAN_SE * math.sqrt(2 / w)
        c = self._stopping._curves[trial_id]
        n = len(c.best_smooth)
        target = rule.min_relative_roi * self._stopping.sweep_rate
        if self._measurable:
            if statistics.median(c.losses) - c.best_smooth[-1] > 3 * credit:
                return said  # risen well beyond its noise above its best: no gain hides there
            for span in (w, max(w, n // 2)):
                if n <= span:
                    continue
                dollars = c.usd[-1] - c.usd[-1 - span]
                if credit < target * dollars:  # this window can measure a worthwhile gain
                    if span == w or (c.best_smooth[-1 - span] - c.best_smooth[-1]) < target * dollars:
                        return said
                    break
            return None  # neither window can, or the half run's pace is worth it
        for span in (w, max(w, n // 2)) if self._half_run else (w,):
            if n <= span:
                continue
            gained = c.best_smooth[-1 - span] - c.best_smooth[-1]
            dollars = c.usd[-1] - c.usd[-1 - span]
            if dollars > 0 and (gained + credit) / dollars < target:
                return said  # shown too slow even with its noise
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stopping, name)


class BracketGuard:
    """A prototype: the stopper does not stop a trial of a later bracket before that bracket's
    first rung (which is what the bracket is for); it still sees every epoch."""

    def __init__(self, stopping: MarginalRoiStopping, policy: AsyncHyperband) -> None:
        self._stopping = stopping
        self._policy = policy
        self._epochs: dict[str, int] = {}

    def on_result(self, trial_id: str, loss: float, hours: float, usd: float) -> Any:
        epochs = self._epochs[trial_id] = self._epochs.get(trial_id, 0) + 1
        said = self._stopping.on_result(trial_id, loss, hours, usd)
        state = self._policy.trials.get(trial_id)
        if said is not None and state is not None and state.bracket > 0:
            ladder = self._policy.rungs_by_bracket[state.bracket]
            if epochs < (ladder[0] if ladder else MAX_EPOCHS):
                return None
        return said

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stopping, name)


class OracleRungs:
    """A diagnostic, not a method: the policy sees each trial's best loss over all 52 epochs
    in place of its loss so far, so its rungs rank by where a curve will end (a perfect
    curve model). The stopper and the searcher still see the real losses."""

    def __init__(self, policy: AsyncHyperband, curves: dict[str, Curve]) -> None:
        self._policy = policy
        self._curves = curves

    def on_result(self, config_id: str, epoch: int, loss: float, cost_usd: float) -> Any:
        return self._policy.on_result(
            config_id, epoch, float(self._curves[config_id].val_loss.min()), cost_usd
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)


class OracleStop:
    """A diagnostic, not a method: past epoch ``after``, a trial stops as soon as nothing left
    of its curve will beat the lowest loss any trial has shown so far, its own included: a
    perfect predictive termination against the incumbent (Domhan et al. 2015's rule with a
    perfect curve model). It never stops a trial that will reach a target the sweep has not
    (the incumbent is above it). The rungs, the stopper and the searcher see the real losses."""

    def __init__(self, policy: AsyncHyperband, curves: dict[str, Curve], after: int) -> None:
        self._policy = policy
        self._curves = curves
        self._after = after
        self._best = math.inf
        self.stops = 0

    def on_result(self, config_id: str, epoch: int, loss: float, cost_usd: float) -> Any:
        said = self._policy.on_result(config_id, epoch, loss, cost_usd)
        self._best = min(self._best, loss)
        rest = self._curves[config_id].val_loss[epoch:]
        if said is Decision.STOP or epoch <= self._after or len(rest) == 0:
            return said
        if float(rest.min()) >= self._best:
            self.stops += 1
            return Decision.STOP
        return said

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)


class RatioStop:
    """A prototype: a trial stops at epoch k once even the largest fall the sweep has seen after
    epoch k would not take it below the lowest loss any trial has shown. The falls are those of
    the trials that ended past ``horizon`` epochs: each one's best loss ÷ its loss at epoch k,
    the lowest of these ratios the most optimistic. Judged once ``evidence`` such trials ended;
    the sweep's own curves say how far a curve still falls, so slow curves judge themselves
    leniently. The rungs, the stopper and the searcher see the real losses."""

    def __init__(self, policy: AsyncHyperband, evidence: int, horizon: int = 25) -> None:
        self._policy = policy
        self._evidence = evidence
        self._horizon = horizon
        self._best = math.inf
        self._losses: dict[str, list[float]] = {}
        self._falls: list[list[float]] = []  # per long trial ended: best ÷ loss at epoch k
        self.stops = 0

    def on_result(self, config_id: str, epoch: int, loss: float, cost_usd: float) -> Any:
        said = self._policy.on_result(config_id, epoch, loss, cost_usd)
        self._losses.setdefault(config_id, []).append(loss)
        self._best = min(self._best, loss)
        if said is Decision.STOP:
            return said
        ratios = [f[epoch - 1] for f in self._falls if len(f) >= epoch]
        if len(ratios) >= self._evidence and loss * min(ratios) >= self._best:
            self.stops += 1
            return Decision.STOP
        return said

    def on_end(self, config_id: str, reason: Any) -> None:
        losses = self._losses.get(config_id, [])
        if len(losses) >= self._horizon:
            best = min(losses)
            self._falls.append([best / x if x > 0 else 1.0 for x in losses])
        self._policy.on_end(config_id, reason)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)


class SmoothedRungs:
    """A prototype: the policy sees each trial's lowest loss over its last ``k`` epochs, not its
    last epoch's: on a noisy curve one lucky or unlucky validation pass no longer decides a
    rung (on a falling noiseless curve the two are the same). The stopper sees the real
    losses; the searcher is told the same smoothed loss when the trial ends."""

    def __init__(self, policy: AsyncHyperband, k: int) -> None:
        self._policy = policy
        self._k = k
        self._raw: dict[str, list[float]] = {}

    def smoothed(self, config_id: str) -> float | None:
        raw = self._raw.get(config_id)
        return min(raw[-self._k :]) if raw else None

    def on_result(self, config_id: str, epoch: int, loss: float, cost_usd: float) -> Any:
        self._raw.setdefault(config_id, []).append(loss)
        return self._policy.on_result(config_id, epoch, min(self._raw[config_id][-self._k :]), cost_usd)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)


class PredictedRungs:
    """A prototype: the policy sees each trial's predicted loss at the last epoch (the median
    of ``curve_model.final_losses`` on its smoothed curve so far, the references the smoothed
    curves of the trials that reached the last epoch), not its loss so far, so its rungs rank
    by where the curve model says each curve ends. Nothing of the future is read. The stopper
    and the searcher still see the real losses."""

    def __init__(self, policy: AsyncHyperband, window: int = 5) -> None:
        self._policy = policy
        self._window = window
        self._raw: dict[str, list[float]] = {}
        self._smooth: dict[str, list[float]] = {}
        self._references: list[list[float]] = []

    def on_result(self, config_id: str, epoch: int, loss: float, cost_usd: float) -> Any:
        from costtune.core.policy.curve_model import final_losses

        raw = self._raw.setdefault(config_id, [])
        raw.append(loss)
        smooth = self._smooth.setdefault(config_id, [])
        m = statistics.median(raw[-self._window :])
        smooth.append(min(m, smooth[-1]) if smooth else m)
        if len(smooth) == MAX_EPOCHS:
            self._references.append(list(smooth))
        finals = sorted(final_losses(smooth, self._references, MAX_EPOCHS))
        return self._policy.on_result(config_id, epoch, finals[len(finals) // 2], cost_usd)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)


def run_stream(task: Task, seed: int, policy: AsyncHyperband | None) -> Trace:
    stream = random_stream(task.name, seed)
    return sim_trace(
        simulate(
            [],
            policy,
            usd_per_device_hour=USD_PER_HOUR,
            budget_usd=task.budget,
            workers=WORKERS,
            next_curve=lambda: next(stream),
        )
    )


def run_pbt(task: Task, seed: int, population: int = 8, interval: int = 4) -> Trace:
    """costtune's PBT decisions (policy/pbt.py: quantiles, cheaper donors likelier, explore).

    An approximation the surrogate forces: it predicts a curve per fixed configuration, so a
    member that exploits a donor at epoch e and explores a new configuration continues on
    the new configuration's curve from epoch e + 1 (its history is taken to matter only
    through the epoch count). That flatters PBT: a new configuration is seen at epoch e + 1
    for the price of the epochs it actually ran. Only non-architectural hyperparameters
    (PBT_MUTABLE) change, which keeps the new configuration near the donor's. Generations
    run round-robin on one worker; when a population reaches epoch 52 with budget left, a
    fresh population starts from the stream.
    """
    rng = random.Random(seed)
    stream = random_stream(task.name, seed)
    spent = 0.0
    trace: Trace = []
    while spent < task.budget:
        members = {f"m{i}": next(stream) for i in range(population)}
        epoch = 0
        while epoch < MAX_EPOCHS and spent < task.budget:
            last = min(epoch + interval, MAX_EPOCHS)
            losses: dict[str, float] = {}
            for name, curve in members.items():
                for e in range(epoch + 1, last + 1):
                    spent += curve.epoch_seconds[e - 1] / 3600 * USD_PER_HOUR
                    losses[name] = float(curve.val_loss[e - 1])
                    trace.append((spent, losses[name], math.nan))  # one worker, no clock kept
                    if spent >= task.budget:
                        return trace
            epoch = last
            per_epoch = {
                n: float(c.epoch_seconds[:epoch].mean()) / 3600 * USD_PER_HOUR for n, c in members.items()
            }
            ranked = [Member(n, losses[n], per_epoch[n]) for n in members]
            bottom, top = quantiles(ranked, 0.25)
            top_members = [m for m in ranked if m.trial_id in top]
            for name in bottom:
                donor = choose_donor(top_members, rng)
                config, _ = explore(members[donor].hyperparameters, PBT_MUTABLE, rng)
                members[name] = curves_of(task.name, [config], prefix=f"pbt-{name}-{epoch}-")[0]
    return trace


#: Optuna's pruners as a competent user sets them (protocol v3) and Optuna's defaults
OPTUNA_PRUNERS: dict[str, tuple[str, dict[str, Any]]] = {
    "optuna-tpe-hb": ("HyperbandPruner", {"min_resource": 1, "max_resource": 52}),
    "optuna-tpe-hb-5-52-5": (
        "HyperbandPruner",
        {"min_resource": 5, "max_resource": 52, "reduction_factor": 5},
    ),
    "optuna-tpe-sha-5-5": ("SuccessiveHalvingPruner", {"min_resource": 5, "reduction_factor": 5}),
    "optuna-tpe-hb-default": ("HyperbandPruner", {}),
}


def _until(task: Task) -> float | None:
    """--until-target: a peer's run ends at the first epoch that reaches every target."""
    return min(task.targets.values()) if UNTIL_TARGET else None


def run_optuna(
    task: Task,
    seed: int,
    method: str = "optuna-tpe-hb",
    multivariate: bool | None = None,
    constant_liar: bool = False,
    gp: bool = False,
) -> Trace:
    """Optuna's TPE (its default sampler, or ``multivariate`` set; ``gp``: its GPSampler) + a
    pruner (OPTUNA_PRUNERS) through Optuna's ask/tell."""
    import optuna

    name, kwargs = OPTUNA_PRUNERS[method]
    kwargs = {k: MAX_EPOCHS if k == "max_resource" else v for k, v in kwargs.items()}  # --stretch
    return run_peer(
        method,
        lambda config: curves_of(task.name, [config])[0],
        seed,
        task.budget,
        USD_PER_HOUR,
        workers=WORKERS,
        optuna_pruner=getattr(optuna.pruners, name)(**kwargs),
        suggest=suggest,
        multivariate=multivariate,
        constant_liar=constant_liar,
        gp=gp,
        stop_below=_until(task),
    )


def run_ray(task: Task, seed: int, method: str, stream_length: int = 1500) -> Trace:
    """A Ray Tune scheduler run by Ray Tune on the replay trainable, one trial at a time."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, HyperBandScheduler

    from costtune.trainables.replay import replay

    scheduler = {
        "ray-asha": lambda: ASHAScheduler(max_t=52),
        "ray-asha-rf5": lambda: ASHAScheduler(max_t=52, reduction_factor=5),
        "ray-hyperband": lambda: HyperBandScheduler(max_t=52),
    }[method]()

    class Budget(tune.Stopper):
        def __init__(self) -> None:
            self.spent = 0.0
            self.trace: Trace = []

        def __call__(self, trial_id: str, result: dict) -> bool:
            self.spent += result["sim_epoch_seconds"] / 3600 * USD_PER_HOUR
            self.trace.append((self.spent, float(result["val_loss"]), math.nan))
            return False

        def stop_all(self) -> bool:
            return self.spent >= task.budget

    stream = random_stream(task.name, seed)
    curves = [next(stream) for _ in range(stream_length)]
    budget = Budget()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "curves.parquet")
        bench().curves(task.name, [c.hyperparameters for c in curves]).assign(
            config_id=np.repeat([c.config_id for c in curves], 52)
        ).to_parquet(path)
        tuner = tune.Tuner(
            replay,
            param_space={
                "curves": path,
                "config_id": tune.grid_search([c.config_id for c in curves]),
                # HyperBand pauses and resumes trials, so it needs them; ASHA never does
                "checkpoint": method == "ray-hyperband",
            },
            tune_config=tune.TuneConfig(
                metric="val_loss", mode="min", scheduler=scheduler, max_concurrent_trials=1, reuse_actors=True
            ),
            run_config=tune.RunConfig(
                storage_path=tmp,
                stop=budget,
                verbose=0,
                checkpoint_config=tune.CheckpointConfig(num_to_keep=None),
            ),
        )
        tuner.fit()
    if budget.spent < task.budget:
        print(
            f"warning: {method} used up the {stream_length}-configuration stream before the budget",
            flush=True,
        )
    return budget.trace


def run_method(task: Task, seed: int, method: str) -> Trace:
    base, kwargs = parse_variant(method)
    multivariate = kwargs.pop("multivariate", None)  # None: each side's default (see parse_variant)
    tpe = {
        "tell_pruned": bool(kwargs.pop("tell_pruned", False)),
        "multivariate": bool(multivariate),
        "tell_estimate": bool(kwargs.pop("tell_estimate", False)),
        "constant_liar": bool(kwargs.pop("constant_liar", False)),
        "oracle_rungs": bool(kwargs.pop("oracle_rungs", False)),
        "oracle_tell": bool(kwargs.pop("oracle_tell", False)),
        "oracle_stop_from": int(kwargs.pop("oracle_stop_from", 0)),
        "ratio_stop": int(kwargs.pop("ratio_stop", 0)),
        "tell_at_rung": bool(kwargs.pop("tell_at_rung", False)),
        "tell_screen_at": int(kwargs.pop("tell_screen_at", 0)),
        "gp": bool(kwargs.pop("gp", False)),
        "n_startup": int(kwargs.pop("n_startup", 10)),
        "tell_predicted": bool(kwargs.pop("tell_predicted", False)),
        "cost_exponent": float(kwargs.pop("cost_exponent", 0.0)),
        "value_transform": kwargs.pop("value_transform", None),
        "sobol_start": bool(kwargs.pop("sobol_start", False)),
        "fast_ask": bool(kwargs.pop("fast_ask", False)),
        "fast_search": kwargs.pop("fast_search", None),
        "predicted_rungs": bool(kwargs.pop("predicted_rungs", False)),
        "believer": bool(kwargs.pop("believer", True)),
        "smooth_rungs": int(kwargs.pop("smooth_rungs", 0)),
        "tell_at": int(kwargs.pop("tell_at", 0)),
        "random_every": int(kwargs.pop("random_every", 0)),
        "forget_misled": bool(kwargs.pop("forget_misled", 1)),
        "fidelity": bool(kwargs.pop("fidelity", 0)),
        "longest_min": kwargs.pop("longest_min", None),
        "model_check": kwargs.pop("model_check", None),
    }
    if base == "grid":
        return task.grid_trace
    if base == "random":
        return run_stream(task, seed, None)
    if base == "costtune-hb":
        return run_stream(task, seed, AsyncHyperband(MAX_EPOCHS, **kwargs))
    if base == "costtune-hb-tpe":
        cheapest_of = int(kwargs.pop("cheapest_of", 1))
        return run_tpe_loop(
            task, seed, AsyncHyperband(MAX_EPOCHS, **kwargs), None, cheapest_of=cheapest_of, **tpe
        )
    if base == "costtune-roi-tpe":
        return run_tpe_loop(task, seed, None, MarginalRoiStopping(ROI_RULE), **tpe)
    if base == "costtune-hb-roi-tpe":
        rule = MarginalRoiStopping(ROI_RULE)
        return run_tpe_loop(task, seed, AsyncHyperband(MAX_EPOCHS, **kwargs), rule, **tpe)
    if base in ("costtune-hb-rel-tpe", "costtune-rel-tpe"):
        rho = float(kwargs.pop("relative_roi", RELATIVE_RULE.min_relative_roi))
        spare = bool(kwargs.pop("spare_best", False))
        wait = bool(kwargs.pop("wait_for_rungs", False))
        expected = bool(kwargs.pop("expected", False))
        guard = bool(kwargs.pop("guard_brackets", False))
        every = kwargs.pop("rung_free_every", None)
        flat_guard = kwargs.pop("flat_guard", False)
        noise_aware = bool(kwargs.pop("noise_aware", False))
        noise_credit = bool(kwargs.pop("noise_credit", False))
        noise_veto = bool(kwargs.pop("noise_veto", False))
        hyperband = DollarGrace if kwargs.pop("dollar_grace", False) else AsyncHyperband
        probe_paces = kwargs.pop("probe_paces", None)
        policy = hyperband(MAX_EPOCHS, **kwargs) if base == "costtune-hb-rel-tpe" else None
        if probe_paces is not None and policy is not None:
            failures = kwargs.pop("rung_checks", 2)
            policy = RungProbe(MAX_EPOCHS, failures=failures, paces=probe_paces, **kwargs)
        if every and policy is not None:
            policy = RungFreeShare(MAX_EPOCHS, every, **kwargs)
        last_rung = policy.rungs_by_bracket[0][-1] if wait and policy is not None else None
        rule = MarginalRoiStopping(
            dataclasses.replace(
                RELATIVE_RULE,
                min_relative_roi=rho,
                spare_best=spare,
                max_epochs=MAX_EPOCHS,
                first_stop_epoch=last_rung,
                expected=expected,
                noise_aware=noise_aware,
            )
        )
        if noise_credit:
            rule = NoiseVeto(rule, half_run=False)  # type: ignore[assignment]
        if noise_veto:
            rule = NoiseVeto(rule)  # type: ignore[assignment]
        if guard and policy is not None:
            rule = BracketGuard(rule, policy)  # type: ignore[assignment]
        if flat_guard and policy is not None:
            from slow_starters import FlatStartGuard

            flat = FlatStartGuard(max_epochs=MAX_EPOCHS)
            policy, rule = flat.policy(policy), flat.stopper(rule)
        return run_tpe_loop(task, seed, policy, rule, **tpe)
    if base == "costtune-hb-patience-tpe":
        rule = MarginalRoiStopping(PATIENCE_RULE)
        return run_tpe_loop(task, seed, AsyncHyperband(MAX_EPOCHS, **kwargs), rule, **tpe)
    if base in ("costtune-hb-outlook-tpe", "costtune-outlook-tpe"):
        rule = OutlookStopping(
            OutlookRule(
                MAX_EPOCHS,
                optimism=float(kwargs.pop("optimism", 1.0)),
                min_epochs=int(kwargs.pop("outlook_min_epochs", 4)),
            )
        )
        policy = AsyncHyperband(MAX_EPOCHS, **kwargs) if base == "costtune-hb-outlook-tpe" else None
        return run_tpe_loop(task, seed, policy, None, outlook=rule, **tpe)
    if base == "costtune-pbt":
        return run_pbt(task, seed)
    if base in OPTUNA_PRUNERS:
        return run_optuna(task, seed, base, multivariate, tpe["constant_liar"], tpe["gp"])
    if base in RAY_METHODS:
        return run_ray(task, seed, base)
    if base in PEER_SETTINGS:
        evaluate = lambda config: curves_of(task.name, [config])[0]  # noqa: E731
        return run_peer(
            base, evaluate, seed, task.budget, USD_PER_HOUR, workers=WORKERS, stop_below=_until(task)
        )
    raise SystemExit(f"--methods: unknown method {method!r}")


# ----------------------------------------------------------------------- measuring
COLUMNS = (
    "method",
    "task",
    "seed",
    "usd_GRID",
    "floor_GRID",
    "usd_TOP1",
    "floor_TOP1",
    "hours_GRID",
    "hours_TOP1",
    "workers",
    "budget",
    "spent",
    "regret",
    "seconds",
)


#: the columns the table reads from a CSV given to --from (hours_* are optional: older CSVs)
SUMMARISED = (
    "method",
    "task",
    "seed",
    "budget",
    "regret",
    "usd_GRID",
    "floor_GRID",
    "usd_TOP1",
    "floor_TOP1",
)


def read_rows(path: str) -> list[dict[str, Any]]:
    """A CSV this script wrote (or one saved from it by pandas, whose missing values are empty
    cells, read here as NaN), for --from. A missing file or column, or a seed that is not an
    integer, is a ValueError in one line naming the file."""
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            fields = reader.fieldnames or ()
            rows = [{k: v if v != "" else "nan" for k, v in r.items()} for r in reader]
    except OSError as exc:
        raise ValueError(f"--from: {path}: {exc.strerror or exc}") from None
    missing = [c for c in SUMMARISED if c not in fields]
    if missing:
        raise ValueError(f"--from: {path}: no column {', '.join(missing)}")
    bad = next((r["seed"] for r in rows if not r["seed"].isdigit()), None)
    if bad is not None:
        raise ValueError(f"--from: {path}: a seed is not an integer: {bad!r}")
    return [{**r, "seed": int(r["seed"])} for r in rows]


def task_seed(task_name: str, seed: int) -> int:
    """The seed every method's searchers and streams get for run ``seed`` of ``task_name``: one of
    its own per task (CRC-32 of both, kept below 2**31 for the peers' seeds that are 32-bit ints).

    Until stop 48 every task's run ``seed`` was seeded with ``seed`` alone, so a seed's random
    start-up proposals were the same points on all tasks, and LCBench's tasks share where their
    good configurations lie: the 8 test tasks ranked seeds 0-19 by their first 5 proposals alike
    (mean pairwise Spearman 0.47; -0.006 with this seed), so a lucky seed was lucky on every
    task at once and the runs of a seed were not independent. The table keeps ``seed``.
    """
    return zlib.crc32(f"{task_name}/{seed}".encode()) & 0x7FFFFFFF


def measure(task: Task, seed: int, method: str) -> dict[str, Any]:
    global _stopped_short
    started = time.perf_counter()
    _stopped_short = False
    trace = run_method(task, task_seed(task.name, seed), method)
    row: dict[str, Any] = {"method": method, "task": task.name, "seed": seed}
    for name, target in task.targets.items():
        usd, clock = next(((u, c) for u, loss, c in trace if loss <= target), (math.inf, math.inf))
        row[f"usd_{name}"] = usd if usd <= task.budget else math.inf
        row[f"hours_{name}"] = clock / 3600 if usd <= task.budget else math.inf  # wall clock to target
        row[f"floor_{name}"] = task.floor[name]
    row["workers"] = WORKERS
    best = min((loss for u, loss, _ in trace if u <= task.budget), default=math.inf)
    row["budget"] = task.budget
    row["spent"] = trace[-1][0] if trace else 0.0
    row["regret"] = (best - task.best_known) / task.best_known
    # a peer's run that ended at the target
    _stopped_short |= UNTIL_TARGET and row["spent"] < task.budget and best <= min(task.targets.values())
    if _stopped_short:  # the run stopped short of its budget: neither was measured
        row["spent"] = row["regret"] = math.nan
    row["seconds"] = time.perf_counter() - started
    return row


def measure_task(
    args: tuple[str, str | None, list[int], list[str], str | None, int, bool, int, int, float, bool],
) -> list[dict[str, Any]]:
    global WORKERS, UNTIL_TARGET, STRETCH, MAX_EPOCHS, NOISE, SPREAD
    task_name, data_dir, seeds, methods, partial, WORKERS, UNTIL_TARGET, STRETCH, unused, NOISE, SPREAD = args
    MAX_EPOCHS = peers.MAX_EPOCHS = stretched_epochs(STRETCH)
    set_unused(unused)
    bench(data_dir)
    task = prepare(task_name)
    print(
        f"task {task_name}: budget ${task.budget:.2f}, "
        + ", ".join(f"{t} {task.targets[t]:.4f} (oracle floor ${task.floor[t]:.3f})" for t in TARGETS),
        flush=True,
    )
    rows = []
    for seed in seeds:
        for method in methods:
            rows.append(measure(task, seed, method))
            if partial:  # a long run keeps what it measured if it is stopped
                with open(partial, "a") as fh:
                    fh.write(",".join(str(rows[-1][k]) for k in COLUMNS) + "\n")
    return rows


def rank_correlations(task_name: str, epochs: tuple[int, ...] = (5, 25), n: int = 300) -> list[float]:
    """Spearman's correlation of each of ``epochs``' val CE with the final one over ``n`` random
    configurations of ``task_name`` (seed 777), as --stretch, --spread and --noise make the curves:
    how far a rung at that epoch can rank the configurations (#13's held-out curves: 0.36–0.39 at
    epoch 5, 0.46–0.51 at epoch 25)."""
    from scipy.stats import spearmanr  # type: ignore[import-untyped]

    curves = curves_of(task_name, random_configs(n, 777))
    finals = [float(c.val_loss[-1]) for c in curves]
    return [float(spearmanr([float(c.val_loss[e - 1]) for c in curves], finals)[0]) for e in epochs]


# ----------------------------------------------------------------------- the table
def task_runs(mine: list[dict[str, Any]], task: str, target: str) -> list[tuple[float, float, bool]]:
    """A method's runs on ``task``: (cost ÷ budget with a failure as 1.0, cost ÷ oracle floor, reached?)."""
    return [
        (min(u, b) / b, min(u, b) / float(r[f"floor_{target}"]), math.isfinite(u))
        for r in mine
        if r["task"] == task
        for u, b in [(float(r[f"usd_{target}"]), float(r["budget"]))]
    ]


def per_task(rows: list[dict[str, Any]]) -> str:
    """×floor task by task (each task's median over its seeds, a failure = the budget): the
    figure the tables print is the median of a row; the two middle tasks set it."""
    methods = list(dict.fromkeys(str(r["method"]) for r in rows))
    tasks = sorted({str(r["task"]) for r in rows}, key=lambda t: (len(t), t))
    out = []
    for target in TARGETS:
        out.append(
            f"\n×floor by task, target {target} (the median of each task's runs; * the two middle tasks)"
        )
        out.append("| method | " + " | ".join(tasks) + " | median |\n|---|" + "---:|" * (len(tasks) + 1))
        for method in methods:
            mine = [r for r in rows if r["method"] == method]
            cells = {
                t: statistics.median(f for _, f, _ in task_runs(mine, t, target))
                for t in tasks
                if any(r["task"] == t for r in mine)
            }
            order = sorted(cells, key=cells.__getitem__)
            middle = set(order[(len(order) - 1) // 2 : len(order) // 2 + 1])
            shown = [f"{cells[t]:.1f}{'*' if t in middle else ''}" if t in cells else "—" for t in tasks]
            out.append(f"| {method} | " + " | ".join(shown) + f" | {statistics.median(cells.values()):.1f} |")
    return "\n".join(out)


def summarise(rows: list[dict[str, Any]], reference: str = REFERENCE) -> str:
    methods = list(dict.fromkeys(str(r["method"]) for r in rows))
    by = {(str(r["method"]), str(r["task"]), int(r["seed"])): r for r in rows}
    out = []
    for target in TARGETS:
        out.append(
            f"\nTarget {target}. success: runs reaching it within the budget; cost/grid: geometric mean over "
            "all tasks of the per-task median cost-to-target ÷ grid cost, a failure counted as 1.0 (the "
            "whole budget); successes only: the same over successful runs (tasks with one); ×floor: median "
            "over tasks of the per-task median cost-to-target ÷ oracle floor (failure = budget); wall h: "
            "geometric mean over tasks of the per-task median simulated wall-clock hours to the target "
            "(successful runs); 95%: percentile bootstrap intervals of cost/grid and ×floor (each "
            "task's seeds resampled, 2,000 draws, seed 0); regret: "
            "median relative regret at budget; vs "
            f"{reference}: paired over (task, seed) — sign test on cost (failure = ∞): "
            f"{reference} cheaper/dearer, p; "
            f"McNemar on success: only {reference} / only this method reached it, p."
        )
        out.append(
            "| method | success | cost/grid | successes only (tasks) | ×floor | wall h | regret | sign W/L p "
            "| McNemar b/c p | cost/grid 95% | ×floor 95% |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        )
        for method in methods:
            mine = [r for r in rows if r["method"] == method]
            costs = [float(r[f"usd_{target}"]) for r in mine]
            ok = [c for c in costs if math.isfinite(c)]
            tasks = sorted({str(r["task"]) for r in mine})
            medians, medians_ok, floors, hours = [], [], [], []
            rel_groups, floor_groups = [], []  # each task's runs, for the bootstrap intervals
            for t in tasks:
                runs = task_runs(mine, t, target)
                rel_groups.append([rel for rel, _, _ in runs])
                floor_groups.append([fl for _, fl, _ in runs])
                medians.append(statistics.median(rel_groups[-1]))
                floors.append(statistics.median(floor_groups[-1]))
                reached = [rel for rel, _, ok in runs if ok]
                if reached:
                    medians_ok.append(statistics.median(reached))
                clocks = [float(r.get(f"hours_{target}", math.nan)) for r in mine if r["task"] == t]
                clocks = [h for h in clocks if math.isfinite(h) and h > 0]
                if clocks:
                    hours.append(statistics.median(clocks))
            # a run --until-target stopped short has no regret (nan): then none is printed
            regrets = [float(r["regret"]) for r in mine]
            regret = math.nan if any(map(math.isnan, regrets)) else statistics.median(regrets)
            versus = "—"
            success = "—"
            if method != reference:
                pairs = [(by.get((reference, str(r["task"]), int(r["seed"]))), r) for r in mine]
                pairs = [(a, b) for a, b in pairs if a is not None]
                if pairs:
                    w, lost, p = sign_test(
                        [float(a[f"usd_{target}"]) for a, _ in pairs],
                        [float(b[f"usd_{target}"]) for _, b in pairs],
                    )
                    versus = f"{w}/{lost} p={p:.2g}"
                    b_, c_, p2 = mcnemar(
                        [math.isfinite(float(a[f"usd_{target}"])) for a, _ in pairs],
                        [math.isfinite(float(b[f"usd_{target}"])) for _, b in pairs],
                    )
                    success = f"{b_}/{c_} p={p2:.2g}"
            cells = [
                method,
                f"{len(ok)}/{len(costs)}",
                f"{geo_mean(medians):.3f}",
                f"{geo_mean(medians_ok):.3f} ({len(medians_ok)}/{len(tasks)})",
                f"{statistics.median(floors):.1f}",
                f"{geo_mean(hours):.2f}" if hours else "—",
                f"{regret:.4f}",
                versus,
                success,
                "{:.3f}–{:.3f}".format(*bootstrap_interval(rel_groups, geo_mean)),
                "{:.1f}–{:.1f}".format(*bootstrap_interval(floor_groups, statistics.median)),
            ]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="the LCBench surrogate (or COSTTUNE_LCBENCH_DIR)")
    parser.add_argument(
        "--tasks",
        default=None,
        help="'dev' (default), 'test', 'wider' (protocol v3), 'all', or task ids: 3945,7593; with "
        "--from, only these tasks' rows are read (all when not given)",
    )
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 (default 20)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--methods",
        default=None,
        help="comma-separated; see above (default: the table's methods); with --from, only these "
        "methods' rows are read (all when not given)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="asynchronous workers per run (simulated; default 1)"
    )
    parser.add_argument(
        "--until-target",
        action="store_true",
        help="searcher-driven runs (costtune's loop, Optuna, the peers) end once every target is "
        "reached: the same cost and hours to target, much faster; such a run's spent and regret "
        "are nan",
    )
    parser.add_argument(
        "--stretch",
        type=int,
        default=1,
        help="K: every curve trained K times longer (51 K + 1 epochs, the same total cost, loss "
        "interpolated between recorded epochs), a held-out check on slower curves; default 1",
    )
    parser.add_argument(
        "--spread",
        nargs="?",
        const="random",
        default="",
        metavar="{random,lr,trap}",
        help="with --stretch K: each configuration learns at its own pace, K^U times slower; fast "
        "ones flatten and then stay flat to the 51 K + 1 epochs, slow ones end best, so early "
        "ranks mislead. random (the default): U uniform in [0, 1], fixed per task and "
        "configuration; lr: U from the learning rate, 1 at the smallest, 0 at the largest; trap: "
        "the other way round (on LCBench large learning rates mostly end best: the fast starters end worst)",
    )
    parser.add_argument(
        "--unused",
        type=int,
        default=0,
        help="N: every searcher's space gets N more hyperparameters (uniform in [0, 1]) that no "
        "curve depends on, a held-out check on a wider space; default 0",
    )
    parser.add_argument(
        "--noise",
        type=float,
        default=0.0,
        help="σ: every epoch's val CE times exp(σ z), z standard normal and fixed per (task, "
        "configuration), a held-out check on noisy curves as real runs report them; default 0",
    )
    parser.add_argument(
        "--ranks",
        action="store_true",
        help="print, per task, the Spearman correlation of the epoch-5 and epoch-25 val CE with the "
        "final one over 300 random configurations, under --stretch, --spread and --noise, and exit: "
        "how much a first rung can tell on such curves",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="tasks run in parallel")
    parser.add_argument(
        "--out", default=None, help="write every run as CSV here (and each as it ends to OUT.partial)"
    )
    parser.add_argument("--from", dest="from_csv", action="append", default=[], help="re-print earlier CSVs")
    parser.add_argument(
        "--reference", default=None, help=f"the method the paired tests are against (default {REFERENCE})"
    )
    parser.add_argument(
        "--per-task",
        action="store_true",
        help="also print ×floor task by task (the tables print the median of a row; * the tasks that set it)",
    )
    args = parser.parse_args()
    named = {"dev": list(DEV_TASKS), "test": list(TEST_TASKS), "wider": list(WIDER_TASKS)}
    if args.from_csv:
        try:
            rows = [row for path in args.from_csv for row in read_rows(path)]
        except ValueError as exc:
            print(f"lcbench.py: error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        if args.tasks not in (None, "all"):
            wanted = set(named.get(args.tasks) or args.tasks.split(","))
            rows = [r for r in rows if r["task"] in wanted]
        if args.methods is not None:
            rows = [r for r in rows if r["method"] in set(args.methods.split(","))]
        if not rows:
            print("lcbench.py: error: --from: no row left for these --tasks and --methods", file=sys.stderr)
            raise SystemExit(2)
        print(summarise(rows, args.reference or REFERENCE))
        if args.per_task:
            print(per_task(rows))
        return
    args.tasks = args.tasks or "dev"
    tasks = named.get(args.tasks) or (
        bench(args.data_dir).tasks if args.tasks == "all" else args.tasks.split(",")
    )
    methods = (args.methods or ",".join(DEFAULT_METHODS)).split(",")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    try:
        ray_run = any(parse_variant(m)[0] in RAY_METHODS for m in methods)
    except ValueError as exc:  # before anything is written, as the refusals below
        print(f"lcbench.py: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    refused = (
        (args.stretch < 1, f"--stretch: must be an integer >= 1, got {args.stretch}"),
        (ray_run and args.stretch > 1, "--stretch: the Ray methods replay the recorded 52-epoch curves only"),
        (
            args.spread not in ("", "random", "lr", "trap"),
            f"--spread: must be random, lr or trap, got {args.spread!r}",
        ),
        (args.spread and args.stretch < 2, "--spread: needs --stretch K with K >= 2 (the slowest pace)"),
        (args.unused < 0, f"--unused: must be an integer >= 0, got {args.unused}"),
        (ray_run and args.unused > 0, "--unused: the Ray methods replay the recorded configurations only"),
        (not 0 <= args.noise < 1, f"--noise: must be a number in [0, 1), got {args.noise}"),
        (ray_run and args.noise > 0, "--noise: the Ray methods replay the recorded curves only"),
    )
    for bad, message in refused:  # before anything is written: OUT.partial of a past run stays
        if bad:
            print(f"lcbench.py: error: {message}", file=sys.stderr)
            raise SystemExit(2)
    if args.ranks:
        global STRETCH, MAX_EPOCHS, NOISE, SPREAD
        STRETCH, NOISE, SPREAD = args.stretch, args.noise, args.spread
        MAX_EPOCHS = peers.MAX_EPOCHS = stretched_epochs(STRETCH)
        bench(args.data_dir)
        table = {t: rank_correlations(t) for t in tasks}
        print(f"Spearman correlation with the final val CE ({MAX_EPOCHS} epochs), 300 random configurations")
        print("| task | epoch 5 | epoch 25 |\n|---|---:|---:|")
        for t, (at5, at25) in table.items():
            print(f"| {t} | {at5:.2f} | {at25:.2f} |")
        at5s, at25s = [v[0] for v in table.values()], [v[1] for v in table.values()]
        print(
            f"| median (range) | {statistics.median(at5s):.2f} ({min(at5s):.2f}–{max(at5s):.2f}) "
            f"| {statistics.median(at25s):.2f} ({min(at25s):.2f}–{max(at25s):.2f}) |"
        )
        return
    partial = f"{args.out}.partial" if args.out else None
    if partial:
        Path(partial).write_text(",".join(COLUMNS) + "\n")
    work = [
        (
            t,
            args.data_dir,
            seeds,
            methods,
            partial,
            args.workers,
            args.until_target,
            args.stretch,
            args.unused,
            args.noise,
            args.spread,
        )
        for t in tasks
    ]
    started = time.perf_counter()
    if ray_run or args.jobs <= 1:
        if ray_run:
            import ray

            os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
            os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")  # no per-trial CSV/JSON/TB
            ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        rows = [row for w in work for row in measure_task(w)]
    else:
        with ProcessPoolExecutor(args.jobs) as pool:
            rows = [row for rows_ in pool.map(measure_task, work) for row in rows_]
    if args.out:
        with open(args.out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    print(
        f"\n{len(tasks)} tasks × {len(seeds)} seeds, {args.workers} worker(s), "
        f"{time.perf_counter() - started:.0f} s"
        + (
            f", curves stretched {'1x to ' if args.spread else ''}{args.stretch}x"
            f"{ {'lr': ' by learning rate', 'trap': ' against the learning rate'}.get(args.spread, '') } to "
            f"{stretched_epochs(args.stretch)} epochs"
            if args.stretch > 1
            else ""
        )
        + (f", {args.unused} unused hyperparameters in every searcher's space" if args.unused else "")
        + (f", val CE noise σ {args.noise:g}" if args.noise else "")
    )
    full = str(stretched_epochs(args.stretch))
    for method in methods:  # every peer's settings, as run
        base, variant = parse_variant(method)
        if base in OPTUNA_PRUNERS:
            name, kwargs = OPTUNA_PRUNERS[base]
            sampler = {None: "TPESampler(seed", True: "TPESampler(seed, multivariate=True"}.get(
                variant.get("multivariate"), "TPESampler(seed, multivariate=False"
            ) + (", constant_liar=True)" if variant.get("constant_liar") else ")")
            kwargs = {k: full if k == "max_resource" else v for k, v in kwargs.items()}
            print(f"  {method}: {sampler} + {name}({', '.join(f'{k}={v}' for k, v in kwargs.items())})")
        elif base in PEER_SETTINGS:
            print(f"  {method}: {PEER_SETTINGS[base].replace('52', full)}")
    reference = args.reference or (REFERENCE if REFERENCE in methods else methods[0])
    print(summarise(rows, reference))
    if args.per_task:
        print(per_task(rows))


if __name__ == "__main__":
    main()
