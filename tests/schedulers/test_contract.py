"""One contract for every costtune scheduler (as scikit-learn's check_estimator, Syne Tune's
test_schedulers_api): what Ray Tune relies on, and state that survives Tune's restore."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import pytest
from ray.tune.schedulers import TrialScheduler

from costtune.core.cost import CostModel
from costtune.core.ledger import Ledger, LedgerSpec
from costtune.core.policy import Governor, ReasonSource, StopReason
from costtune.ray import CostAwareFIFO, CostAwareHyperBand


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
        max_epochs=9, grace_epochs=1, eta=3, brackets=1, state_path=tmp_path / "state.json"
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
    from costtune.core.policy import Mutation
    from costtune.ray.pbt import CostAwarePBT

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


# ------------------------------------------------------------------ a whole sweep, replayed
MAX_EPOCHS = 9

SWEEPS = {
    "hyperband": lambda tmp: CostAwareHyperBand(
        max_epochs=MAX_EPOCHS, grace_epochs=1, eta=3, state_path=tmp / "state.json"
    ),
    "hyperband-2-brackets": lambda tmp: CostAwareHyperBand(
        max_epochs=MAX_EPOCHS, grace_epochs=1, eta=3, brackets=2, state_path=tmp / "state.json"
    ),
    "fifo": lambda tmp: CostAwareFIFO(Governor(usd_per_second=1.0)),
}


def _curve(i: int, epoch: int) -> float:
    """Trial i's loss at an epoch: a spread of starts, decays and plateaus, with ties."""
    start = 1.0 + 0.37 * ((i * 7) % 11) / 11
    return round(start / (1 + 0.15 * (i % 4) * epoch) + 0.05 * (i % 3), 3)


class _Sweep:
    """Tune's side of the contract, without Ray: trials start as workers free up, each
    reports epoch after epoch; a STOP ends it (Tune then calls on_trial_complete), trial 3
    fails at its second epoch (on_trial_error), the rest complete at MAX_EPOCHS."""

    def __init__(
        self,
        trials: int = 12,
        workers: int = 3,
        ledger: Ledger | None = None,
        nan_at: frozenset = frozenset(),
    ) -> None:
        self.ledger = ledger
        self.nan_at = nan_at  # (trial number, epoch) pairs that report a NaN loss
        self.waiting = [f"t{i}" for i in range(trials)]
        self.running: list[str] = []
        self.epoch: dict[str, int] = {}
        self.workers = workers
        self.log: list[tuple[str, int, str]] = []

    def step(self, scheduler) -> bool:  # type: ignore[no-untyped-def]
        while self.waiting and len(self.running) < self.workers:
            trial_id = self.waiting.pop(0)
            scheduler.on_trial_add(None, _trial(trial_id))
            self.running.append(trial_id)
            self.epoch[trial_id] = 0
        if not self.running:
            return False
        trial_id = self.running.pop(0)
        trial = _trial(trial_id)
        epoch = self.epoch[trial_id] = self.epoch[trial_id] + 1
        i = int(trial_id[1:])
        if i == 3 and epoch == 2:
            scheduler.on_trial_error(None, trial)
            self.log.append((trial_id, epoch, "ERROR"))
            if self.ledger is not None:
                self.ledger.end(trial_id, status="ERROR", stop_reason=StopReason.ERROR.value)
            return True
        loss = float("nan") if (i, epoch) in self.nan_at else _curve(i, epoch)
        result = {"loss": loss, "training_iteration": epoch, "time_total_s": float(epoch)}
        decision = scheduler.on_trial_result(None, trial, result)
        if self.ledger is not None:  # Tune's order: the scheduler decides, then the books record
            self.ledger.record_result(
                trial_id, epoch=epoch, seconds=float(epoch), metrics={"loss": result["loss"]}
            )
        assert decision in (TrialScheduler.CONTINUE, TrialScheduler.STOP), decision  # never PAUSE
        self.log.append((trial_id, epoch, decision))
        if decision == TrialScheduler.STOP or epoch >= MAX_EPOCHS:
            scheduler.on_trial_complete(None, trial, result)
            if self.ledger is not None:
                reason = scheduler.stop_reason(trial_id) or StopReason.COMPLETED.value
                self.ledger.end(trial_id, status="TERMINATED", stop_reason=reason)
        else:
            self.running.append(trial_id)
        return True


def _replay(scheduler, sweep: _Sweep, steps: int | None = None):  # type: ignore[no-untyped-def]
    done = 0
    while (steps is None or done < steps) and sweep.step(scheduler):
        done += 1
    return sweep.log


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_a_whole_sweep_decides_the_same_way_every_time_and_across_a_restore(name, tmp_path) -> None:
    """Syne Tune's test_schedulers_api, for costtune's Ray schedulers: 12 trials × up to 9
    results each on 3 workers, one error, completions; the same inputs give the same decision
    log; a sweep killed half-way and resumed (Tune restores the scheduler as it was built)
    decides the rest the same."""
    whole = SWEEPS[name](tmp_path / "a")
    (tmp_path / "a").mkdir()
    whole.set_search_properties("loss", "min")
    log = _replay(whole, _Sweep())
    assert len(log) > 12 and any(d == "ERROR" for *_, d in log)
    again = SWEEPS[name](tmp_path / "b")
    (tmp_path / "b").mkdir()
    again.set_search_properties("loss", "min")
    assert _replay(again, _Sweep()) == log  # one decision log

    (tmp_path / "c").mkdir()
    first = SWEEPS[name](tmp_path / "c")
    built = pickle.dumps(first)  # Tune pickles the scheduler as built, and restores that
    first.set_search_properties("loss", "min")
    sweep = _Sweep()
    _replay(first, sweep, steps=len(log) // 2)
    restored = pickle.loads(built)  # a sweep killed half-way and resumed: the rungs come back
    restored.set_search_properties("loss", "min")  # Tune sets them again on restore
    assert _replay(restored, sweep) == log
    for trial_id in {t for t, *_ in log}:
        assert restored.stop_reason(trial_id) == whole.stop_reason(trial_id)
        reason = whole.stop_reason(trial_id)
        assert reason is None or reason in {r.value for r in StopReason}
    if name.startswith("hyperband"):
        assert whole.stop_reason("t3") == StopReason.ERROR.value
        pruned = {t for t, e, d in log if d == TrialScheduler.STOP and e < MAX_EPOCHS}
        assert pruned and all(whole.stop_reason(t) == StopReason.RUNG_PRUNED.value for t in pruned)
        finished = {t for t, e, _ in log if e == MAX_EPOCHS}
        assert finished and all(whole.stop_reason(t) == StopReason.COMPLETED.value for t in finished)
        assert restored.policy.state_dict() == whole.policy.state_dict()


def test_rungs_saved_behind_the_books_catch_up_from_the_ledger(tmp_path) -> None:
    """scheduler_state.json is a cache of the rungs; the ledger is the record. A state file
    left behind the books (a kill between the two writes, a file restored from a backup) is
    caught up from the ledger on restore, in the books' order: the rungs come back whole and
    the rest of the sweep decides as the uninterrupted one did."""
    whole = SWEEPS["hyperband"](tmp_path / "a")
    (tmp_path / "a").mkdir()
    whole.set_search_properties("loss", "min")
    log = _replay(whole, _Sweep())

    ledger = Ledger(LedgerSpec(metric="loss", mode="min", cost_model=CostModel()), tmp_path / "b")
    first = CostAwareHyperBand(
        max_epochs=MAX_EPOCHS, grace_epochs=1, eta=3, state_path=tmp_path / "b" / "state.json", ledger=ledger
    )
    built = pickle.dumps(first)
    first.set_search_properties("loss", "min")
    sweep = _Sweep(ledger=ledger)
    _replay(first, sweep, steps=len(log) // 4)
    stale = (tmp_path / "b" / "state.json").read_bytes()  # the rungs a quarter of the way in
    _replay(first, sweep, steps=len(log) // 4)
    (tmp_path / "b" / "state.json").write_bytes(stale)  # ... while the books went on to half-way

    restored = pickle.loads(built)
    assert restored.policy.state_dict()["rungs"] == first.policy.state_dict()["rungs"]  # caught up
    restored.set_search_properties("loss", "min")
    assert _replay(restored, sweep) == log
    assert restored.catch_up() == 0  # nothing left to feed: the rungs hold what the books hold


def test_a_restore_from_any_prefix_of_the_books_decides_the_rest_as_the_whole_sweep(tmp_path) -> None:
    """The books alone (no state file) rebuild the rungs after a kill at any point, NaN reports
    included: a NaN the live policy ranked at a rung is fed again, a charge is not (both are
    NaN in the books' timeline; read alike, a restored rung held one entry fewer and the same
    newcomer got CONTINUE live and STOP after the restore)."""
    nan_at = frozenset({(1, 1), (4, 1), (6, 1), (7, 3)})
    whole = CostAwareHyperBand(max_epochs=MAX_EPOCHS, grace_epochs=1, eta=3)
    whole.set_search_properties("loss", "min")
    log = _replay(whole, _Sweep(nan_at=nan_at))
    assert any((int(t[1:]), e) in nan_at for t, e, _ in log)
    for cut in range(1, len(log)):
        folder = tmp_path / f"cut{cut}"
        folder.mkdir()
        ledger = Ledger(LedgerSpec(metric="loss", mode="min", cost_model=CostModel()), folder)
        first = CostAwareHyperBand(
            max_epochs=MAX_EPOCHS, grace_epochs=1, eta=3, state_path=folder / "state.json", ledger=ledger
        )
        built = pickle.dumps(first)
        first.set_search_properties("loss", "min")
        sweep = _Sweep(ledger=ledger, nan_at=nan_at)
        _replay(first, sweep, steps=cut)
        (folder / "state.json").unlink(missing_ok=True)  # the books are the record
        restored = pickle.loads(built)
        assert restored.policy.state_dict()["rungs"] == first.policy.state_dict()["rungs"], cut
        restored.set_search_properties("loss", "min")
        assert _replay(restored, sweep) == log, cut


class _Controller:
    """What Ray's PBT asks of Tune's controller while it exploits: the trials, a checkpoint
    save (handed back as a token) and a pause."""

    search_alg = None

    def __init__(self, trials: list) -> None:
        self.trials = trials

    def get_trials(self) -> list:
        return self.trials

    def _schedule_trial_save(self, trial, result=None):  # type: ignore[no-untyped-def]
        return {"checkpoint_of": trial.trial_id}

    def pause_trial(self, trial, should_checkpoint: bool = True) -> None:  # type: ignore[no-untyped-def]
        from ray.tune.experiment import Trial

        trial.set_status(Trial.PAUSED)


def _pbt_sweep(scheduler) -> tuple[list, list]:  # type: ignore[no-untyped-def]
    """Six real (stub) Tune trials × 8 epochs through CostAwarePBT; t2 fails at epoch 3, a
    paused clone restarts at its next turn (as Tune restarts it from its donor's checkpoint)."""
    from ray.tune.execution.placement_groups import PlacementGroupFactory
    from ray.tune.experiment import Trial

    trials = [Trial("__fake", config={"lr": 0.01 * (i + 1)}, trial_id=f"t{i}", stub=True) for i in range(6)]
    controller = _Controller(trials)
    scheduler.set_search_properties("loss", "min")
    scheduler._log_config = False  # Ray would write pbt_policy files to a storage stub trials lack
    for trial in trials:
        trial.placement_group_factory = PlacementGroupFactory([{"CPU": 1}])
        scheduler.on_trial_add(controller, trial)
        trial.set_status(Trial.RUNNING)
    log = []
    for epoch in range(1, 9):
        for i, trial in enumerate(trials):
            if trial.status == Trial.ERROR:
                continue
            if trial.status == Trial.PAUSED:
                trial.set_status(Trial.RUNNING)
            if i == 2 and epoch == 3:
                scheduler.on_trial_error(controller, trial)
                trial.set_status(Trial.ERROR)
                log.append((trial.trial_id, epoch, "ERROR"))
                continue
            result = {
                "loss": 1.0 / (epoch * (1 + (i * 3) % 5)) + 0.01 * i,
                "training_iteration": epoch,
                "time_total_s": float(epoch),
            }
            log.append(
                (trial.trial_id, epoch, scheduler.on_trial_result(controller, trial, result), trial.config)
            )
    for trial in trials:
        if trial.status != Trial.ERROR:
            scheduler.on_trial_complete(controller, trial, {})
            assert scheduler.stop_reason(trial.trial_id) is None  # PBT ends no trial itself
    return log, [(e.trial_id, e.source_id, e.new_config) for e in scheduler.decisions]


def test_pbt_decides_the_same_way_every_time_for_a_seed_and_survives_tunes_pickling() -> None:
    from costtune.core.policy import Mutation
    from costtune.ray.pbt import CostAwarePBT

    def build(seed: int) -> CostAwarePBT:
        return CostAwarePBT(
            {"lr": Mutation("loguniform", 1e-4, 1.0)},
            perturbation_interval=2,
            quantile_fraction=0.34,
            seed=seed,
        )

    log, exploits = _pbt_sweep(build(0))
    assert len(exploits) >= 3 and any(d == "ERROR" for _, _, d, *_ in log)
    for trial_id, source_id, config in exploits:
        assert trial_id != source_id and 1e-4 <= config["lr"] <= 1.0
    assert _pbt_sweep(build(0)) == (log, exploits)  # one decision log for a seed
    assert _pbt_sweep(pickle.loads(pickle.dumps(build(0)))) == (log, exploits)  # as Tune restores it
    assert _pbt_sweep(build(1))[1] != exploits  # and the seed is what decides
