"""Search spaces and searchers: config → Ray Tune domains and a seeded search algorithm."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ray import tune
from ray.tune.search import Searcher

from costtune.config import ParamSpec, SearcherConfig
from costtune.errors import ConfigError


def to_tune_domain(spec: ParamSpec) -> Any:
    """One :class:`ParamSpec` as a ``ray.tune`` sampling domain (bounds inclusive for ints)."""
    low, high = spec.low, spec.high
    if spec.type == "choice":
        return tune.choice(list(spec.values or []))
    if low is None or high is None:  # ParamSpec validation rules this out
        raise ConfigError(f"search_space: {spec.type} needs low and high")
    if spec.type == "uniform":
        return tune.uniform(low, high)
    if spec.type == "loguniform":
        return tune.loguniform(low, high)
    if spec.type == "int":
        return tune.randint(int(low), int(high) + 1)
    return tune.lograndint(int(low), int(high) + 1)


def build_search_space(space: Mapping[str, ParamSpec], grid: bool = False) -> dict[str, Any]:
    """Tune domains, flat (``a/b`` for a nested name: see :func:`costtune.config.nested`); a
    ``grid`` choice (or, with ``grid``, every choice) becomes ``tune.grid_search``."""
    return {
        name: tune.grid_search(list(spec.values or [])) if grid or spec.grid else to_tune_domain(spec)
        for name, spec in space.items()
    }


#: the gp searcher's random start-up trials before the Gaussian process proposes (Optuna's
#: own default is 10; 5 reached LCBench's targets cheaper: benchmarks/ARCHIVE.md)
GP_STARTUP_TRIALS = 5


def optuna_sampler(kind: str, seed: int, n_startup_trials: int | None = None) -> Any:
    """Optuna's own sampler, as shipped, configured through its public constructor: ``optuna``:
    univariate ``TPESampler`` (10 random trials first); ``gp``: ``GPSampler`` (5 first)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if kind == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=n_startup_trials or GP_STARTUP_TRIALS)
    if kind == "optuna":
        # univariate, as Optuna 4 and earlier: Optuna 5's default is multivariate for one
        # objective, which reached LCBench's targets less often (benchmarks/ARCHIVE.md)
        return optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=n_startup_trials or 10, multivariate=False
        )
    raise ConfigError(f"searcher.type: {kind!r} is not an Optuna sampler")


def make_searcher(
    config: SearcherConfig,
    metric: str,
    mode: str,
    seed: int,
    max_concurrent: int | None = None,
) -> Any:
    """A seeded Ray Tune search algorithm: Optuna's univariate TPE (``optuna``, the default),
    Optuna's Gaussian process (``gp``), HyperOpt's TPE or random; each tries
    ``points_to_evaluate`` first. The Optuna samplers run as shipped (:func:`optuna_sampler`)
    inside Ray Tune's ``OptunaSearch``."""
    points = [dict(p) for p in config.points_to_evaluate] or None
    if config.type in ("gp", "optuna"):
        from ray.tune.search.optuna import OptunaSearch

        sampler = optuna_sampler(config.type, seed, config.n_startup_trials)
        return OptunaSearch(metric=metric, mode=mode, sampler=sampler, points_to_evaluate=points)
    if config.type == "hyperopt":
        from ray.tune.search.hyperopt import HyperOptSearch

        return HyperOptSearch(
            metric=metric,
            mode=mode,
            random_state_seed=seed,
            n_initial_points=config.n_startup_trials or 20,
            points_to_evaluate=points,
        )
    if config.type in ("random", "grid"):
        from ray.tune.search import BasicVariantGenerator

        # a SearchAlgorithm, not a Searcher: Tune ignores max_concurrent_trials for it
        return BasicVariantGenerator(
            random_state=seed, max_concurrent=max_concurrent or 0, points_to_evaluate=points
        )
    raise ConfigError(f"searcher.type: {config.type!r} is not available")


class RungEstimates(Searcher):
    """A searcher told, for a trial the scheduler's look-ahead pruned, its estimated metric at
    the rung it was judged for (:meth:`~costtune.policy.AsyncHyperband.rung_estimate`) instead
    of its last report. Everything else passes through unchanged, through Ray Tune's public
    ``Searcher`` interface.

    The look-ahead stops hopeless trials an epoch or two in. Told their epoch-1 loss, a TPE
    searcher would rank them against trials told at epoch 5 or 52. Told the rung estimate, it
    compares trials at the rung, as it would have without the look-ahead.

    Args:
        searcher: the searcher to tell (Optuna, HyperOpt).
        scheduler: a :class:`~costtune.schedulers.CostAwareHyperBand` (read when a trial ends,
            so a scheduler restored by ``--resume`` is the one asked).
    """

    def __init__(self, searcher: Searcher, scheduler: Any = None) -> None:
        self.searcher = searcher
        self.scheduler = scheduler
        super().__init__(metric=searcher.metric, mode=searcher.mode)

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        ok = self.searcher.set_search_properties(metric, mode, config, **spec)
        self._metric, self._mode = self.searcher.metric, self.searcher.mode
        return ok

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        return self.searcher.set_max_concurrency(max_concurrent)

    def suggest(self, trial_id: str) -> dict | None:
        return self.searcher.suggest(trial_id)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        policy = getattr(self.scheduler, "policy", None)
        estimate = None if policy is None else policy.rung_estimate(trial_id)
        metric = self.searcher.metric
        if estimate is not None and result is not None and metric in result:
            result = {**result, metric: estimate if self.searcher.mode != "max" else -estimate}
        self.searcher.on_trial_complete(trial_id, result=result, error=error)

    def add_evaluated_point(self, *args: Any, **kwargs: Any) -> None:
        self.searcher.add_evaluated_point(*args, **kwargs)

    def get_state(self) -> dict:
        return {}  # nothing of its own: the searcher's state is saved by Tune beside it

    def set_state(self, state: dict) -> None:
        pass

    def save(self, checkpoint_path: str) -> None:
        self.searcher.save(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        self.searcher.restore(checkpoint_path)

    def on_pause(self, trial_id: str) -> None:
        self.searcher.on_pause(trial_id)

    def on_unpause(self, trial_id: str) -> None:
        self.searcher.on_unpause(trial_id)
