"""Searchers over a finite pool of recorded configurations, for replaying a finished sweep.

A recorded sweep holds the curves of the configurations it ran and no others, so a searcher
replayed over it may only pick from that pool:

- :class:`OrderedPool`: the recorded order, or a seeded shuffle of it (random search);
- :class:`SamplerPool`: Optuna's univariate TPE (costtune's default searcher) or Gaussian
  process, as a sweep asks them (:func:`costtune.search.optuna_sampler`), proposes a
  configuration over a search space inferred from the pool's ``hp.*`` columns; the proposal is
  mapped to the nearest unused recorded configuration, and the sampler is told what actually
  ran — through Optuna's public API only: the proposal's trial is closed as failed (both
  samplers ignore failed trials) and the configuration that ran is added with its result
  (:func:`optuna.trial.create_trial`).

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

from costtune.core.curves import Curve
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
    configuration (see the module's docstring).

    Args:
        curves: the pool.
        searcher: ``tpe`` (a sweep's ``searcher: {type: optuna}``) or ``gp``.
        seed: the sampler's seed.
        n_startup_trials: random proposals before the model (by default as a sweep's).
        sampler: any other Optuna sampler, in place of ``searcher``'s (an experiment's).
    """

    def __init__(
        self,
        curves: Sequence[Curve],
        searcher: str = "tpe",
        seed: int = 0,
        n_startup_trials: int | None = None,
        sampler: Any = None,
    ) -> None:
        import optuna

        from costtune.search import optuna_sampler

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if sampler is None:
            if searcher not in ("tpe", "gp"):
                raise ConfigError(f"--searcher: {searcher!r} is not an Optuna sampler (tpe or gp)")
            sampler = optuna_sampler("optuna" if searcher == "tpe" else "gp", seed, n_startup_trials)
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
        curve = self.snap(trial.params)
        self.study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
        self._pending[curve.config_id] = curve
        return curve

    def snap(self, proposal: dict[str, Any]) -> Curve:
        """The recorded configuration nearest ``proposal`` (:func:`distance`) among the unused
        ones, now used (all used: among all); ties go to the earlier recorded one."""
        at = np.array([_position(proposal[n], self.space[n]) for n in self._numeric])
        squared = ((self._coords - at) ** 2).sum(axis=1)
        squared += (
            self._labels != np.array([str(proposal[n]) for n in self._categorical], dtype=object)
        ).sum(axis=1)
        if not self._used.all():
            squared[self._used] = np.inf
        index = int(np.argmin(squared))
        self._used[index] = True
        return self._curves[index]

    def tell(self, config_id: str, epoch: int, loss: float) -> None:
        """The configuration that ran ended at ``epoch`` with ``loss``: the sampler learns that
        (a NaN loss: a failed trial, which Optuna's samplers skip)."""
        curve = self._pending.pop(config_id)
        value = loss if math.isfinite(loss) else None
        trial_state = self._optuna.trial.TrialState
        self.study.add_trial(
            self._optuna.trial.create_trial(
                params=self._params(curve),
                distributions=self.space,
                value=value,
                state=trial_state.COMPLETE if value is not None else trial_state.FAIL,
                user_attrs=self._user_attrs(curve, epoch),
            )
        )

    def _user_attrs(self, curve: Curve, epoch: int) -> dict[str, Any]:
        """What the told trial carries besides its value (the epochs it ran)."""
        return {"epochs": epoch}
