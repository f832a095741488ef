"""Caps and budget between reports: the part of governance a Stopper cannot do.

A Stopper only runs when a trial reports. A hung trial never reports, and a pending trial
has not reported yet; the scheduler is asked on every controller step
(``choose_trial_to_run``), so the schedulers end overdue trials and refuse to start trials
the remaining budget cannot pay for — by asking the pure :class:`~costtune.core.policy.Governor`.
"""

from __future__ import annotations

import time
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler

#: the governor of each sweep in this process, by its key (see :func:`shared_governor`)
_GOVERNORS: dict[str, Any] = {}


def shared_governor(governor: Any) -> Any:
    """The one governor of this sweep in this process.

    Tune pickles the stopper, the scheduler and the callbacks in more than one piece; a resume
    unpickles each piece with a governor of its own. They must meet on one object again, or a
    stop recorded by the stopper Tune calls is not seen where the books ask why a trial ended
    (it was written down as ``completed``), and what one copy counts against the budget the
    others miss.
    """
    if governor is None:
        return governor
    return _GOVERNORS.setdefault(governor.key, governor)


def forget_governors() -> None:
    """A new sweep, or a new resume, in this process: no governor of an earlier one is shared
    (a second resume of one run would otherwise meet the first resume's governor, and its
    stale report times would end running trials as hung)."""
    _GOVERNORS.clear()


class GovernorHooks:
    """What the ledger callback asks the governor, as bound methods that survive a resume
    (a lambda over the governor would hold the copy its pickle made; see :func:`shared_governor`)."""

    def __init__(self, governor: Any) -> None:
        self.governor = governor

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.governor = shared_governor(self.governor)

    def extra_seconds(self, trial_id: str) -> float:
        """Seconds a trial held its devices after its last report (a hung trial ended)."""
        return float(self.governor.extra_seconds.get(trial_id, 0.0))

    def charged(self, trial_id: str, epochs: int, usd: float) -> None:
        """Lost work or hung time charged between reports: the budget counts it now."""
        self.governor.budget.record(trial_id, epochs, usd)


class GovernedMixin:
    """Adds governor checks to a scheduler's ``choose_trial_to_run``."""

    governor: Any = None

    def _govern(self, tune_controller: Any) -> None:
        governor = self.governor
        if governor is None:
            return
        now = time.monotonic()
        for trial in tune_controller.get_trials():
            if trial.trial_id in governor.ended and trial.status in (Trial.PENDING, Trial.PAUSED):
                # ended before an interruption that Tune's last snapshot did not see
                tune_controller.stop_trial(trial)
            elif trial.status == Trial.RUNNING:
                governor.on_start(trial.trial_id, now)
                if governor.overdue(trial.trial_id, now) is not None:
                    tune_controller.stop_trial(trial)
            elif trial.status == Trial.PENDING and not governor.can_start():
                governor.refuse(trial.trial_id)
                # a trial that never started has no directory yet; Tune's result grid
                # needs one for every trial, so give it one before ending the trial
                trial.init_local_path()
                tune_controller.stop_trial(trial)

    def _finished(self, trial: Trial) -> None:
        if self.governor is not None:
            self.governor.finished(trial.trial_id)


class CostAwareFIFO(GovernedMixin, FIFOScheduler):
    """First in, first out — every trial runs to the end — under caps and a sweep budget."""

    def __init__(self, governor: Any = None) -> None:
        super().__init__()
        self.governor = governor

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.governor = shared_governor(self.governor)

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        self._govern(tune_controller)
        return super().choose_trial_to_run(tune_controller)

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict) -> None:
        self._finished(trial)

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        self._finished(trial)

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        self._finished(trial)

    def stop_reason(self, trial_id: str) -> str | None:
        return None
