"""Choose on several families (PROTOCOL v4): one harness for recorded pools of every kind.

Every pool is a recorded-curves table (``../shared/DESIGN.md``). Every method replays it on a
simulated clock through :func:`costtune.replay.replay_pool` (what ``costtune replay`` runs)
or, for the peers, through the same simulator (:func:`costtune.core.simulate.simulate`) with
the peer's own decision code in costtune's place: Optuna's ``SuccessiveHalvingPruner`` through
``study.ask`` / ``trial.report`` / ``trial.should_prune`` / ``study.tell``, and Ray Tune's
``ASHAScheduler`` through its ``on_trial_add`` / ``on_trial_result`` / ``on_trial_complete``.
Both sides draw configurations from the same searcher over the pool (a seeded random order,
or Optuna's univariate TPE snapped to the nearest unused configuration), so a row's
difference is the scheduler's. DEHB (``dehb``, the ``bench`` extra) is the multi-fidelity peer: its
own search through its ask/tell (:func:`run_dehb`), so its row compares whole optimisers.

Families (``--families``):

- ``lcbench``: 256 random configurations of each usable LCBench task (YAHPO surrogate in
  ``../shared/benchmarks/yahpo_lcbench``, 52 epochs, ``costtune lcbench TASK --random 256``);
- ``real``: the pools ``benchmarks/record_curves.py`` recorded from costtune's own trainable
  on the bundled datasets (``benchmarks/pools/*.csv.gz``, 256 × 50 epochs each);
- ``synthetic``: seeded stress pools from :func:`synthetic_pool`, two per kind (weak early
  ranks, late bloomers, crossing curves, noisy epochs, a 10× spread of epoch costs).

Budget: every configuration of the pool run in full. Targets: the pool's best final loss
(``best``) and its 5th best (``top5``). Cost to target: the dollars of every epoch run, in
the order they finished, until an observed loss first reaches the target; a run that never
does counts as 1.0 (the whole budget). Per family: successes, the geometric mean over pools
of each pool's median cost ÷ budget, and, paired against each method named by
``--against``, the geometric mean of the per-run ratios with a paired bootstrap 95% interval
and a sign test.

    .venv/bin/python benchmarks/families.py --families lcbench,real,synthetic --seeds 20 \\
        --methods default,rungs,optuna-sha,ray-asha --against optuna-sha,ray-asha --jobs 2
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lab.replay import lab_policy, lab_replay, split

from costtune.core.curves import Curve, curves_from_frame, read_table
from costtune.core.policy import Decision, StopReason
from costtune.core.simulate import Simulation, simulate
from costtune.replay import ReplaySettings

HERE = Path(__file__).resolve().parent
LCBENCH_DIR = HERE.parent.parent / "shared" / "benchmarks" / "yahpo_lcbench"
POOLS_DIR = HERE / "pools"
CACHE = Path(os.environ.get("COSTTUNE_POOL_CACHE", "/tmp/costtune-pools"))
PRICE = 2.50

#: every LCBench task the surrogate knows (v3's dev, test and wider sets together)
LCBENCH_TASKS = (
    "3945", "7593", "34539", "126025", "146212", "167190", "168330", "189909",  # v3 dev
    "126026", "126029", "167149", "167184", "167185", "167201", "168335", "168908",  # v3 test
    "167104", "167152", "167161", "167168", "167181", "167200", "168329", "168331", "168868",
    "168910", "189354", "189862", "189865", "189866", "189873", "189905", "189906", "189908",
)  # fmt: skip
SYNTHETIC_KINDS = ("weak-ranks", "late-bloomers", "crossing", "noisy", "cost-spread")


# ----------------------------------------------------------------------------------- pools
def synthetic_pool(kind: str, seed: int, configs: int = 256, epochs: int = 100) -> pd.DataFrame:
    """A seeded pool of one stress kind: four hyperparameters ``x1..x4`` in [0, 1] set each
    curve's final loss (so a searcher can learn), and the kind sets how the curve gets there.

    Each curve is ``final + (start − final) · exp(−t / τ)`` plus noise, with ``final`` a smooth
    function of the hyperparameters and, by kind:

    - ``weak-ranks``: τ (2–60 epochs) and the start independent of ``final``: early ranks say
      little (Spearman with the final loss ≈ 0.3–0.4 at epoch 5, ≈ 0.5 at epoch 25);
    - ``late-bloomers``: a fifth of the configurations, among them the best, stay at their
      start until epoch 15–60, then fall fast;
    - ``crossing``: the better the final loss, the slower the fall (τ from 3 to 40): early
      leaders end behind;
    - ``noisy``: good early ranks, but every epoch's loss carries noise as large as the spread
      of final losses;
    - ``cost-spread``: ordinary curves; seconds per epoch vary 10× between configurations,
      the slow ones better on average.
    """
    rng = np.random.default_rng([seed, SYNTHETIC_KINDS.index(kind), 2026])
    x = rng.uniform(size=(configs, 4))
    quality = (x[:, 0] - 0.3) ** 2 + 0.6 * (x[:, 1] - 0.7) ** 2 + 0.3 * x[:, 2] * x[:, 3] + 0.15 * x[:, 3]
    final = 0.2 + 0.8 * (quality - quality.min()) / (np.ptp(quality) + 1e-12) + rng.normal(0, 0.03, configs)
    start = rng.uniform(1.8, 2.6, configs)
    t = np.arange(1, epochs + 1)
    seconds = rng.uniform(24.0, 36.0, configs)
    noise_sd = np.full(configs, 0.01)
    if kind == "weak-ranks":
        tau = np.exp(rng.uniform(np.log(2), np.log(60), configs))
        start = rng.uniform(1.2, 3.4, configs)
    elif kind == "crossing":
        rank = final.argsort().argsort() / (configs - 1)  # 0 = best
        tau = 3 + 37 * (1 - rank) ** 1.5 * rng.uniform(0.7, 1.3, configs)
    else:
        tau = rng.uniform(3, 10, configs)
    curves = final[:, None] + (start - final)[:, None] * np.exp(-t[None, :] / tau[:, None])
    if kind == "late-bloomers":
        bloomers = rng.uniform(size=configs) < 0.2
        bloomers[np.argsort(final)[:3]] = True  # the best few are among them
        onset = rng.integers(15, 61, configs)
        late = final[:, None] + (start - final)[:, None] * np.exp(
            -np.clip(t[None, :] - onset[:, None], 0, None) / 2.0
        )
        plateau = start[:, None] * (1 - 0.002 * np.minimum(t[None, :], onset[:, None]))
        late = np.where(t[None, :] < onset[:, None], plateau, late)
        curves = np.where(bloomers[:, None], late, curves)
    if kind == "noisy":
        noise_sd = np.full(configs, 0.5 * float(np.std(final)))
    if kind == "cost-spread":
        speed = 10 ** rng.uniform(0, 1, configs)  # 1× to 10× the seconds of the fastest
        better = final.argsort().argsort() / (configs - 1)
        seconds = 8.0 * speed * (1.5 - better) / 1.5 + 1.0
    curves = curves + rng.normal(0, 1, curves.shape) * noise_sd[:, None]
    jitter = rng.uniform(0.95, 1.05, curves.shape)
    rows = {
        "config_id": np.repeat([f"{kind}-{seed}-{i:03d}" for i in range(configs)], epochs),
        **{f"hp.x{j + 1}": np.repeat(x[:, j], epochs) for j in range(4)},
        "epoch": np.tile(t, configs),
        "val_loss": curves.ravel(),
        "epoch_seconds": (seconds[:, None] * jitter).ravel(),
        "devices": 1.0,
    }
    return pd.DataFrame(rows)


def pools(family: str) -> dict[str, Callable[[], pd.DataFrame]]:
    """The family's pools by name, each a function that builds (or reads) its table."""
    if family == "synthetic":
        return {f"{k}-{s}": (lambda k=k, s=s: synthetic_pool(k, s)) for k in SYNTHETIC_KINDS for s in (0, 1)}
    if family == "real":
        return {
            p.name.removesuffix(".csv.gz"): (lambda p=p: read_table(p))
            for p in sorted(POOLS_DIR.glob("*.csv.gz"))
        }
    if family == "lcbench":
        return {f"lcbench-{t}": (lambda t=t: _lcbench_pool(t)) for t in LCBENCH_TASKS}
    raise SystemExit(f"--families: unknown family {family!r}; choose lcbench, real, synthetic")


def _lcbench_pool(task: str) -> pd.DataFrame:
    cached = CACHE / f"lcbench-{task}-256-7.parquet"
    if cached.is_file():
        return pd.read_parquet(cached)
    from costtune.lcbench import LCBench, random_configs

    frame = LCBench(LCBENCH_DIR).curves(task, random_configs(256, seed=7))
    CACHE.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(cached)
    return frame


# ----------------------------------------------------------------------------------- peers
class OptunaSHA:
    """Optuna's ``SuccessiveHalvingPruner(min_resource, reduction_factor)`` deciding, through
    Optuna's public API, in costtune's simulator (the policy interface it calls)."""

    def __init__(self, min_resource: int = 5, reduction_factor: int = 5) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        pruner = optuna.pruners.SuccessiveHalvingPruner(
            min_resource=min_resource, reduction_factor=reduction_factor
        )
        self.study = optuna.create_study(pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=0))
        self.trials: dict[str, Any] = {}
        self.last: dict[str, float] = {}
        self.pruned: set[str] = set()

    def on_add(self, trial_id: str) -> None:
        self.trials[trial_id] = self.study.ask()

    def on_result(self, trial_id: str, epoch: int, loss: float, spent_usd: float) -> Decision:
        trial = self.trials[trial_id]
        trial.report(loss, epoch)
        self.last[trial_id] = loss
        if trial.should_prune():
            self.pruned.add(trial_id)
            return Decision.STOP
        return Decision.CONTINUE

    def on_end(self, trial_id: str, reason: StopReason) -> None:
        trial = self.trials.pop(trial_id, None)
        if trial is None:
            return
        state = self._optuna.trial.TrialState
        value = self.last.get(trial_id, math.nan)
        if trial_id in self.pruned:
            self.study.tell(trial, state=state.PRUNED)
        elif math.isfinite(value):
            self.study.tell(trial, value)
        else:
            self.study.tell(trial, state=state.FAIL)

    def stopper_waits_until(self, trial_id: str) -> int:
        return 0


class _RayTrial:
    """What Ray's ASHA reads of a trial: its id (and it keys its rungs by the object)."""

    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id


class RayASHA:
    """Ray Tune's ``ASHAScheduler(grace_period, reduction_factor)`` deciding in costtune's
    simulator, through the scheduler API Tune's controller calls."""

    def __init__(self, max_t: int, grace_period: int = 5, reduction_factor: int = 5) -> None:
        from ray.tune.schedulers import ASHAScheduler

        self.scheduler = ASHAScheduler(
            metric="loss",
            mode="min",
            max_t=max_t,
            grace_period=grace_period,
            reduction_factor=reduction_factor,
        )
        self.trials: dict[str, _RayTrial] = {}

    def on_add(self, trial_id: str) -> None:
        self.trials[trial_id] = _RayTrial(trial_id)
        self.scheduler.on_trial_add(None, self.trials[trial_id])

    def on_result(self, trial_id: str, epoch: int, loss: float, spent_usd: float) -> Decision:
        result = {"loss": loss, "training_iteration": epoch}
        action = self.scheduler.on_trial_result(None, self.trials[trial_id], result)
        return Decision.STOP if action == "STOP" else Decision.CONTINUE

    def on_end(self, trial_id: str, reason: StopReason) -> None:
        trial = self.trials.pop(trial_id, None)
        if trial is not None:
            self.scheduler.on_trial_remove(None, trial)

    def stopper_waits_until(self, trial_id: str) -> int:
        return 0


def run_dehb(table: Sequence[Curve], seed: int, budget: float) -> Simulation:
    """DEHB (Awad et al. 2021, the ``dehb`` package) over a pool, through its ask/tell, with its
    defaults (η = 3, its DE settings) and fidelities from the first rung's 5 epochs to the
    pool's longest curve, on one worker until ``budget`` dollars are spent.

    DEHB evaluates a configuration at a fidelity from scratch, as its own examples do: a job
    of b epochs pays epochs 1..b, and a promotion reruns them. Its proposals are snapped to
    the nearest unused recorded configuration (the same mapping as the other rows' searchers;
    once every one has run, to the nearest of all), and a configuration it promotes keeps the
    curve it was snapped to. A diverged (NaN) loss is told as +inf."""
    import tempfile

    import optuna
    from ConfigSpace import Categorical, ConfigurationSpace, Float, Integer
    from dehb import DEHB

    from costtune.core.simulate import Epoch
    from costtune.search.pool import SamplerPool

    snap = SamplerPool(table, sampler=optuna.samplers.RandomSampler(seed=seed))
    cs = ConfigurationSpace(seed=seed)
    for name, d in snap.space.items():
        if hasattr(d, "choices"):
            cs.add(Categorical(name, list(d.choices)))
        elif isinstance(d, optuna.distributions.IntDistribution):
            cs.add(Integer(name, (d.low, d.high), log=d.log))
        else:
            cs.add(Float(name, (d.low, d.high), log=d.log))
    longest = max(c.epochs for c in table)
    sim = Simulation()
    spent = clock = 0.0
    snapped: dict[tuple[Any, ...], Curve] = {}
    with tempfile.TemporaryDirectory() as tmp:
        opt = DEHB(
            cs=cs,
            min_fidelity=min(5, longest),
            max_fidelity=longest,
            eta=3,
            n_workers=1,
            seed=seed,
            output_path=tmp,
            save_freq="end",
            log_level="ERROR",
        )
        job_number = 0
        while spent < budget:
            job = opt.ask()
            config = dict(job["config"])
            key = tuple(sorted(config.items()))
            if key not in snapped:
                snapped[key] = snap.snap(config)
            curve = snapped[key]
            epochs = min(round(float(job["fidelity"])), curve.epochs)
            trial = f"{curve.config_id}#{job_number}"
            job_number += 1
            loss = math.nan
            for epoch in range(1, epochs + 1):
                clock += float(curve.epoch_seconds[epoch - 1])
                spent += float(curve.epoch_seconds[epoch - 1]) * curve.devices / 3600 * PRICE
                loss = float(curve.val_loss[epoch - 1])
                sim.epochs.append(Epoch(clock, trial, epoch, loss, spent))
                if spent >= budget:
                    break
            sim.stopped_at[trial] = epochs
            opt.tell(job, {"fitness": loss if math.isfinite(loss) else math.inf, "cost": float(epochs)})
    return sim


# --------------------------------------------------------------------------------- methods
#: the methods a user would name: costtune's settings (ReplaySettings fields), or a peer. Each
#: is written out in full (not relative to today's default), so a row means the same later.
OFF = {
    "escalate": False,
    "hedge": False,
    "stopping": "none",
    "warmup_trials": 0,
    "lookahead": 0,
    "rung_checks": 0,
    "keep": "floor",
}
#: the default until the families were measured: rungs + warm-up + escalation + hedge + relative stop
PREVIOUS = {
    **OFF,
    "escalate": True,
    "hedge": True,
    "hedge_judges": "every_bracket",
    "stopping": "relative",
    "rho": 0.3,
    "noise_aware": True,
    "warmup_trials": "auto",
}
METHODS: dict[str, dict[str, Any]] = {
    "default": {},  # today's (costtune.core.policy.defaults.DEFAULTS)
    "previous-default": PREVIOUS,
    "previous-default-no-escalate": {**PREVIOUS, "escalate": False},  # and so no hedge
    "previous-default-no-hedge": {**PREVIOUS, "hedge": False},
    "previous-default-no-relative-stop": {**PREVIOUS, "stopping": "none"},
    "previous-default-no-warmup": {**PREVIOUS, "warmup_trials": 0},
    "previous-default-no-noise-aware": {**PREVIOUS, "noise_aware": False},
    # the rungs alone (Optuna's SHA decision for decision), and each mechanism added to them
    "rungs": OFF,
    "rungs-ceil": {**OFF, "keep": "ceil"},
    "hyperband": {**OFF, "brackets": None},  # every bracket that fits (scheduler.brackets: null)
    "rungs-pareto": {**OFF, "promotion": "pareto"},  # rung order: (loss, dollars) fronts
    "rungs-cost-share": {**OFF, "promotion": "cost_share"},  # 1/η of the rung's dollars go on
    "rungs+relative-stop": {**OFF, "stopping": "relative", "rho": 0.3, "noise_aware": True},
    "rungs+warmup": {**OFF, "warmup_trials": "auto"},
    "rungs+escalate": {**OFF, "escalate": True},
    "rungs+escalate+hedge": {**OFF, "escalate": True, "hedge": True},
    "rungs+lookahead": {**OFF, "lookahead": 3},
    "rungs+thaw": {**OFF, "thaw": "quantile"},  # with the budget: stopped trials taken up again
    "rungs+thaw-deepest": {**OFF, "thaw": "deepest"},
    "rungs+thaw-cut": {**OFF, "thaw": "cut"},  # only what makes its rung's cut as it stands at the end
    "rungs+thaw-half": {**OFF, "thaw": "quantile", "thaw_share": 0.5},  # at most half as much again
    "rungs+thaw-quarter": {**OFF, "thaw": "quantile", "thaw_share": 0.25},
    "rungs+rung-checks": {**OFF, "escalate": True, "rung_checks": 5},
    "optuna-sha": {"peer": "optuna-sha"},
    "ray-asha": {"peer": "ray-asha"},
    "dehb": {"peer": "dehb"},  # DEHB's own search (the searcher column does not apply)
    "full": {"scheduler": "fifo", "stopping": "none"},  # every configuration to its last epoch
}
PEER_SETTINGS = {
    "optuna-sha": "optuna.pruners.SuccessiveHalvingPruner(min_resource=5, reduction_factor=5), "
    "Optuna 5.0 defaults otherwise (min_early_stopping_rate=0, bootstrap_count=0)",
    "ray-asha": "ray.tune.schedulers.ASHAScheduler(grace_period=5, reduction_factor=5, max_t=<epochs>), "
    "Ray 2.60 defaults otherwise (brackets=1, stop_last_trials=True)",
    "dehb": "dehb.DEHB(min_fidelity=5, max_fidelity=<epochs>, eta=3), dehb 0.1.1 defaults otherwise, "
    "ask/tell, each evaluation from scratch, its own search",
}


def full_cost(table: Sequence[Curve]) -> float:
    """Dollars to run every configuration of the pool in full: every run's budget."""
    return sum(float(c.epoch_seconds.sum()) * c.devices for c in table) / 3600 * PRICE


def run_method(method: str, table: Sequence[Curve], searcher: str, seed: int) -> Simulation:
    """One replay of ``table`` under ``method`` with ``searcher`` (random | tpe | gp, or
    gp-fork: the Gaussian-process copy costtune once shipped, ``benchmarks/optuna_forks/``,
    with its options as they were by default) and ``seed``."""
    spec = dict(METHODS[method])
    peer = spec.pop("peer", None)
    if peer == "dehb":
        budget = full_cost(table)
        return run_dehb(table, seed, budget)
    if searcher == "gp-fork":
        sys.path.insert(0, str(HERE))
        from optuna_forks.pools import GpPool

        fields, lab, stop = split(spec)
        settings = ReplaySettings(seed=seed, price=PRICE, **fields)
        if peer is not None or stop.get("stopping", "none") != "none":
            raise ValueError(f"--searcher gp-fork replays the rungs alone, not {method}")
        longest = max(c.epochs for c in table)
        fork = GpPool(table, seed=seed)
        policy = lab_policy(settings, lab, longest, len(table))
        fork.policy = policy
        return simulate(
            [],
            policy,
            usd_per_device_hour=PRICE,
            max_epochs=longest,
            next_curve=fork.ask,
            on_trial_end=fork.tell,
        )
    if searcher == "tpe-pruned":  # the lab's: TPE told a stopped trial as PRUNED
        from lab.pruned_tell import PrunedTellPool

        from costtune.replay import policy_of

        longest = max(c.epochs for c in table)
        pool = PrunedTellPool(table, "tpe", seed=seed)
        if peer is None and spec:
            raise ValueError(f"--searcher tpe-pruned replays the default and the peers, not {method}")
        policy = (
            policy_of(ReplaySettings(), longest)
            if peer is None
            else OptunaSHA()
            if peer == "optuna-sha"
            else RayASHA(max_t=longest)
        )
        return simulate(
            [],
            policy,
            usd_per_device_hour=PRICE,
            max_epochs=longest,
            next_curve=pool.ask,
            on_trial_end=pool.tell,
            thaw=policy.next_promotion if peer is None else None,
        )
    if peer is None:
        if spec.get("thaw"):
            spec["budget"] = full_cost(table)
        return lab_replay(table, {"searcher": searcher, "seed": seed, "price": PRICE, **spec}).simulation
    from costtune.search.pool import OrderedPool, SamplerPool

    longest = max(c.epochs for c in table)
    pool: Any = (
        SamplerPool(table, searcher, seed=seed)
        if searcher in ("tpe", "gp")
        else OrderedPool(table, seed=seed)
    )
    policy: Any = OptunaSHA() if peer == "optuna-sha" else RayASHA(max_t=longest)
    return simulate(
        [], policy, usd_per_device_hour=PRICE, max_epochs=longest, next_curve=pool.ask, on_trial_end=pool.tell
    )


@dataclasses.dataclass
class Job:
    family: str
    pool: str
    method: str
    searcher: str
    seed: int


_TABLES: dict[str, tuple[list[Curve], float, dict[str, float]]] = {}


def _table(family: str, pool: str) -> tuple[list[Curve], float, dict[str, float]]:
    """The pool's curves, the budget (every configuration in full) and its targets."""
    if pool not in _TABLES:
        frame = pools(family)[pool]()
        table = list(curves_from_frame(frame).values())
        budget = full_cost(table)
        finals = np.sort([float(c.val_loss[-1]) for c in table if np.isfinite(c.val_loss[-1])])
        _TABLES[pool] = (table, budget, {"best": float(finals[0]), "top5": float(finals[4])})
    return _TABLES[pool]


def run_job(job: Job) -> dict[str, Any]:
    table, budget, targets = _table(job.family, job.pool)
    started = time.perf_counter()
    sim = run_method(job.method, table, job.searcher, job.seed)
    row: dict[str, Any] = dataclasses.asdict(job)
    for name, target in targets.items():
        cost = sim.cost_to_target(target)
        row[f"{name}_reached"] = cost is not None
        row[f"{name}_ratio"] = 1.0 if cost is None else cost / budget
    row["spent_ratio"] = sim.total_usd / budget
    row["trials"] = len(sim.stopped_at)
    row["seconds"] = time.perf_counter() - started
    return row


# ----------------------------------------------------------------------------------- tables
def geo(values: Sequence[float]) -> float:
    values = np.asarray(values, dtype=float)
    return float(np.exp(np.mean(np.log(np.maximum(values, 1e-12))))) if len(values) else math.nan


def sign_test(wins: int, losses: int) -> float:
    """Two-sided binomial p of ``wins`` against ``losses`` (ties dropped)."""
    from scipy.stats import binomtest

    n = wins + losses
    return float(binomtest(wins, n, 0.5).pvalue) if n else 1.0


def paired(frame: pd.DataFrame, a: str, b: str, target: str, rng: np.random.Generator) -> dict[str, Any]:
    """``a`` against ``b`` over the same (pool, seed) runs: geo-mean ratio, 95% bootstrap, sign test."""
    col = f"{target}_ratio"
    left = frame[frame.method == a].set_index(["pool", "seed"])[col]
    right = frame[frame.method == b].set_index(["pool", "seed"])[col]
    both = pd.concat([left, right], axis=1, keys=["a", "b"]).dropna()
    logs = np.log(both["a"].to_numpy()) - np.log(both["b"].to_numpy())
    boot = (
        [float(np.exp(rng.choice(logs, len(logs)).mean())) for _ in range(2000)] if len(logs) else [math.nan]
    )
    wins = int((both["a"] < both["b"]).sum())
    losses = int((both["a"] > both["b"]).sum())
    return {
        "ratio": float(np.exp(logs.mean())) if len(logs) else math.nan,
        "low": float(np.percentile(boot, 2.5)),
        "high": float(np.percentile(boot, 97.5)),
        "wins": wins,
        "losses": losses,
        "p": sign_test(wins, losses),
    }


def table_markdown(frame: pd.DataFrame, family: str, against: Sequence[str]) -> str:
    rng = np.random.default_rng(0)
    sub = frame[frame.family == family]
    methods = list(dict.fromkeys(sub.method))
    lines = []
    for target in ("best", "top5"):
        goal = "best final loss" if target == "best" else "5th best final loss"
        head = f"| {family}, to the pool's {goal} | runs reached | geo-mean $ ÷ budget |"
        head += "".join(f" × {b} (95%) | W/L p vs {b} |" for b in against)
        lines += [head, "|---|---:|---:|" + "---:|---:|" * len(against)]
        for method in methods:
            m = sub[sub.method == method]
            medians = m.groupby("pool")[f"{target}_ratio"].median()
            cells = [
                method,
                f"{int(m[f'{target}_reached'].sum())}/{len(m)}",
                f"{geo(medians.to_numpy()):.3f}",
            ]
            for b in against:
                if b == method:
                    cells += ["—", "—"]
                    continue
                r = paired(sub, method, b, target, rng)
                cells += [
                    f"{r['ratio']:.2f} ({r['low']:.2f}–{r['high']:.2f})",
                    f"{r['wins']}/{r['losses']} p={r['p']:.2g}",
                ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default="lcbench,real,synthetic")
    parser.add_argument("--methods", default="default,rungs,optuna-sha,ray-asha")
    parser.add_argument("--against", default="optuna-sha,ray-asha")
    parser.add_argument(
        "--searcher", choices=["random", "tpe", "gp", "gp-fork", "tpe-pruned"], default="random"
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--pools", default=None, help="only these pools (comma-separated names)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write every run's row (CSV)")
    parser.add_argument(
        "--from", dest="previous", type=Path, action="append", default=[], help="add rows of earlier runs"
    )
    parser.add_argument("--table-only", action="store_true", help="run nothing: tables of the --from rows")
    args = parser.parse_args()
    methods = args.methods.split(",")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise SystemExit(f"--methods: unknown {unknown[0]!r}; choose from {', '.join(METHODS)}")
    families = args.families.split(",")
    jobs = [
        Job(family, pool, method, args.searcher, seed)
        for family in families
        for pool in pools(family)
        if args.pools is None or pool in args.pools.split(",")
        for seed in range(args.first_seed, args.first_seed + args.seeds)
        for method in methods
    ]
    if args.table_only:
        jobs = []
    started = time.perf_counter()
    if args.jobs > 1 and jobs:
        with ProcessPoolExecutor(args.jobs) as ex:
            rows = list(ex.map(run_job, jobs, chunksize=max(1, len(jobs) // (args.jobs * 8))))
    else:
        rows = [run_job(j) for j in jobs]
    frame = pd.concat([pd.DataFrame(rows), *(pd.read_csv(p) for p in args.previous)], ignore_index=True)
    if args.table_only:  # the --from rows of the families and methods asked for, in that order
        frame = frame[frame.family.isin(families) & frame.method.isin(methods)]
        frame = frame.assign(method=pd.Categorical(frame.method, methods, ordered=True)).sort_values("method")
        frame["method"] = frame.method.astype(str)
    if args.out is not None:
        frame.to_csv(args.out, index=False)
    against = [a for a in args.against.split(",") if a in set(frame.method)]
    took = time.perf_counter() - started
    searchers = ", ".join(sorted(set(frame.searcher)))
    print(
        f"# {len(rows)} runs in {took:.0f} s; searcher {searchers} on both sides; "
        "budget = every configuration in full; failures count 1.0"
        + ("; dehb: its own search" if "dehb" in set(frame.method) else "")
        + "\n"
    )
    for family in dict.fromkeys(frame.family):
        print(table_markdown(frame, family, against))
    for peer in [p for p in PEER_SETTINGS if p in set(frame.method)]:
        print(f"- {peer}: {PEER_SETTINGS[peer]}")


if __name__ == "__main__":
    main()
