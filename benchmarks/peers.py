"""Multi-fidelity peers through their own packages (``pip install 'costtune[bench]'``).

Every peer is driven through its own public ask/tell (or scheduler) API by one event loop,
:func:`run_workers`, on N simulated asynchronous workers: a free worker asks the peer for a
job (a configuration and how many epochs to train it from scratch), trains it epoch by
epoch on the recorded curve's clock, reports each epoch (the peer may stop it) and tells the
peer how it ended. Ties on the clock break in the order jobs started, so a run is the same
every time. The trace holds (cumulative $, val CE, clock s) of every epoch in the order the
epochs finished, until the budget is spent:

- ``optuna-*``: Optuna's TPESampler (default settings) with a pruner (the caller's
  ``optuna_pruner``), ``study.ask`` / ``trial.report`` / ``trial.should_prune``
  / ``study.tell`` — what ``study.optimize`` does inside, one trial per worker;
- ``dehb``: DEHB (Awad et al. 2021), the ``dehb`` package's ask/tell, min/max fidelity 5/52
  epochs, η = 3 (its default). DEHB evaluates a configuration at a fidelity from scratch, so
  each evaluation pays epochs 1..b.
- ``smac-hb``: SMAC3's ``MultiFidelityFacade`` with its Hyperband intensifier, budgets 5..52,
  η = 3 (its default), ask/tell; evaluations from scratch, as SMAC runs them.
- ``synetune-bohb``, ``synetune-asha-cqr``: Syne Tune's ``BOHB`` and ``ASHACQR`` schedulers
  (ASHA stopping type: a trial continues epoch by epoch until a rung stops it), grace period
  5, reduction factor 3 (its default), driven through the scheduler API (suggest,
  on_trial_add, on_trial_result, on_trial_complete) that Syne Tune's own Tuner calls.
  (Syne Tune 0.16, the version on the registry here, no longer ships MOBSTER, DyHPO or
  Hyper-Tune.)
"""

from __future__ import annotations

import datetime
import heapq
import tempfile
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from costtune.core.curves import Curve

PEER_SETTINGS = {
    "dehb": "DEHB(min_fidelity=5, max_fidelity=52, eta=3), ask/tell, from scratch",
    "smac-hb": "MultiFidelityFacade + Hyperband(eta=3), budgets 5..52, ask/tell, from scratch",
    "synetune-bohb": "syne_tune BOHB(grace_period=5, reduction_factor=3, max_t=52), stopping type",
    "synetune-asha-cqr": "syne_tune ASHACQR(grace_period=5, reduction_factor=3, max_t=52), stopping type",
}

Trace = list[tuple[float, float, float]]  # (cumulative $, val CE, clock s) of every epoch run
Evaluate = Callable[[dict[str, Any]], Curve]  # a configuration → its full curve
#: the epochs of a full run: 52 (LCBench); a caller replaying longer curves sets it
MAX_EPOCHS = 52
#: hyperparameters unused_0… (uniform in [0, 1]) no curve depends on; a caller sets it
UNUSED = 0


class Peer(Protocol):
    """What :func:`run_workers` needs of an optimiser."""

    def ask(self) -> tuple[Any, dict[str, Any], int] | None:
        """(handle, configuration, epochs to train from scratch), or None: nothing to run."""

    def report(self, handle: Any, epoch: int, loss: float) -> bool:
        """One epoch done; True: go on."""

    def tell(self, handle: Any, epoch: int, loss: float) -> None:
        """The job ended at ``epoch`` (stopped, or trained as long as asked)."""


def run_workers(
    peer: Peer,
    evaluate: Evaluate,
    workers: int,
    budget: float,
    usd_per_hour: float,
    stop_below: float | None = None,
) -> Trace:
    """Drive ``peer`` on ``workers`` simulated workers until ``budget`` dollars are spent, or
    (``stop_below``) until an epoch's loss reaches it: the trace up to there is the same."""
    trace: Trace = []
    spent = 0.0
    running: list[tuple[float, int, int]] = []  # (epoch finish time, job number, epoch)
    jobs: dict[int, tuple[Any, Curve, int]] = {}
    started = 0

    def start(now: float) -> bool:
        nonlocal started
        asked = peer.ask()
        if asked is None:
            return False
        handle, config, epochs = asked
        curve = evaluate(config)
        jobs[started] = (handle, curve, min(epochs, curve.epochs))
        heapq.heappush(running, (now + float(curve.epoch_seconds[0]), started, 1))
        started += 1
        return True

    for _ in range(workers):
        if not start(0.0):
            break
    while running and spent < budget:
        now, number, epoch = heapq.heappop(running)
        handle, curve, epochs = jobs[number]
        spent += float(curve.epoch_seconds[epoch - 1]) * curve.devices / 3600 * usd_per_hour
        loss = float(curve.val_loss[epoch - 1])
        trace.append((spent, loss, now))
        if spent >= budget or (stop_below is not None and loss <= stop_below):
            break
        if epoch < epochs and peer.report(handle, epoch, loss):
            heapq.heappush(running, (now + float(curve.epoch_seconds[epoch]), number, epoch + 1))
            continue
        peer.tell(handle, epoch, loss)
        del jobs[number]
        start(now)
    return trace


def _configspace(seed: int) -> Any:
    from ConfigSpace import ConfigurationSpace, Float, Integer

    cs = ConfigurationSpace(seed=seed)
    cs.add(
        [
            Integer("batch_size", (16, 512), log=True),
            Float("learning_rate", (1e-4, 1e-1), log=True),
            Float("momentum", (0.1, 0.99)),
            Float("weight_decay", (1e-5, 1e-1), log=True),
            Integer("num_layers", (1, 5)),
            Integer("max_units", (64, 1024), log=True),
            Float("max_dropout", (0.0, 1.0)),
            *(Float(f"unused_{i}", (0.0, 1.0)) for i in range(UNUSED)),
        ]
    )
    return cs


class OptunaPeer:
    """Optuna's TPESampler + a pruner through ask/tell (``suggest`` samples the space)."""

    def __init__(
        self,
        pruner: Any,
        seed: int,
        suggest: Callable[[Any], dict[str, Any]],
        multivariate: bool | None = None,
        constant_liar: bool = False,
        gp: bool = False,
    ) -> None:
        import optuna
        from optuna_forks.pools import gp_sampler

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        # multivariate None: Optuna's default (in Optuna 5, multivariate for one objective);
        # constant_liar: what Optuna's docs advise when trials run in parallel; gp: Optuna's
        # GPSampler (costtune's copy only skips a CPU device mode; the same suggestions)
        sampler = (
            gp_sampler(seed)
            if gp
            else optuna.samplers.TPESampler(seed=seed, multivariate=multivariate, constant_liar=constant_liar)
        )
        # a named study: HyperbandPruner puts a trial in a bracket by a hash of the study's name
        # and the trial's number, so an unnamed (random) study gave the same seed another run;
        # Optuna's docs ask for a study_name to make it reproducible
        self.study = optuna.create_study(study_name=f"peer-{seed}", sampler=sampler, pruner=pruner)
        self._suggest = suggest

    def ask(self) -> tuple[Any, dict[str, Any], int]:
        trial = self.study.ask()
        return trial, self._suggest(trial), MAX_EPOCHS

    def report(self, handle: Any, epoch: int, loss: float) -> bool:
        handle.report(loss, epoch)
        return not handle.should_prune()

    def tell(self, handle: Any, epoch: int, loss: float) -> None:
        if epoch < MAX_EPOCHS:
            self.study.tell(handle, state=self._optuna.trial.TrialState.PRUNED)
        else:
            self.study.tell(handle, loss)


class DehbPeer:
    """DEHB's ask/tell; each job trains its fidelity's epochs from scratch."""

    def __init__(self, seed: int, output_path: str) -> None:
        from dehb import DEHB

        # n_workers=1: the event loop asks for several jobs at once itself (DEHB's brackets
        # track pending jobs); n_workers > 1 only starts a Dask cluster for DEHB's own run()
        # loop — 8 processes per run, which outlived the run here.
        self.opt = DEHB(
            cs=_configspace(seed),
            min_fidelity=5,
            max_fidelity=MAX_EPOCHS,
            eta=3,
            n_workers=1,
            seed=seed,
            output_path=output_path,
            save_freq="end",
            log_level="ERROR",
        )

    def ask(self) -> tuple[Any, dict[str, Any], int]:
        job = self.opt.ask()
        return job, dict(job["config"]), round(float(job["fidelity"]))

    def report(self, handle: Any, epoch: int, loss: float) -> bool:
        return True

    def tell(self, handle: Any, epoch: int, loss: float) -> None:
        self.opt.tell(handle, {"fitness": loss, "cost": float(epoch)})


class SmacPeer:
    """SMAC3's MultiFidelityFacade with its Hyperband intensifier, ask/tell, from scratch."""

    def __init__(self, seed: int, output_path: str) -> None:
        from smac import MultiFidelityFacade, Scenario
        from smac.runhistory.dataclasses import TrialValue

        self._value = TrialValue
        scenario = Scenario(
            _configspace(seed),
            deterministic=True,
            n_trials=100_000,
            min_budget=5,
            max_budget=MAX_EPOCHS,
            seed=seed,
            output_directory=output_path,
        )
        self.smac = MultiFidelityFacade(
            scenario,
            lambda config, seed=0, budget=MAX_EPOCHS: 0.0,  # evaluated through ask/tell
            intensifier=MultiFidelityFacade.get_intensifier(scenario, eta=3),
            overwrite=True,
            logging_level=40,
        )

    def ask(self) -> tuple[Any, dict[str, Any], int]:
        info = self.smac.ask()
        return info, dict(info.config), round(float(info.budget or MAX_EPOCHS))

    def report(self, handle: Any, epoch: int, loss: float) -> bool:
        return True

    def tell(self, handle: Any, epoch: int, loss: float) -> None:
        self.smac.tell(handle, self._value(cost=loss))


class SyneTunePeer:
    """A Syne Tune scheduler through the calls its Tuner makes (stopping-type ASHA)."""

    def __init__(self, name: str, seed: int) -> None:
        from syne_tune.config_space import lograndint, loguniform, randint, uniform
        from syne_tune.optimizer.baselines import ASHACQR, BOHB
        from syne_tune.optimizer.scheduler import SchedulerDecision

        self._continue = SchedulerDecision.CONTINUE
        # Syne Tune 0.16's KDE searcher draws its random configurations (the start-up and a
        # third of the rest) from numpy's global generator, not from random_seed: unseeded,
        # the same seed gave different runs (stop 18). Seeded here, a run is reproducible.
        np.random.seed(seed)
        space = {
            "batch_size": lograndint(16, 512),
            "learning_rate": loguniform(1e-4, 1e-1),
            "momentum": uniform(0.1, 0.99),
            "weight_decay": loguniform(1e-5, 1e-1),
            "num_layers": randint(1, 5),
            "max_units": lograndint(64, 1024),
            "max_dropout": uniform(0.0, 1.0),
            **{f"unused_{i}": uniform(0.0, 1.0) for i in range(UNUSED)},
            "epochs": MAX_EPOCHS,
        }
        cls = {"synetune-bohb": BOHB, "synetune-asha-cqr": ASHACQR}[name]
        self.scheduler = cls(
            space,
            metric="val_loss",
            time_attr="epoch",
            max_t=MAX_EPOCHS,
            do_minimize=True,
            random_seed=seed,
            grace_period=5,
            reduction_factor=3,
        )
        self._next_id = 0

    def ask(self) -> tuple[Any, dict[str, Any], int] | None:
        from syne_tune.backend.trial_status import Trial

        suggestion = self.scheduler.suggest()
        if suggestion is None:
            return None
        trial = Trial(trial_id=self._next_id, config=suggestion.config, creation_time=_EPOCH)
        self._next_id += 1
        self.scheduler.on_trial_add(trial)
        return trial, {k: v for k, v in suggestion.config.items() if k != "epochs"}, MAX_EPOCHS

    def report(self, handle: Any, epoch: int, loss: float) -> bool:
        return bool(
            self.scheduler.on_trial_result(handle, {"epoch": epoch, "val_loss": loss}) == self._continue
        )

    def tell(self, handle: Any, epoch: int, loss: float) -> None:
        if epoch >= MAX_EPOCHS:
            self.scheduler.on_trial_complete(handle, {"epoch": epoch, "val_loss": loss})


_EPOCH = datetime.datetime(2026, 1, 1)  # trial creation times play no part in the decisions


def run_peer(
    name: str,
    evaluate: Evaluate,
    seed: int,
    budget: float,
    usd_per_hour: float,
    workers: int = 1,
    optuna_pruner: Any = None,
    suggest: Callable[[Any], dict[str, Any]] | None = None,
    multivariate: bool | None = None,
    constant_liar: bool = False,
    gp: bool = False,
    stop_below: float | None = None,
) -> Trace:
    """One run of peer ``name`` (PEER_SETTINGS, or an Optuna pruner with ``suggest``)."""
    with tempfile.TemporaryDirectory() as tmp:
        peer: Peer
        if optuna_pruner is not None and suggest is not None:
            peer = OptunaPeer(optuna_pruner, seed, suggest, multivariate, constant_liar, gp)
        elif name == "dehb":
            peer = DehbPeer(seed, tmp)
        elif name == "smac-hb":
            peer = SmacPeer(seed, tmp)
        else:
            peer = SyneTunePeer(name, seed)
        return run_workers(peer, evaluate, workers, budget, usd_per_hour, stop_below)
