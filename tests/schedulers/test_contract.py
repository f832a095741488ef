"""One contract for every costtune scheduler (as scikit-learn's check_estimator, Syne Tune's
test_schedulers_api): what Ray Tune relies on, and state that survives Tune's restore."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import pytest
from ray.tune.schedulers import TrialScheduler

from costtune.cost import CostModel
from costtune.policy import Governor, ReasonSource, StopReason
from costtune.schedulers import CostAwareFIFO, CostAwareHyperBand


def _trial(trial_id: str, gpus: float = 0.0) -> SimpleNamespace:
    resources = {"CPU": 1.0, "GPU": gpus}
    return SimpleNamespace(
        trial_id=trial_id, placement_group_factory=SimpleNamespace(required_resources=resources)
    )


SCHEDULERS = {
    "hyperband": lambda tmp: CostAwareHyperBand(
        max_epochs=9, grace_epochs=1, eta=3, state_path=tmp / "state.json"
    ),
    "fifo": lambda tmp: CostAwareFIFO(Governor(usd_per_second=1.0)),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_contract(name, tmp_path) -> None:
    scheduler = SCHEDULERS[name](tmp_path)
    assert isinstance(scheduler, TrialScheduler)
    assert scheduler.set_search_properties("loss", "min")
    assert not scheduler.set_search_properties("accuracy", "max")  # already set: refuse
    trial = _trial("t0")
    scheduler.on_trial_add(None, trial)
    decision = scheduler.on_trial_result(
        None, trial, {"loss": 0.5, "training_iteration": 1, "time_total_s": 1.0}
    )
    assert decision in (TrialScheduler.CONTINUE, TrialScheduler.STOP, TrialScheduler.PAUSE)
    scheduler.on_trial_complete(None, trial, {})
    assert scheduler.stop_reason("unknown") is None
    assert isinstance(scheduler, ReasonSource)  # the sweep asks it why a trial ended
    reason = scheduler.stop_reason("t0")
    assert reason is None or reason in {r.value for r in StopReason}
    restored = pickle.loads(pickle.dumps(scheduler))
    assert type(restored) is type(scheduler)


def test_hyperband_state_survives_tunes_restore(tmp_path) -> None:
    scheduler = CostAwareHyperBand(
        max_epochs=9, grace_epochs=1, eta=3, brackets=1, promotion="loss", state_path=tmp_path / "state.json"
    )
    scheduler.set_search_properties("loss", "min")
    built = pickle.dumps(scheduler)  # what Tune pickles when the Tuner is built
    for i, loss in enumerate([0.1, 0.5, 0.6]):
        trial = _trial(f"t{i}")
        scheduler.on_trial_add(None, trial)
        scheduler.on_trial_result(None, trial, {"loss": loss, "training_iteration": 1, "time_total_s": 1.0})
    assert scheduler.stop_reason("t1") == "rung_pruned"
    restored = pickle.loads(built)  # Tune restores the scheduler as built, before any result
    assert restored.stop_reason("t1") == "rung_pruned"  # ... and costtune reloads the rungs
    assert restored.policy.state_dict() == scheduler.policy.state_dict()
    late = _trial("t3")
    restored.set_search_properties("loss", "min")
    restored.on_trial_add(None, late)
    assert (
        restored.on_trial_result(None, late, {"loss": 0.7, "training_iteration": 1, "time_total_s": 1.0})
        == "STOP"
    )


def test_gpu_trials_are_billed_per_gpu_at_the_accelerator_price() -> None:
    scheduler = CostAwareHyperBand(
        metric="loss",
        mode="min",
        max_epochs=9,
        grace_epochs=1,
        eta=3,
        brackets=1,
        cost_model=CostModel(accelerator="A100"),
    )
    trial = _trial("g", gpus=8)
    scheduler.on_trial_add(None, trial)
    scheduler.on_trial_result(None, trial, {"loss": 0.3, "training_iteration": 1, "time_total_s": 3600.0})
    entry = scheduler.policy.rungs[0][1]["g"]
    assert entry.cost_usd == pytest.approx(8 * 2.50)


def test_pbt_prices_members_from_the_configured_time_field() -> None:
    """A replayed sweep meters its simulated seconds (cost.time_field), not Tune's wall clock."""
    from costtune.policy import Mutation
    from costtune.schedulers.pbt import CostAwarePBT

    pbt = CostAwarePBT(
        {"lr": Mutation("loguniform", 1e-4, 1e-1)},
        metric="loss",
        mode="min",
        cost_model=CostModel(accelerator="A100"),
        seconds_field="sim_seconds",
    )

    class Trial(SimpleNamespace):
        __hash__ = object.__hash__

    trial = Trial(**vars(_trial("p", gpus=1)))
    result = {"training_iteration": 5, "time_total_s": 41.0, "sim_seconds": 5 * 3600.0}
    pbt._trial_state[trial] = SimpleNamespace(last_result=result, last_score=-0.4)
    member = pbt._member(trial)
    assert member.usd_per_epoch == pytest.approx(2.50)  # 1 GPU-hour per simulated epoch
    assert member.loss == pytest.approx(0.4)
