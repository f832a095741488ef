"""``CostAwareHyperBand``: the pure :class:`~costtune.core.policy.AsyncHyperband` as a Ray Tune scheduler.

The class translates and does not decide: it reads a result, meters the trial's dollars
from the resources it holds, asks the policy, and maps the answer to CONTINUE / STOP.

Usable on its own in a plain ``ray.tune.Tuner``::

    from costtune.ray import CostAwareHyperBand
    tuner = tune.Tuner(train, param_space=space, tune_config=tune.TuneConfig(
        metric="val_loss", mode="min", scheduler=CostAwareHyperBand(max_epochs=50)))
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

_TO_RAY = {
    Decision.CONTINUE: TrialScheduler.CONTINUE,
    Decision.PAUSE: TrialScheduler.PAUSE,
    Decision.STOP: TrialScheduler.STOP,
}


class CostAwareHyperBand(GovernedMixin, FIFOScheduler):
    """Asynchronous Hyperband on metered dollars: the rungs of
    :class:`~costtune.core.policy.AsyncHyperband` (a rung keeps its top max(1, ⌊n/η⌋) by
    loss), each result priced from what the trial held, and the sweep's caps and budget.

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
        self._persist()
        return _TO_RAY[decision]

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        self._govern(tune_controller)
        return super().choose_trial_to_run(tune_controller)

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict) -> None:
        self.policy.on_end(trial.trial_id, StopReason.COMPLETED)
        self._finished(trial)

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        self.policy.on_end(trial.trial_id, StopReason.ERROR)
        self._finished(trial)

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        self.policy.on_end(trial.trial_id, StopReason.STOPPED)
        self._finished(trial)

    def stop_reason(self, trial_id: str) -> str | None:
        reason = self.policy.stop_reason(trial_id)
        return None if reason is None else reason.value

    def debug_string(self) -> str:
        stopped = sum(1 for t in self.policy.trials.values() if t.stop_reason is StopReason.RUNG_PRUNED)
        return f"CostAwareHyperBand: {len(self.policy.trials)} trials, {stopped} pruned at rungs"

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
            if state is not None and state.stop_reason is not None:
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
