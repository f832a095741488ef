"""``CostAwareHyperBand``: the pure :class:`~costtune.core.policy.AsyncHyperband` as a Ray Tune scheduler.

The class translates and does not decide: it reads a result, meters the trial's dollars
from the resources it holds, asks the policy, and maps the answer to CONTINUE / PAUSE / STOP;
once Tune's searcher has made its last trial, it asks the policy which paused trial a free
worker takes up (:meth:`~costtune.core.policy.AsyncHyperband.next_promotion`).

Usable on its own in a plain ``ray.tune.Tuner``::

    from costtune.ray import CostAwareHyperBand
    tuner = tune.Tuner(train, param_space=space, tune_config=tune.TuneConfig(
        metric="val_loss", mode="min", scheduler=CostAwareHyperBand(max_epochs=50)))
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.result import SHOULD_CHECKPOINT
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from costtune.core.cost import CostModel
from costtune.core.direction import Direction
from costtune.core.files import write_json_atomic
from costtune.core.ledger import RESULT
from costtune.core.policy import AsyncHyperband, Decision, StopReason
from costtune.core.policy.defaults import DEFAULTS
from costtune.core.rundir import relocated
from costtune.errors import ConfigError
from costtune.ray.governed import GovernedMixin, shared_governor
from costtune.ray.placement import billed_usd

_TO_RAY = {
    Decision.CONTINUE: TrialScheduler.CONTINUE,
    Decision.PAUSE: TrialScheduler.PAUSE,
    Decision.STOP: TrialScheduler.STOP,
}


class CostAwareHyperBand(GovernedMixin, FIFOScheduler):
    """Asynchronous Hyperband on metered dollars: the rungs of
    :class:`~costtune.core.policy.AsyncHyperband` (a rung keeps its top max(1, ⌊n/η⌋) by
    loss), each result priced from what the trial held, and the sweep's caps and budget.

    A trial a rung stops is paused (Tune saves its checkpoint; one whose trainable saves none
    is stopped), and the searcher is told it ended there. Once the searcher has made its last
    trial, a free worker takes up a paused trial that makes its rung's cut as the rung stands
    then; when nothing runs and none does, the paused trials end (``rung_pruned``). A resumed
    sweep ends the trials that were paused when it was interrupted. With Ray's
    ``OptunaSearch`` in a plain ``tune.Tuner``, each epoch of a taken-up trial logs Ray's
    warning that the searcher received a result for a finished trial (it was told the trial
    ended at its rung); ``costtune sweep`` drops those lines.

    Args:
        metric: metric to optimise; usually set through ``TuneConfig``.
        mode: ``"min"`` or ``"max"``; usually set through ``TuneConfig``.
        max_epochs: R, the longest a trial trains (default 50).
        grace_epochs: r, the first rung (default 5).
        eta: η, reduction factor; 1/η of a rung goes on (default 5: the top 20%).
        brackets: number of Hyperband brackets (default 1; ``None``: all that fit).
        cost_model: prices; default A100 at $2.50 per GPU-hour, CPU per core-hour.
        time_attr: result field that counts epochs (default ``training_iteration``).
        seconds_field: result field of metered seconds (default ``time_total_s``;
            a replayed benchmark reports its simulated seconds here).
        governor: per-trial caps and the sweep budget, enforced between reports too
            (hung trials ended, unaffordable trials not started); ``None``: off.
        state_path: a JSON file the policy state is written to whenever it changes, and
            read back when Tune restores the scheduler: Tune never calls a scheduler's
            save/restore, and restores it as it was when the Tuner was built.
        ledger: the sweep's :class:`~costtune.core.ledger.Ledger`, which meters each result's
            dollars (lost work and restarts as the books have them); without one, the
            result's cumulative ``seconds_field`` is priced.
    """

    def __init__(
        self,
        metric: str | None = None,
        mode: str | None = None,
        max_epochs: int = 50,
        grace_epochs: int = DEFAULTS.grace_epochs,
        eta: int = DEFAULTS.eta,
        brackets: int | None = DEFAULTS.brackets,
        cost_model: CostModel | None = None,
        time_attr: str = "training_iteration",
        seconds_field: str = "time_total_s",
        governor: Any = None,
        state_path: str | Path | None = None,
        ledger: Any = None,
    ) -> None:
        super().__init__()
        self.governor = governor
        self.state_path = None if state_path is None else str(state_path)
        self._saved_version = -1
        if mode not in (None, "min", "max"):
            raise ConfigError(f"mode: must be 'min' or 'max', got {mode!r}")
        self._metric = metric
        self._mode = mode
        self._policy = AsyncHyperband(max_epochs, grace_epochs, eta, brackets)
        self.cost_model = cost_model or CostModel()
        self.time_attr = time_attr
        self.seconds_field = seconds_field
        self.ledger = ledger
        self._restored = True  # False from unpickling until first use (see policy)
        #: trials paused at a rung (until taken up or ended), the results at the rung the
        #: searcher has not been told of yet, and the most trials the sweep has run at once
        self._paused: set[str] = set()
        self._untold: dict[str, dict] = {}
        self._workers = 0

    @property
    def policy(self) -> AsyncHyperband:
        """The rungs. After unpickling (a resume, or a copy Tune made), first read back from
        ``scheduler_state.json`` and the ledger (:meth:`catch_up`): unpickling itself reads no
        file."""
        if not self._restored:
            self._restored = True
            path = None if self.state_path is None else Path(self.state_path)
            if path is not None and path.exists():
                # the rung state only: metric and mode are set again by Tune on restore
                self._policy.load_state_dict(read_state(path)["policy"])
            if self.ledger is not None:
                self.catch_up()
        return self._policy

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        if (self._metric and metric) or (self._mode and mode):
            return False
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        return True

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        if not self._metric or self._mode not in ("min", "max"):
            raise ConfigError("CostAwareHyperBand: metric and mode must be set (here or in TuneConfig)")
        self.policy.on_add(trial.trial_id)

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        if self._metric not in result or self.time_attr not in result:
            return TrialScheduler.CONTINUE
        cost_usd = billed_usd(
            trial, result, seconds_field=self.seconds_field, cost_model=self.cost_model, ledger=self.ledger
        )
        decision = self.policy.on_result(
            trial.trial_id,
            int(result[self.time_attr]),
            Direction.of(self._mode).loss(result[self._metric]),
            cost_usd,
        )
        if (
            decision is Decision.STOP
            and self.policy.stop_reason(trial.trial_id) is StopReason.RUNG_PRUNED
            and _can_go_on(trial, result)
        ):
            # paused at its checkpoint: taken up again if it makes its rung's cut at the end
            decision = Decision.PAUSE
            self._paused.add(trial.trial_id)
            self._untold[trial.trial_id] = dict(result)
            self._finished(trial)  # the governor's clock for it stops while it waits
        self._persist()
        return _TO_RAY[decision]

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        """A pending trial first. Once no configuration is left, a free worker takes up a trial
        a rung paused that now makes that rung's cut (:meth:`AsyncHyperband.next_promotion`);
        when nothing runs and none makes its cut, the paused ones end there (``rung_pruned``).
        Any other paused trial goes on as under Tune's FIFO."""
        self._govern(tune_controller)
        self._tell_searcher(tune_controller)
        trials = list(tune_controller.get_trials())
        running = sum(t.status == Trial.RUNNING for t in trials)
        self._workers = max(self._workers, running)  # the most trials this sweep ran at once
        for trial in trials:
            if trial.status == Trial.PENDING:
                if self.policy.stop_reason(trial.trial_id) is StopReason.RUNG_PRUNED:
                    # paused at a rung before the sweep was interrupted: a resume made it pending
                    # again, and Tune would start it; it ends where the rung left it
                    tune_controller.stop_trial(trial)
                    continue
                return trial
        waiting = {t.trial_id: t for t in trials if t.status == Trial.PAUSED and t.trial_id in self._paused}
        if waiting and running < max(1, self._workers) and _no_configuration_left(tune_controller):
            affordable = self.governor is None or self.governor.can_start()
            chosen = self.policy.next_promotion(waiting) if affordable else None
            if chosen is not None:
                self._paused.discard(chosen)
                self._persist()
                return waiting[chosen]
            if running == 0:  # nothing runs that could change a rung: none will make its cut
                for trial_id in sorted(waiting):
                    tune_controller.stop_trial(waiting[trial_id])
        for trial in trials:
            if trial.status == Trial.PAUSED and trial.trial_id not in self._paused:
                return trial
        return None

    def _tell_searcher(self, tune_controller: Any) -> None:
        """Tell the searcher that the trials paused at a rung ended there, with their result at
        the rung, as it hears of a stopped trial (and it frees their place under
        ``max_concurrent_trials``). Told a step later than the pause: Tune gives the searcher a
        trial's result after asking the scheduler."""
        search_alg = getattr(tune_controller, "search_alg", None)
        while self._untold:
            trial_id, result = self._untold.popitem()
            if search_alg is not None:
                search_alg.on_trial_complete(trial_id, result=result)

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict) -> None:
        self.policy.on_end(trial.trial_id, StopReason.COMPLETED)
        self._finished(trial)

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        self.policy.on_end(trial.trial_id, StopReason.ERROR)
        self._finished(trial)
        self._paused.discard(trial.trial_id)

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        self.policy.on_end(trial.trial_id, StopReason.STOPPED)
        self._finished(trial)
        self._paused.discard(trial.trial_id)

    def stop_reason(self, trial_id: str) -> str | None:
        reason = self.policy.stop_reason(trial_id)
        return None if reason is None else reason.value

    def debug_string(self) -> str:
        stopped = sum(1 for t in self.policy.trials.values() if t.stop_reason is StopReason.RUNG_PRUNED)
        return (
            f"CostAwareHyperBand: {len(self.policy.trials)} trials, {stopped} pruned at rungs "
            f"({len(self._paused)} paused, to be taken up if they make their rung's cut at the end)"
        )

    def _persist(self) -> None:
        if self.state_path is None or self.policy.version == self._saved_version:
            return
        write_json_atomic(Path(self.state_path), self.state_dict())
        self._saved_version = self.policy.version

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.governor = shared_governor(self.governor)  # the one the stopper Tune calls records in
        if self.ledger is not None:
            self.ledger = self.ledger.shared()
        if self.state_path is not None:
            self.state_path = str(relocated(Path(self.state_path)))
        self._restored = False  # read back on first use
        # what waited in the process that pickled it: a resume ends the trials paused at a rung
        self._paused, self._untold, self._workers = set(), {}, 0

    def catch_up(self) -> int:
        """Feed the policy, in the books' order, every result and end the ledger holds and
        the rungs do not; returns how many results it fed.

        ``scheduler_state.json`` is a cache: the ledger is the record. A sweep killed
        between the two writes, a state file lost or restored from a backup, leaves the
        rungs behind the books; without this, a trial recorded at a rung would be missing
        from it, and the next decisions would be made against fewer peers than ran.
        """
        fed = 0
        spent: dict[str, float] = {}
        direction = self.ledger.spec.direction
        for row in self.ledger.timeline:
            trial_id, epoch, value = row.trial_id, row.epoch, row.value
            spent[trial_id] = spent.get(trial_id, 0.0) + row.usd
            state = self.policy.trials.get(trial_id)
            # a charge, or a report without the metric (the live path never showed them to the
            # policy; a reported NaN it did), or a result the rungs already hold
            if row.kind != RESULT or (state is not None and state.epochs >= epoch):
                continue
            if state is not None and state.stop_reason is StopReason.RUNG_PRUNED:
                self.policy.take_up(trial_id)  # it reported again: taken up once no configuration was left
            elif state is not None and state.stop_reason is not None:
                continue  # ended by the policy already: what came after does not change the rungs
            self.policy.on_result(trial_id, epoch, direction.loss(value), spent[trial_id])
            fed += 1
        for trial_id, record in self.ledger.trials.items():
            if record.status != "RUNNING" and record.stop_reason and trial_id in self.policy.trials:
                try:
                    self.policy.on_end(trial_id, StopReason(record.stop_reason))
                except ValueError:
                    self.policy.on_end(trial_id, StopReason.STOPPED)
        if fed:
            self._persist()
        return fed

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "metric": self._metric,
            "mode": self._mode,
            "policy": self.policy.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._metric, self._mode = state["metric"], state["mode"]
        self.policy.load_state_dict(state["policy"])


def _can_go_on(trial: Trial, result: dict) -> bool:
    """Whether the trial can be taken up where it stopped: its trainable saves checkpoints (one
    came with this result, or one was saved before). Without one it would start over."""
    return bool(result.get(SHOULD_CHECKPOINT)) or getattr(trial, "checkpoint", None) is not None


def _no_configuration_left(tune_controller: Any) -> bool:
    """Tune's searcher has made its last trial (the controller's ``search_alg``, which Ray's own
    ``HyperBandForBOHB`` reads too)."""
    search_alg = getattr(tune_controller, "search_alg", None)
    return search_alg is not None and bool(search_alg.is_finished())


#: the shape of ``scheduler_state.json`` that :meth:`CostAwareHyperBand.state_dict` writes;
#: :func:`read_state` reads this and every earlier one
STATE_VERSION = 1


def read_state(path: Path) -> dict[str, Any]:
    """``scheduler_state.json``, or a one-line :class:`ConfigError` saying what is wrong with
    it (written whole by an atomic rename, so damage means someone else touched it)."""
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(
            f"{path.name}: cannot read the scheduler's rung state ({exc}); restore the file"
        ) from None
    if not isinstance(state, dict) or not isinstance(state.get("policy"), dict):
        raise ConfigError(f"{path.name}: not a scheduler state (no 'policy' mapping); restore the file")
    version = state.get("version", 0)  # 0: written before states carried one; the same shape
    if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version <= STATE_VERSION:
        raise ConfigError(
            f"{path.name}: scheduler state version {version!r}, but this costtune reads versions up to "
            f"{STATE_VERSION}; resume it with the costtune that wrote it"
        )
    for key in ("wrr", "trials", "rungs"):
        if key not in state["policy"]:
            raise ConfigError(f"{path.name}: the scheduler state lacks policy.{key}; restore the file")
    return state
