"""Optuna's Gaussian-process sampler without a per-ask cost that buys nothing on CPU."""

from __future__ import annotations

import json
from typing import Any

import optuna
import torch
from optuna.samplers._gp import sampler as _gp_module
from optuna.trial import TrialState

#: the Optuna internals the shortcut reads; without them the plain sampler runs
_INTERNALS = hasattr(optuna.samplers.GPSampler, "_sample_relative_impl") and all(
    hasattr(_gp_module, name) for name in ("_get_params", "_RELATIVE_PARAMS_KEY", "_SYSTEM_ATTR_MAX_LENGTH")
)


class CpuGPSampler(optuna.samplers.GPSampler):
    """``GPSampler``, minus the ``torch.device("cpu")`` context Optuna 5 enters at every ask
    (for users who set CUDA as torch's default device) where the default device is the CPU.

    That context is a torch function mode: its Python hook runs on each of the ~10^6 small
    tensor operations of one acquisition search, a third of a benchmark run's time. The
    suggestions are Optuna's, trial for trial (``tests/test_search.py`` checks them against
    Optuna's own sampler). A module-level class, so that Ray Tune can pickle the searcher.

    It also runs each ask on one torch thread. The matrices are small (one row per trial),
    and where the trials keep every core busy, torch's default of a thread per core made one
    ask at 100 trials take 10 s instead of 0.4 s on the 2-core machine
    (``benchmarks/overhead.py --searchers``; RESULTS, stop 18).
    """

    def sample_relative(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return self._sample_relative(study, trial, search_space)
        finally:
            torch.set_num_threads(threads)

    def _sample_relative(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
        if not _INTERNALS or torch.get_default_device().type != "cpu":
            return dict(super().sample_relative(study, trial, search_space))
        if search_space == {}:
            return {}
        states = (TrialState.COMPLETE, TrialState.RUNNING)
        trials = study._get_trials(deepcopy=False, states=states, use_cache=False)
        completed = [t for t in trials if t.state == TrialState.COMPLETE]
        running = [
            t
            for t in trials
            if t.state == TrialState.RUNNING and search_space.keys() <= _gp_module._get_params(t).keys()
        ]
        if len(completed) < self._n_startup_trials:
            return {}
        params: dict[str, Any] = self._sample_relative_impl(study, completed, running, search_space)
        if params:  # shared with other processes, as Optuna's own sampler does
            text, chunk = json.dumps(params), _gp_module._SYSTEM_ATTR_MAX_LENGTH
            for i in range(0, len(text), chunk):
                study._storage.set_trial_system_attr(
                    trial._trial_id, f"{_gp_module._RELATIVE_PARAMS_KEY}:{i // chunk}", text[i : i + chunk]
                )
        return params
