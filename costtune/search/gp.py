"""The ``gp`` searcher: Optuna's ``GPSampler``, fitted to losses whose outliers are clipped.

Optuna standardises the values it fits its Gaussian process to. One diverged trial (a loss of
24 beside losses of 0.4) then squeezes every other trial into a sliver of the scale, and the
process reads the whole space as flat. :class:`ClippedGPSampler` hands ``GPSampler`` a copy
of the study in which each completed trial's value beyond the upper Tukey fence of the
values so far (Q3 + 1.5 × IQR; for ``maximize``, below Q1 − 1.5 × IQR) is moved to the
fence; the order of the trials is kept, and everything else (the kernel, the acquisition,
the trials still running) is Optuna's own. Only Optuna's public API is used: a study, its
trials, :func:`optuna.trial.create_trial` and ``GPSampler.sample_relative``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState, create_trial

#: fewer completed trials than this: nothing is clipped (no quartiles to speak of)
CLIP_FROM = 4


def clipped(values: np.ndarray, direction: StudyDirection) -> np.ndarray:
    """``values`` with those beyond the Tukey fence on the bad side moved to it (an infinite
    one too); the fence is read from the finite values."""
    finite = values[np.isfinite(values)]
    if len(finite) < CLIP_FROM:
        return values
    q1, q3 = np.quantile(finite, [0.25, 0.75])
    if direction == StudyDirection.MAXIMIZE:
        return np.maximum(values, q1 - 1.5 * (q3 - q1))
    return np.minimum(values, q3 + 1.5 * (q3 - q1))


class ClippedGPSampler(optuna.samplers.GPSampler):
    """``optuna.samplers.GPSampler`` (same arguments) that proposes from the study's trials
    with outlying values clipped (see the module docstring). Single-objective studies."""

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
        done = [t for t in trials if t.state == TrialState.COMPLETE]
        values = clipped(np.array([t.value for t in done], dtype=float), study.direction)
        view = optuna.create_study(direction=study.direction, sampler=optuna.samplers.RandomSampler(seed=0))
        view.add_trials(
            [
                create_trial(params=t.params, distributions=t.distributions, value=float(v))
                for t, v in zip(done, values, strict=True)
            ]
            + [
                create_trial(
                    state=TrialState.RUNNING,
                    params=t.params,
                    distributions=t.distributions,
                    system_attrs=t.system_attrs,
                )
                for t in trials
                if t.state == TrialState.RUNNING and t.params and t.number != trial.number
            ]
        )
        view.ask()  # the trial being sampled, in the copy (GPSampler records its proposal on it)
        return super().sample_relative(view, view.get_trials(deepcopy=False)[-1], search_space)
