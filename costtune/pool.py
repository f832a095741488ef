"""Searchers over a finite pool of recorded configurations, for replaying a finished sweep.

A recorded sweep holds the curves of the configurations it ran and no others, so a searcher
replayed over it may only pick from that pool:

- :class:`OrderedPool`: the recorded order, or a seeded shuffle of it (random search);
- :class:`TpePool`, :class:`GpPool`: Optuna's TPE or Gaussian process (costtune's default
  searcher) proposes a configuration over a search space inferred from the pool's ``hp.*``
  columns; the proposal is mapped to the nearest unused recorded
  configuration, and TPE is told what actually ran — through Optuna's public API only: the
  proposal's trial is closed as failed (both samplers ignore failed trials) and the configuration
  that ran is added with its result (:func:`optuna.trial.create_trial`).

Both answer ``ask() -> Curve | None`` (``None``: the pool is used up) and ``tell(config_id,
epoch, loss)`` — the simulator's ``next_curve`` and ``on_trial_end`` — and are seeded:
the same seed gives the same proposals.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from costtune.config import MODEL_CHECK_DEFAULT
from costtune.curves import Curve
from costtune.errors import ConfigError


class OrderedPool:
    """The pool in its recorded order (``seed=None``) or in a seeded random order."""

    def __init__(self, curves: Sequence[Curve], seed: int | None = None) -> None:
        self._queue = list(curves)
        if seed is not None:
            random.Random(seed).shuffle(self._queue)
        self._queue.reverse()  # pop() from the end

    def ask(self) -> Curve | None:
        return self._queue.pop() if self._queue else None

    def tell(self, config_id: str, epoch: int, loss: float) -> None:
        """Random search learns nothing."""


def infer_space(curves: Sequence[Curve]) -> dict[str, Any]:
    """Optuna distributions over the pool's hyperparameters.

    Numbers: integer or float ranges from the pool's minimum to maximum, log-scaled when all
    are positive and span at least a factor 100; anything else: a categorical choice.
    A hyperparameter with a single value is left out (nothing to choose).
    """
    import optuna.distributions as d

    if not curves or not curves[0].hyperparameters:
        raise ConfigError("replay: a searcher needs hp.<name> columns in the curves table")
    names = list(curves[0].hyperparameters)
    space: dict[str, Any] = {}
    for name in names:
        values = [c.hyperparameters.get(name) for c in curves]
        numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) == len(values) and all(math.isfinite(v) for v in numbers):
            low, high = min(numbers), max(numbers)
            if low == high:
                continue
            log = low > 0 and high / low >= 100
            if all(v.is_integer() for v in numbers):
                space[name] = d.IntDistribution(int(low), int(high), log=log)
            else:
                space[name] = d.FloatDistribution(low, high, log=log)
        else:
            choices = tuple(dict.fromkeys(str(v) for v in values))
            if len(choices) > 1:
                space[name] = d.CategoricalDistribution(choices)
    if not space:
        raise ConfigError("replay: every hyperparameter has one value in the pool; nothing to search")
    return space


def _position(value: Any, dist: Any) -> float:
    """Where ``value`` lies in ``dist``, scaled to [0, 1] (log-scaled where the space is)."""
    low, high = float(dist.low), float(dist.high)
    v = min(max(float(value), low), high)
    if dist.log:
        return (math.log(v) - math.log(low)) / (math.log(high) - math.log(low))
    return (v - low) / (high - low)


def distance(a: dict[str, Any], b: dict[str, Any], space: dict[str, Any]) -> float:
    """Squared distance in the unit cube of ``space`` (a categorical mismatch counts 1)."""
    total = 0.0
    for name, dist in space.items():
        if hasattr(dist, "choices"):
            total += float(str(a[name]) != str(b[name]))
        else:
            total += (_position(a[name], dist) - _position(b[name], dist)) ** 2
    return total


class SamplerPool:
    """An Optuna sampler over a pool: proposals snapped to the nearest unused recorded
    configuration (see the module's docstring). :class:`TpePool` and :class:`GpPool` are the
    two costtune's sweeps offer."""

    #: the replay's policy, when it has one: its ``searcher_min_epochs()`` is read as each trial ends
    policy: Any = None

    def __init__(self, curves: Sequence[Curve], sampler: Any) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.space = infer_space(curves)
        self._curves = list(curves)
        self._numeric = [n for n, d in self.space.items() if not hasattr(d, "choices")]
        self._categorical = [n for n, d in self.space.items() if hasattr(d, "choices")]
        # the pool in the unit cube of the space, for :func:`distance` over all of it at once
        self._coords = np.array(
            [[_position(c.hyperparameters[n], self.space[n]) for n in self._numeric] for c in curves]
        ).reshape(len(curves), len(self._numeric))
        self._labels = np.array(
            [[str(c.hyperparameters[n]) for n in self._categorical] for c in curves], dtype=object
        ).reshape(len(curves), len(self._categorical))
        self._used = np.zeros(len(curves), dtype=bool)
        self._pending: dict[str, Any] = {}
        self.study = optuna.create_study(sampler=sampler)

    def _params(self, curve: Curve) -> dict[str, Any]:
        hp = curve.hyperparameters
        return {name: str(hp[name]) if hasattr(d, "choices") else hp[name] for name, d in self.space.items()}

    def ask(self) -> Curve | None:
        if self._used.all():
            return None
        trial = self.study.ask(fixed_distributions=self.space)
        proposal = trial.params
        # the nearest unused configuration (:func:`distance`); ties go to the earlier recorded one
        at = np.array([_position(proposal[n], self.space[n]) for n in self._numeric])
        squared = ((self._coords - at) ** 2).sum(axis=1)
        squared += (
            self._labels != np.array([str(proposal[n]) for n in self._categorical], dtype=object)
        ).sum(axis=1)
        squared[self._used] = np.inf
        index = int(np.argmin(squared))
        self._used[index] = True
        curve = self._curves[index]
        self.study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
        self._pending[curve.config_id] = curve
        return curve

    def tell(self, config_id: str, epoch: int, loss: float) -> None:
        """The configuration that ran ended at ``epoch`` with ``loss``: TPE learns that."""
        from costtune.gp import COST_ATTR, EPOCHS_ATTR, CpuGPSampler

        curve = self._pending.pop(config_id)
        attrs: dict[str, float] = {EPOCHS_ATTR: epoch}
        seconds = curve.seconds_until(epoch) if 0 < epoch <= len(curve.epoch_seconds) else 0.0
        if seconds > 0:
            attrs[COST_ATTR] = seconds / epoch  # its seconds per epoch, as a sweep tags it
        value = loss if math.isfinite(loss) else None
        self.study.add_trial(
            self._optuna.trial.create_trial(
                params=self._params(curve),
                distributions=self.space,
                value=value,
                state=self._optuna.trial.TrialState.COMPLETE
                if value is not None
                else self._optuna.trial.TrialState.FAIL,
                user_attrs=attrs,
            )
        )
        # as a sweep's searcher: once the hedge has switched, the process fits the full runs alone
        if self.policy is not None and isinstance(self.study.sampler, CpuGPSampler):
            self.study.sampler.forget_below(self.policy.searcher_min_epochs())


class TpePool(SamplerPool):
    """Optuna's univariate TPE over a pool, as a sweep's ``searcher: {type: optuna}`` runs it:
    :class:`costtune.tpe.QuickTPESampler`, Optuna's proposals in a fraction of its ask.

    Args:
        curves: the pool.
        seed: TPE's seed.
        n_startup_trials: random proposals before TPE models (Optuna's default 10).
    """

    def __init__(self, curves: Sequence[Curve], seed: int = 0, n_startup_trials: int = 10) -> None:
        from costtune.tpe import QuickTPESampler

        super().__init__(curves, QuickTPESampler(seed=seed, n_startup_trials=n_startup_trials))


class GpPool(SamplerPool):
    """Optuna's Gaussian-process sampler over a pool: the searcher of costtune's default sweep
    (``searcher: {type: gp}``, :func:`costtune.search.gp_sampler`).

    Args:
        curves: the pool.
        seed: the sampler's seed.
        n_startup_trials: random proposals before the process models (5, as a sweep's:
            :data:`costtune.search.GP_STARTUP_TRIALS`).
        value_transform: as a sweep's ``searcher.value_transform`` (default ``clip``).
        fidelity_epochs: the sweep's ``max_epochs``, for a process over (configuration, epochs
            run) (``CpuGPSampler(fidelity_epochs=...)``); None: over the configuration alone.
        longest_min: the process fits the trials that ran as long as the n-th longest
            (``CpuGPSampler(longest_min=n)``); None: every trial.
        model_check: θ: TPE proposes whenever the process's leave-one-out ranking of its
            trials falls below θ (``CpuGPSampler(model_check=θ)``; a sweep's
            ``searcher.model_check``, by default :data:`costtune.config.MODEL_CHECK_DEFAULT`);
            None: never.
        cost_exponent: α > 0: the process proposes by expected improvement per unit of
            cost^α, the cost each configuration's recorded seconds per epoch (a sweep's
            ``searcher.cost_exponent``); 0: off.
    """

    def __init__(
        self,
        curves: Sequence[Curve],
        seed: int = 0,
        n_startup_trials: int | None = None,
        value_transform: str | None = "clip",
        fidelity_epochs: int | None = None,
        longest_min: int | None = None,
        model_check: float | None = MODEL_CHECK_DEFAULT,
        cost_exponent: float = 0.0,
    ) -> None:
        from costtune.search import GP_STARTUP_TRIALS, gp_sampler

        startup = GP_STARTUP_TRIALS if n_startup_trials is None else n_startup_trials
        sampler = gp_sampler(
            seed,
            n_startup_trials=startup,
            value_transform=value_transform,
            fidelity_epochs=fidelity_epochs,
            longest_min=longest_min,
            model_check=model_check,
            cost_exponent=cost_exponent,
        )
        super().__init__(curves, sampler)
