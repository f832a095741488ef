"""Curves where the slow starters end best: does a sweep's scheduler still reach the target?

A held-out kind that LCBench's data does not hold (benchmarks/RESULTS.md, stop 29: there the
large learning rates mostly end best *and* start fast). Synthetic curves, made here from a
seed, of three kinds over 300 configurations (learning rate log-uniform in [1e-4, 1e-1], weight
decay log-uniform in [1e-5, 1e-2], width log-uniform in [32, 1024]) trained 60 epochs, an
epoch's seconds growing with the width:

- ``slow``: power-law curves, loss(e) = final + 2 e^(−0.6 a), the exponent a rising with the
  learning rate (0.5 at 1e-4, 3 at 1e-1) and the final loss too: the small learning rates learn
  slowly and end best.
- ``plateau``: a curve stays at the initial loss (2.3) until epoch t0 and then drops to its
  final loss; t0 runs from 3 epochs at the largest learning rate to 38 at the smallest, which
  end best. An extreme: at epoch 5 the configurations that end best have not moved at all.
- ``crossing``: exponential curves, loss(e) = final + (2.3 − final) e^(−e/τ), the final loss
  best at a learning rate of 3e-3 and the best weight decay (plus a configuration's own noise,
  σ 0.02), the pace τ each configuration's own (uniform in [2, 15] epochs) whatever its
  hyperparameters: the curves cross, early ranks say little of the final ones (Spearman 0.21 at
  epoch 5, 0.64 at epoch 25 on table 0) but mislead no more than chance.

Each table is replayed as ``costtune replay --searcher gp`` does (the GP proposing among the
recorded configurations; the sweep's default stopping rule; no budget, so a replay ends when
every configuration has been tried or stopped), with the scheduler's defaults, with
``--no-escalate``, and as FIFO without stopping (every proposal run to the end). The target is
the 6th-best final loss of the table. Prints, per kind and setting: runs reaching the target,
the median cost to target (a failure counted as the recorded sweep's whole cost) as a share of
the recorded sweep's cost, the median best loss, and in how many runs the replay's findings
(``costtune replay``'s ``note:`` lines) said that most stopped trials had not moved yet.

    .venv/bin/python benchmarks/slow_starters.py [--tables 3 --seeds 3 --first-table 0] [--kinds slow]
        [--settings "default,rungs only,stopper only"] [--until-target] [--jobs 2]

``--until-target`` starts no configuration once one has reached the target (the same cost to
target, a fraction of the time); ``--jobs`` runs the replays in that many processes. The paired
column gives the sign test's p and the geometric mean of the paired ratios beside the counts.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab.hyperband import MISRANK_MIN, auto_warmup_trials
from lab.hyperband import LabHyperband as AsyncHyperband
from lab.stopping import LabStopping, LabStoppingRule
from optuna_forks.pools import MODEL_CHECK_DEFAULT, GpPool, TpePool
from paired import geo_mean, sign_test

from costtune.core.analysis import MOVED_SHARE
from costtune.core.curves import Curve
from costtune.core.policy import Decision, MarginalRoiStopping
from costtune.core.simulate import simulate
from costtune.search.pool import SamplerPool

EPOCHS = 60
KINDS = ("slow", "plateau", "crossing")
CONFIGS = 300
USD_PER_HOUR = 2.5


def table(kind: str, seed: int) -> list[Curve]:
    """300 synthetic curves of ``kind`` (one of :data:`KINDS`), seeded."""
    rng = np.random.default_rng([seed, KINDS.index(kind)])
    e = np.arange(1, EPOCHS + 1)
    curves = []
    for i in range(CONFIGS):
        lr, wd, width = 10 ** rng.uniform(-4, -1), 10 ** rng.uniform(-5, -2), 2 ** rng.uniform(5, 10)
        u = (np.log10(lr) + 4) / 3  # 0 at the smallest learning rate, 1 at the largest
        off = abs(np.log10(wd) + 3.5) / 1.5  # 0 at the best weight decay
        if kind == "slow":
            final = 0.2 + 0.4 * u + 0.1 * off
            loss = final + 2.0 * e ** (-0.6 * (0.5 + 2.5 * u))
        elif kind == "crossing":
            final = 0.2 + 0.3 * ((np.log10(lr) + 2.5) / 1.5) ** 2 + 0.1 * off + rng.normal(0, 0.02)
            pace = 2 + 13 * rng.random()  # the configuration's own, whatever its hyperparameters
            loss = final + (2.3 - final) * np.exp(-e / pace)
        else:
            final = 0.2 + 0.3 * u + 0.1 * off + 0.05 * (width < 128)
            t0 = 3 + 35 * (1 - u) ** 1.5
            loss = final + (2.3 - final) / (1 + np.exp((e - t0) / 2.0))
        loss = loss + rng.normal(0, 0.005, EPOCHS)
        seconds = np.full(EPOCHS, 10 + 40 * width / 1024)
        hp = {"learning_rate": float(lr), "weight_decay": float(wd), "width": float(width)}
        curves.append(Curve(f"c{i}", hp, loss, seconds, 1.0))
    return curves


#: what a replay may run: the default, --no-escalate, and, to see which part fails, the default's
#: rungs without its stopper, its stopper without rungs, and neither; two prototypes: the flat
#: guard, and a stall that only a gain of 2% of the sweep's ends (``stall_min_gain``); the
#: default with ``stopping.noise_aware`` on; and with ``scheduler.rung_checks: 5``; the default
#: without its hedge, the hedge's prototypes; and the default's brackets opened on a stall alone
#: (``stall only``: not on a first rung whose kept trials reverse their order, stop 39), or on
#: such a rung alone (``misrank only``, a prototype: never on a stall); and the switch to full runs
#: tested by the full runs alone (``full runs judged``: ``hedge_judges: full_runs``, the default
#: until stop 42; ``every bracket judged``, the default since, spelt out); stop 44's prototypes:
#: the GP on its n longest runs (``longest runs n``), that only while the first rung's kept trials
#: hold their order with Kendall's τ below θ (``weak ranks θ``), the brackets opened at τ ≤ θ
#: (``open below θ``), and both (``open and fit below θ``); stop 46: the GP's leave-one-out check
#: at another θ (``model check θ``) or off (``no model check``; the default until stop 46)
SETTINGS = (
    "default",
    "--no-escalate",
    "rungs only",
    "stopper only",
    "fifo, no stopping",
    "default + flat guard",
    "default + stall 2%",
    "default + noise-aware",
    "default + rung checks",
    "--no-hedge",
    "hedge prototype",
    "hedge prototype no switch",
    "stall only",
    "misrank only",
    "every bracket judged",
    "full runs judged",
    "default with tpe",
    "model check 0.4",
    "no model check",
    "optuna tpe + sha",
    "gp over epochs",
    "--warmup-trials 0",
    "longest runs 6",
    "longest runs 10",
    "weak ranks 0.3",
    "weak ranks 0.5",
    "open below 0.3",
    "open below 0.5",
    "open and fit below 0.3",
)


class FlatStartGuard:
    """A prototype, not in the product: the findings' ``stopped_before_moving`` rule acted on.

    Once at least ``min_judged`` trials were stopped (by the rungs or the stopper, before the
    last epoch) and at least half of them had not moved from their first loss (by 2% of what
    the sweep gained: :data:`costtune.core.analysis.MOVED_SHARE`), it latches on: from then, a
    trial that has not moved is not judged at all; once it moves, it is left alone for ``hold``
    more epochs (a drop takes a few; the stopper's smoothed curve, a median of 5, lags it), and
    then the rungs count its epochs from the move (its first rung is behind it: judged at
    once). The policy's wrapper must see every epoch first (``simulate`` asks the policy before
    the stopper).
    """

    def __init__(self, min_judged: int = 10, hold: int = 10, max_epochs: int = EPOCHS) -> None:
        self.min_judged, self.hold, self.max_epochs = min_judged, hold, max_epochs
        self.first: dict[str, float] = {}
        self.low: dict[str, float] = {}
        self.epoch: dict[str, int] = {}
        self.best = float("inf")
        self.judged = self.flat = 0
        self.on = False
        self.spared: set[str] = set()
        self.start: dict[str, int] = {}  # a spared trial's epoch of moving

    def see(self, trial: str, epoch: int, loss: float) -> None:
        self.first.setdefault(trial, loss)
        self.low[trial] = min(self.low.get(trial, loss), loss)
        self.epoch[trial] = epoch
        self.best = min(self.best, loss)
        if self.on and not self.moved(trial):
            self.spared.add(trial)
        elif trial in self.spared:
            self.start.setdefault(trial, epoch)

    def moved(self, trial: str) -> bool:
        gain = statistics.median(self.first.values()) - self.best
        return self.low[trial] < self.first[trial] - MOVED_SHARE * gain

    def holds(self, trial: str, span: int) -> bool:
        """Whether ``trial`` is spared: unmoved, or moved fewer than ``span`` epochs ago."""
        if trial not in self.spared:
            return False
        return trial not in self.start or self.epoch[trial] - self.start[trial] + 1 < span

    def stopped(self, trial: str) -> None:
        self.judged += 1
        self.flat += not self.moved(trial)
        self.on = self.on or (self.judged >= self.min_judged and 2 * self.flat >= self.judged)

    def policy(self, inner: AsyncHyperband) -> Any:
        guard = self

        class Guarded:
            def on_add(self, trial: str) -> int:
                return inner.on_add(trial)

            def on_result(self, trial: str, epoch: int, loss: float, usd: float) -> Decision:
                guard.see(trial, epoch, loss)
                if guard.holds(trial, guard.hold):
                    return Decision.CONTINUE
                shifted = epoch - guard.start[trial] + 1 if trial in guard.start else epoch
                decision = inner.on_result(trial, shifted, loss, usd)
                if decision is Decision.STOP and epoch < guard.max_epochs:
                    guard.stopped(trial)
                return decision

            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

        return Guarded()

    def stopper(self, inner: MarginalRoiStopping) -> Any:
        guard = self

        class Guarded:
            def on_result(self, trial: str, loss: float, hours: float, usd: float) -> Any:
                said = inner.on_result(trial, loss, hours, usd)  # its books see every epoch
                if said is None or guard.holds(trial, guard.hold):
                    return None
                guard.stopped(trial)
                return said

            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

        return Guarded()


class HedgeBracket:
    """A prototype, not in the product: Hyperband's most conservative bracket, plain full runs,
    among the brackets a stall opens (``escalate``), and the stopper does not judge a trial of a
    later bracket before that bracket's first rung (a bracket without rungs: never). Until a
    stall nothing changes; after one, Hyperband's proportions send about one new trial in twelve
    (η = 5, three brackets) to full runs, which no early loss judges."""

    @staticmethod
    def around(policy: AsyncHyperband, switch: bool = False) -> AsyncHyperband:
        """``switch``: once a trial of the bracket without rungs is the sweep's best, every new
        trial goes there (a trial no early loss judged beat all the rungs let through)."""
        policy.rungs_by_bracket.append([])
        policy.rungs.append({})
        if not switch:
            return policy
        inner = policy

        class Switching:
            def on_add(self, trial: str) -> int:
                if getattr(inner, "_hedge_won", False):
                    from costtune.core.policy.hyperband import TrialState

                    inner.trials[trial] = TrialState(bracket=len(inner.rungs_by_bracket) - 1)
                    return len(inner.rungs_by_bracket) - 1
                return inner.on_add(trial)

            def on_result(self, trial: str, epoch: int, loss: float, usd: float) -> Decision:
                before = inner.best_loss
                decision = inner.on_result(trial, epoch, loss, usd)
                state = inner.trials[trial]
                if state.bracket == len(inner.rungs_by_bracket) - 1 and loss < before:
                    inner._hedge_won = True  # type: ignore[attr-defined]
                return decision

            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

        return Switching()  # type: ignore[return-value]

    @staticmethod
    def stopper(stopping: MarginalRoiStopping, policy: AsyncHyperband) -> Any:
        epochs: dict[str, int] = {}

        class Guarded:
            def on_result(self, trial: str, loss: float, hours: float, usd: float) -> Any:
                epochs[trial] = epochs.get(trial, 0) + 1
                said = stopping.on_result(trial, loss, hours, usd)
                state = policy.trials.get(trial)
                if said is not None and state is not None and state.bracket > 0:
                    ladder = policy.rungs_by_bracket[state.bracket]
                    if not ladder or epochs[trial] < ladder[0]:
                        return None
                return said

            def __getattr__(self, name: str) -> Any:
                return getattr(stopping, name)

        return Guarded()


class NoStall(AsyncHyperband):
    """(``misrank only``, a prototype) the brackets open on a reversed first rung, never on a stall."""

    def _stalled(self) -> bool:
        return False


class PeerRun:
    """A peer's run over a table, one trial at a time: what :func:`replay`'s simulation answers
    (``cost_to_target``, ``best_loss``, ``findings``) from every epoch it ran, in order."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.best_loss = float("inf")
        self._reached: list[tuple[float, float]] = []  # (dollars spent, loss) at each new best
        self.trials: list[tuple[str, int]] = []  # (configuration, epochs it ran), in the order run

    def epoch(self, seconds: float, loss: float) -> None:
        self.spent += seconds / 3600 * USD_PER_HOUR
        if loss < self.best_loss:
            self.best_loss = loss
            self._reached.append((self.spent, loss))

    def cost_to_target(self, target: float) -> float | None:
        return next((usd for usd, loss in self._reached if loss <= target), None)

    def findings(self, max_epochs: int) -> list[Any]:
        return []  # the peer's run says nothing of its own decisions


def optuna_sha(curves: list[Curve], seed: int, target: float | None = None) -> PeerRun:
    """(``optuna tpe + sha``) The peer #13's held-out figures were measured against, through
    Optuna's own code: ``TPESampler(seed)`` (Optuna's defaults) and
    ``SuccessiveHalvingPruner(min_resource=5, reduction_factor=5)`` at costtune's rungs, asked
    and told as an Optuna user's loop does (each epoch reported, ``should_prune()`` asked, a
    pruned trial told as PRUNED). Over the table's configurations as costtune's replay: the
    sampler's proposal is snapped to the nearest unused one (:class:`costtune.search.pool.SamplerPool`),
    which then runs as an enqueued trial with those exact values. With ``target``, no trial
    starts once one has reached it (what came after cannot change the cost to reach it)."""
    import optuna

    pool = SamplerPool(curves, sampler=optuna.samplers.TPESampler(seed=seed))
    pool.study.pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=5, reduction_factor=5)
    run = PeerRun()
    while (curve := pool.ask()) is not None:
        pool._pending.pop(curve.config_id)  # told here, epoch by epoch, not through pool.tell
        params = pool._params(curve)
        pool.study.enqueue_trial(params)
        trial = pool.study.ask(fixed_distributions=pool.space)
        assert trial.params == params, "an enqueued trial runs the configuration snapped to"
        for e in range(1, EPOCHS + 1):
            loss = float(curve.val_loss[e - 1])
            run.epoch(float(curve.epoch_seconds[e - 1]), loss)
            trial.report(loss, e)
            if e < EPOCHS and trial.should_prune():
                pool.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                break
        else:
            pool.study.tell(trial, loss)
        run.trials.append((curve.config_id, e))
        if target is not None and run.best_loss <= target:
            break
    return run


def replay(curves: list[Curve], setting: str, seed: int, target: float | None = None) -> Any:
    """One replay of ``curves`` as ``costtune replay --searcher gp`` runs it (``--searcher tpe``
    for ``default with tpe``; ``optuna tpe + sha``: :func:`optuna_sha`).

    With ``target`` (``--until-target``) no configuration starts once a trial has ended at or
    below it: every decision up to the epoch that reached it is the same, so the cost to reach it
    is too (a test compares), and a replay takes a fraction of the time; the best loss is then the
    best when it stopped."""
    if setting == "optuna tpe + sha":
        return optuna_sha(curves, seed, target)
    policy, stopping = None, None
    # every setting but the three that take the default apart has the default's rungs and stopper
    with_default_rungs = [x for x in SETTINGS if x not in ("rungs only", "stopper only", "fifo, no stopping")]
    if setting in (*with_default_rungs, "rungs only"):
        escalate = setting != "--no-escalate"
        warmup = None if setting == "--warmup-trials 0" else auto_warmup_trials(5, len(curves))
        stall = 0.02 if setting == "default + stall 2%" else 0.0
        checks = 5 if setting == "default + rung checks" else 0
        policy = (NoStall if setting == "misrank only" else AsyncHyperband)(
            EPOCHS,
            5,
            5,
            1,
            "loss",
            "floor",
            None,
            warmup,
            escalate,
            stall,
            rung_checks=checks,
            hedge=False,  # off, as in costtune's default; the prototypes bring their own
            # "stall only": the brackets open on a stall alone, not on a reversed first rung
            misrank_min=None if setting == "stall only" else MISRANK_MIN,
            # scheduler.hedge_judges: every_bracket (the default since stop 42): every later
            # bracket's trials test the first rung; full_runs: the full runs alone
            judge_every_bracket=setting != "full runs judged",
            weak_rank_tau=float(setting.split()[-1])
            if setting.startswith(("weak ranks", "open and fit below"))
            else None,
            misrank_tau=float(setting.split()[-1]) if setting.startswith("open") else 0.0,
        )
    if setting in (*with_default_rungs, "stopper only"):
        rule = LabStoppingRule(min_relative_roi=0.3, spare_best=True, max_epochs=EPOCHS, noise_aware=True)
        stopping = LabStopping(rule)
    if setting.startswith("hedge prototype") and policy is not None and stopping is not None:
        policy = HedgeBracket.around(policy, switch=not setting.endswith("no switch"))
        stopping = HedgeBracket.stopper(stopping, policy)
    if setting == "default + flat guard" and policy is not None and stopping is not None:
        guard = FlatStartGuard()
        policy, stopping = guard.policy(policy), guard.stopper(stopping)
    pool = (
        TpePool(curves, seed=seed)
        if setting == "default with tpe"
        else GpPool(
            curves,
            seed=seed,
            fidelity_epochs=EPOCHS if setting == "gp over epochs" else None,
            longest_min=int(setting.split()[-1]) if setting.startswith("longest runs") else None,
            # the sweep's default (searcher.model_check), another θ, or none
            model_check=float(setting.split()[-1])
            if setting.startswith("model check")
            else None
            if setting == "no model check"
            else MODEL_CHECK_DEFAULT,
        )
    )
    # as costtune replay's: the GP forgets misleading rungs once switched (the prototypes' wrappers: no)
    pool.policy = policy if isinstance(policy, AsyncHyperband) else None
    reached = False

    def ask() -> Curve | None:
        return None if reached else pool.ask()

    def tell(config_id: str, epoch: int, loss: float) -> None:
        nonlocal reached
        reached = reached or (target is not None and loss <= target)
        pool.tell(config_id, epoch, loss)

    return simulate(
        [],
        policy,
        usd_per_device_hour=USD_PER_HOUR,
        stopping=stopping,
        max_epochs=EPOCHS,
        next_curve=ask,
        on_trial_end=tell,
    )


def paired_counts(reference: list[float], other: list[float]) -> str:
    """The runs (same table, same seed) where ``other`` paid less / more than ``reference`` to reach
    the target, as "cheaper / dearer", the sign test's two-sided p and the geometric mean of the
    paired ratios (other ÷ reference); a failure counts as 1.0 (the recorded sweep's cost)."""
    cheaper, dearer, p = sign_test(other, reference)
    ratio = geo_mean(o / r for r, o in zip(reference, other, strict=True))
    return f"{cheaper} / {dearer} (p={p:.2g}, ×{ratio:.2f})"


def searcher_seed(t: int, seed: int) -> int:
    """The searchers' seed for run ``seed`` of table ``t``: one of its own per table.

    Until stop 47 the searchers were seeded with the run's seed alone, so a seed's random
    start-up proposals were the same draws in every table; and every table of a kind has its
    best configurations in the same place (a learning rate of 3e-3 and a weight decay of
    10^-3.5 on ``crossing``, the smallest learning rates on ``slow`` and ``plateau``). Where a
    seed's draws fell near that place they did in every table: among the first 5 proposals a
    configuration that reaches the target in 11 and 10 of 30 crossing tables for seeds 0 and 1
    (6 and 1 with this seed; about 4 by chance), 16 of 30 plateau tables for seed 2 (8). The
    60 runs of a kind were three correlated groups, and a rule that runs its first trials to
    the end (Optuna's pruner with nothing yet to compare) was paid for that luck in every table
    at once (RESULTS, stop 47)."""
    return 1000 * t + seed


def one_run(kind: str, t: int, seed: int, setting: str, until_target: bool) -> dict[str, Any]:
    """One replay of table ``t`` of ``kind``: its row (cost to target as a share of the recorded
    sweep's dollars, inf when not reached; the best loss; whether its findings said that most
    stopped trials had not moved). A module-level function, so ``--jobs`` can run it in a process.
    The searchers are seeded by :func:`searcher_seed`."""
    curves = table(kind, t)
    recorded = sum(float(c.epoch_seconds.sum()) for c in curves) / 3600 * USD_PER_HOUR
    target = sorted(float(c.val_loss[-1]) for c in curves)[5]
    sim = replay(curves, setting, searcher_seed(t, seed), target if until_target else None)
    cost = sim.cost_to_target(target)  # None: not reached
    return {
        "kind": kind,
        "table": t,
        "seed": seed,
        "setting": setting,
        "cost_share": float("inf") if cost is None else cost / recorded,
        "best_loss": sim.best_loss,
        "told": any(f.code == "stopped_before_moving" for f in sim.findings(EPOCHS)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tables", type=int, default=3, help="synthetic tables of each kind (from --first-table on)"
    )
    parser.add_argument("--seeds", type=int, default=3, help="searcher seeds per table")
    parser.add_argument(
        "--first-table", type=int, default=0, help="the first table's seed (tables first..first+tables-1)"
    )
    parser.add_argument(
        "--kinds",
        default="slow,plateau",
        help="comma-separated: slow, plateau, crossing (default slow,plateau)",
    )
    parser.add_argument(
        "--settings",
        default="default,--no-escalate,fifo, no stopping",
        help=f"comma-separated, of: {', '.join(SETTINGS).replace('%', '%%')} "
        "(default: default, --no-escalate and fifo, no stopping)",
    )
    parser.add_argument(
        "--out", help="also write every run (kind, table, seed, setting, cost share, best loss) to this CSV"
    )
    parser.add_argument(
        "--until-target",
        action="store_true",
        help="start no configuration once one has reached the target: the same cost to target, "
        "a fraction of the time (the best-loss column is then the best when it stopped)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="replays run in this many processes (default 1)")
    args = parser.parse_args(argv)
    for flag, value in (("--tables", args.tables), ("--seeds", args.seeds), ("--jobs", args.jobs)):
        if value < 1:
            parser.error(f"{flag}: must be at least 1, got {value}")
    if args.first_table < 0:
        parser.error("--first-table: must be at least 0")
    kinds = args.kinds.split(",")
    settings = [x.strip() for x in args.settings.replace("fifo, no stopping", "fifo").split(",")]
    settings = ["fifo, no stopping" if x == "fifo" else x for x in settings]
    for bad, what in (
        ([k for k in kinds if k not in KINDS], "--kinds"),
        (
            [x for x in settings if x not in SETTINGS],
            "--settings",
        ),
    ):
        if bad:
            parser.error(f"{what}: unknown {bad[0]!r}")
    print(
        "| curves | setting | reached | cost to target ÷ recorded (median) | best loss (median) "
        f"| told: stopped before moving | vs {settings[0]}: cheaper / dearer |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        work = [
            (kind, t, seed, setting, args.until_target)
            for t in range(args.first_table, args.first_table + args.tables)
            for seed in range(args.seeds)
            for setting in settings
        ]
        if args.jobs > 1:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(args.jobs) as pool:
                done = list(pool.map(one_run, *zip(*work, strict=True)))
        else:
            done = [one_run(*w) for w in work]
        rows += [{k: v for k, v in r.items() if k != "told"} for r in done]
        first = [min(r["cost_share"], 1.0) for r in done if r["setting"] == settings[0]]
        for setting in settings:
            runs = [r for r in done if r["setting"] == setting]
            reached = sum(np.isfinite(r["cost_share"]) for r in runs)
            shares = [min(r["cost_share"], 1.0) for r in runs]
            paired = paired_counts(first, shares) if setting != settings[0] else "—"
            print(
                f"| {kind} | {setting} | {reached}/{len(runs)} | {statistics.median(shares):.3f} "
                f"| {statistics.median(r['best_loss'] for r in runs):.4f} "
                f"| {sum(r['told'] for r in runs)}/{len(runs)} | {paired} |",
                flush=True,
            )
        if args.out:  # rewritten after each kind: a run stopped later keeps the kinds done
            with open(args.out, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)


if __name__ == "__main__":
    main()
