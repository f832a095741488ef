"""Optuna's univariate TPE, proposal for proposal, without the per-ask costs that buy nothing.

Kept apart from :mod:`costtune.gp` so that a sweep's TPE searcher does not import torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
from optuna.samplers._tpe import _truncnorm
from optuna.samplers._tpe import sampler as _tpe_module
from optuna.trial import TrialState
from scipy.special import log_ndtr as _log_ndtr  # type: ignore[import-untyped]
from scipy.special import ndtr as _ndtr

#: the Optuna internals :class:`QuickTPESampler` reads; without them it is Optuna's TPE
_TPE_INTERNALS = (
    all(hasattr(_tpe_module, name) for name in ("_split_trials", "default_gamma"))
    and all(hasattr(_truncnorm, name) for name in ("_log_ndtr", "_ndtr"))
    and all(
        hasattr(optuna.samplers.TPESampler, name)
        for name in (
            "_sample",
            "_get_internal_repr",
            "_build_parzen_estimator",
            "_compute_acquisition_func",
            "_compare",
        )
    )
)
_NUMERIC = (optuna.distributions.FloatDistribution, optuna.distributions.IntDistribution)


def _as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


#: Optuna's own Φ and log Φ, put back after each quick ask (never whatever is there then: two
#: threads asking at once could otherwise leave SciPy's in place)
_OPTUNA_NDTR = getattr(_truncnorm, "_log_ndtr", None), getattr(_truncnorm, "_ndtr", None)


class QuickTPESampler(optuna.samplers.TPESampler):
    """Optuna's univariate TPE at its defaults, proposal for proposal to the last bits of a
    float (``tests/test_search.py`` compares them), in about a fifth of its ask at 1,000 trials:
    a sweep's ``searcher: {type: optuna}``, and the model check's fallback
    (:class:`CpuGPSampler`), which answers most asks of a sweep whose process ranks nothing.
    Optuna's ask at 1,000 trials takes ~0.1 s on the 2-core machine, mostly for three reasons
    this class removes:

    - Optuna splits the trials into the good and the rest once per *parameter*; here once per
      ask (the split of an ask's first parameter is kept for its others).
    - It reads each trial's parameters anew for every parameter of every ask; here a finished
      trial's numeric values are read once (they never change) and kept by trial id.
    - Its truncated normals' Φ and log Φ are Python per element (``_truncnorm._ndtr``,
      ``_log_ndtr``); here SciPy's vectorised ``ndtr`` and ``log_ndtr``, swapped in for the
      duration of the ask (the driver asks from one thread).

    Proposals differ from Optuna's only by those functions' rounding (~1e-16). Where
    the study has more than one objective, or Optuna asks for more than one parameter at once,
    it is Optuna's TPE."""

    def __init__(self, seed: int | None = None, n_startup_trials: int = 10) -> None:
        super().__init__(seed=seed, n_startup_trials=n_startup_trials, multivariate=False)
        self._split: tuple[Any, ...] | None = None  # (ask key, good trials, rest, their values)
        self._numeric: dict[int, tuple[Any, dict[str, float]]] = {}  # trial id -> (params, values)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_split"], state["_numeric"] = None, {}  # rebuilt at the next ask
        return state

    def _sample(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
        if not _TPE_INTERNALS or len(study.directions) > 1 or len(search_space) != 1:
            return dict(super()._sample(study, trial, search_space))
        liar = self._constant_liar  # Optuna 5's default: the running trials count among the rest
        states = (TrialState.COMPLETE, TrialState.PRUNED) + ((TrialState.RUNNING,) if liar else ())
        trials = study._get_trials(deepcopy=False, states=states, use_cache=not liar)
        key = (id(study._storage), study._study_id, trial.number, len(trials))
        if self._split is None or self._split[0] != key:
            if liar:
                trials = [t for t in trials if t.number != trial.number]
            gamma = self._gamma or _tpe_module.default_gamma
            told = sum(t.state != TrialState.RUNNING for t in trials)
            below, above = _tpe_module._split_trials(study, trials, gamma(told))
            self._split = (
                key,
                below,
                above,
                [self._values(t) for t in below],
                [self._values(t) for t in above],
            )
        _truncnorm._log_ndtr, _truncnorm._ndtr = _log_ndtr, _ndtr
        try:
            below_mpe = self._build_parzen_estimator(study, search_space, self._split[1], handle_below=True)
            above_mpe = self._build_parzen_estimator(study, search_space, self._split[2], handle_below=False)
            samples = below_mpe.sample(self._rng.rng, self._n_ei_candidates)
            chosen = self._compare(samples, self._compute_acquisition_func(samples, below_mpe, above_mpe))
        finally:
            _truncnorm._log_ndtr, _truncnorm._ndtr = _OPTUNA_NDTR
        return {name: dist.to_external_repr(chosen[name]) for name, dist in search_space.items()}

    def _values(self, trial: Any) -> tuple[Any, dict[str, float]]:
        """A trial's parameters, and those ``float()`` takes as floats (their internal form under
        any numeric distribution, whatever distribution the trial drew them from, as Optuna
        reads them); a finished trial's read once."""
        params = trial.params
        kept = self._numeric.get(trial._trial_id)
        if kept is None or kept[0] is not params:  # another study's trial, or another read
            numeric = {name: f for name, value in params.items() if (f := _as_float(value)) is not None}
            kept = (params, numeric)
            if trial.state.is_finished():  # a running trial's parameters still grow
                self._numeric[trial._trial_id] = kept
        return kept

    def _get_internal_repr(
        self, trials: Any, search_space: dict[str, Any], study: Any
    ) -> dict[str, np.ndarray]:
        split = self._split
        if split is None or (trials is not split[1] and trials is not split[2]):
            return dict(super()._get_internal_repr(trials, search_space, study))
        kept = split[3] if trials is split[1] else split[4]
        values: dict[str, np.ndarray] = {}
        for name, dist in search_space.items():
            if isinstance(dist, _NUMERIC):  # to_internal_repr is float() for both
                values[name] = np.array([numeric[name] for params, numeric in kept if name in numeric])
            else:
                values[name] = np.array(
                    [dist.to_internal_repr(params[name]) for params, _ in kept if name in params]
                )
        return values
