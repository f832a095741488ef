"""``CostAwarePBT``: Ray Tune's population-based training with costtune's seeded, cost-aware decisions.

Ray's ``PopulationBasedTraining`` keeps the checkpoint plumbing (save the donor, restore
it into the clone); who is in which quantile, which donor is copied and how the config is
explored come from the pure :mod:`costtune.core.policy.pbt` with an owned, seeded RNG — Ray's
own choices use the module-global ``random``.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from costtune.core.cost import CostModel
from costtune.core.policy import Exploit, Member, Mutation, choose_donor, explore, quantiles
from costtune.ray.placement import trial_devices
from costtune.ray.private import PopulationHooks

if TYPE_CHECKING:
    from ray.tune.experiment import Trial


def _unchanged(config: dict) -> dict:
    """Ray's explore hook, never called (:meth:`CostAwarePBT.new_config` is ours); a module-level function,
    so that the scheduler pickles with the standard library too, not only cloudpickle."""
    return config


class CostAwarePBT(PopulationHooks):
    """Population-based training, seeded, with cost-aware donor choice.

    Args:
        metric, mode: usually set through ``TuneConfig``.
        mutations: the hyperparameters PBT may move, and how.
        perturbation_interval: epochs between exploit/explore decisions (default 5).
        quantile_fraction: bottom/top fraction (default 0.2: the bottom 20% copy the top 20%).
        resample_probability: chance to resample a value instead of perturbing it.
        key: ``loss`` or ``pareto`` (front of loss and dollars per epoch, then loss).
        seed: seeds every decision.
        cost_model: prices, for dollars per epoch.
        seconds_field: the result field of metered seconds (``cost.time_field``; a replay
            reports its simulated seconds).
        ledger: the sweep's ledger: a member's dollars per epoch are the books' (what it
            ran, lost work included); without one, or before its first recorded epoch, the
            cumulative ``seconds_field`` is priced.
    """

    def __init__(
        self,
        mutations: dict[str, Mutation],
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: int = 5,
        quantile_fraction: float = 0.2,
        resample_probability: float = 0.25,
        key: str = "loss",
        seed: int = 0,
        cost_model: CostModel | None = None,
        seconds_field: str = "time_total_s",
        ledger: Any = None,
    ) -> None:
        super().__init__(
            time_attr="training_iteration",
            metric=metric,
            mode=mode,
            perturbation_interval=perturbation_interval,
            quantile_fraction=quantile_fraction,
            resample_probability=resample_probability,
            custom_explore_fn=_unchanged,  # unused: new_config is ours
        )
        self.mutations = mutations
        self.key = key
        self.rng = random.Random(seed)
        self.cost_model = cost_model or CostModel()
        self.seconds_field = seconds_field
        self.ledger = ledger
        self.decisions: list[Exploit] = []

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.ledger is not None:
            self.ledger = self.ledger.shared()

    def _member(self, trial: Trial) -> Member:
        state = self.trial_states()[trial]
        result = state.last_result or {}
        epochs = max(int(result.get("training_iteration", 1)), 1)
        record = None if self.ledger is None else self.ledger.trials.get(trial.trial_id)
        if record is not None and record.epochs > 0:  # the books: what it ran, lost work included
            return Member(trial.trial_id, self._loss(state), self.ledger.cost_usd(record) / record.epochs)
        kind, devices = trial_devices(trial)
        usd = self.cost_model.cost_usd(float(result.get(self.seconds_field, 0.0)), devices, kind)
        return Member(trial.trial_id, self._loss(state), usd / epochs)

    @staticmethod
    def _loss(state: Any) -> float:
        # Ray's PBT keeps last_score as the metric signed so that higher is better
        return -state.last_score if state.last_score is not None else float("nan")

    def quantiles(self) -> tuple[list[Trial], list[Trial]]:
        live = [t for t, s in self.trial_states().items() if s.last_score is not None and not t.is_finished()]
        by_id = {t.trial_id: t for t in live}
        bottom, top = quantiles([self._member(t) for t in live], self.quantile_fraction, self.key)
        return [by_id[i] for i in bottom], [by_id[i] for i in top]

    def donors(self, trial: Trial, top: list[Trial]) -> list[Trial]:
        donor_id = choose_donor([self._member(t) for t in top], self.rng)
        return [t for t in top if t.trial_id == donor_id]

    def new_config(self, trial: Trial, donor: Trial) -> tuple[dict, dict]:
        new_config, operations = explore(donor.config, self.mutations, self.rng, self.resample_probability)
        self.decisions.append(Exploit(trial.trial_id, donor.trial_id, new_config, operations))
        return new_config, operations

    def stop_reason(self, trial_id: str) -> str | None:
        return None
