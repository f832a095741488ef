"""Multi-fidelity peers through their own packages (``pip install 'costtune[bench]'``).

Each runner drives the peer's own optimiser over LCBench curves on one worker and returns
the trace of (cumulative $, val CE) of every epoch in the order it ran, charged until the
budget is spent:

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
import tempfile
from collections.abc import Callable
from typing import Any

from costtune.curves import Curve

Trace = list[tuple[float, float]]
Evaluate = Callable[[dict[str, Any]], Curve]  # a configuration → its 52-epoch curve

PEER_SETTINGS = {
    "dehb": "DEHB(min_fidelity=5, max_fidelity=52, eta=3, n_workers=1), ask/tell, from scratch",
    "smac-hb": "MultiFidelityFacade + Hyperband(eta=3), budgets 5..52, ask/tell, from scratch",
    "synetune-bohb": "syne_tune BOHB(grace_period=5, reduction_factor=3, max_t=52), stopping type",
    "synetune-asha-cqr": "syne_tune ASHACQR(grace_period=5, reduction_factor=3, max_t=52), stopping type",
}


class _Meter:
    """Charges epochs until the budget is spent (then ``done``)."""

    def __init__(self, budget: float, usd_per_hour: float) -> None:
        self.budget = budget
        self.usd_per_hour = usd_per_hour
        self.spent = 0.0
        self.trace: Trace = []

    @property
    def done(self) -> bool:
        return self.spent >= self.budget

    def epoch(self, curve: Curve, epoch: int) -> float:
        self.spent += float(curve.epoch_seconds[epoch - 1]) * curve.devices / 3600 * self.usd_per_hour
        loss = float(curve.val_loss[epoch - 1])
        self.trace.append((self.spent, loss))
        return loss

    def from_scratch(self, curve: Curve, epochs: int) -> float:
        """Train ``epochs`` epochs from scratch; the loss at the last one run."""
        loss = float("inf")
        for e in range(1, epochs + 1):
            loss = self.epoch(curve, e)
            if self.done:
                break
        return loss


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
        ]
    )
    return cs


def run_dehb(evaluate: Evaluate, seed: int, budget: float, usd_per_hour: float) -> Trace:
    from dehb import DEHB

    meter = _Meter(budget, usd_per_hour)
    with tempfile.TemporaryDirectory() as tmp:
        opt = DEHB(
            cs=_configspace(seed),
            min_fidelity=5,
            max_fidelity=52,
            eta=3,
            n_workers=1,
            seed=seed,
            output_path=tmp,
            save_freq="end",
            log_level="ERROR",
        )
        while not meter.done:
            job = opt.ask()
            epochs = round(float(job["fidelity"]))
            loss = meter.from_scratch(evaluate(dict(job["config"])), epochs)
            opt.tell(job, {"fitness": loss, "cost": float(epochs)})
    return meter.trace


def run_smac(evaluate: Evaluate, seed: int, budget: float, usd_per_hour: float) -> Trace:
    from smac import MultiFidelityFacade, Scenario
    from smac.runhistory.dataclasses import TrialValue

    meter = _Meter(budget, usd_per_hour)
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Scenario(
            _configspace(seed),
            deterministic=True,
            n_trials=100_000,
            min_budget=5,
            max_budget=52,
            seed=seed,
            output_directory=tmp,
        )
        intensifier = MultiFidelityFacade.get_intensifier(scenario, eta=3)
        smac = MultiFidelityFacade(
            scenario,
            lambda config, seed=0, budget=52: 0.0,  # evaluated through ask/tell below
            intensifier=intensifier,
            overwrite=True,
            logging_level=40,
        )
        while not meter.done:
            info = smac.ask()
            epochs = round(float(info.budget or 52))
            loss = meter.from_scratch(evaluate(dict(info.config)), epochs)
            smac.tell(info, TrialValue(cost=loss))
    return meter.trace


def run_synetune(name: str, evaluate: Evaluate, seed: int, budget: float, usd_per_hour: float) -> Trace:
    from syne_tune.backend.trial_status import Trial
    from syne_tune.config_space import lograndint, loguniform, randint, uniform
    from syne_tune.optimizer.baselines import ASHACQR, BOHB
    from syne_tune.optimizer.scheduler import SchedulerDecision

    space = {
        "batch_size": lograndint(16, 512),
        "learning_rate": loguniform(1e-4, 1e-1),
        "momentum": uniform(0.1, 0.99),
        "weight_decay": loguniform(1e-5, 1e-1),
        "num_layers": randint(1, 5),
        "max_units": lograndint(64, 1024),
        "max_dropout": uniform(0.0, 1.0),
        "epochs": 52,
    }
    cls = {"synetune-bohb": BOHB, "synetune-asha-cqr": ASHACQR}[name]
    scheduler = cls(
        space,
        metric="val_loss",
        time_attr="epoch",
        max_t=52,
        do_minimize=True,
        random_seed=seed,
        grace_period=5,
        reduction_factor=3,
    )
    meter = _Meter(budget, usd_per_hour)
    trial_id = 0
    while not meter.done:
        suggestion = scheduler.suggest()
        if suggestion is None:
            break
        config = {k: v for k, v in suggestion.config.items() if k != "epochs"}
        trial = Trial(trial_id=trial_id, config=suggestion.config, creation_time=datetime.datetime.now())
        trial_id += 1
        scheduler.on_trial_add(trial)
        curve = evaluate(config)
        result: dict[str, Any] = {}
        for epoch in range(1, 53):
            result = {"epoch": epoch, "val_loss": meter.epoch(curve, epoch)}
            if meter.done:
                break
            if scheduler.on_trial_result(trial, result) != SchedulerDecision.CONTINUE:
                break
        else:
            scheduler.on_trial_complete(trial, result)
    return meter.trace
