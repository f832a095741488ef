"""Search spaces and searchers: config → Ray Tune domains and a seeded search algorithm."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ray import tune

from costtune.core.config import ParamSpec, SearcherConfig
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
    """Tune domains, flat (``a/b`` for a nested name: see :func:`costtune.core.config.nested`); a
    ``grid`` choice (or, with ``grid``, every choice) becomes ``tune.grid_search``."""
    return {
        name: tune.grid_search(list(spec.values or [])) if grid or spec.grid else to_tune_domain(spec)
        for name, spec in space.items()
    }


#: the gp searcher's random start-up trials before the Gaussian process proposes (Optuna's
#: own default is 10; 5 reached LCBench's targets cheaper: benchmarks/ARCHIVE.md)
GP_STARTUP_TRIALS = 5


def optuna_sampler(kind: str, seed: int, n_startup_trials: int | None = None) -> Any:
    """Optuna's own sampler, configured through its public constructor: ``optuna``: univariate
    ``TPESampler`` (10 random trials first); ``gp``: ``GPSampler`` (5 first) fitted to losses
    with their outliers clipped (:class:`costtune.search.gp.ClippedGPSampler`)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if kind == "gp":
        from costtune.search.gp import ClippedGPSampler

        return ClippedGPSampler(seed=seed, n_startup_trials=n_startup_trials or GP_STARTUP_TRIALS)
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
    ``points_to_evaluate`` first. The Optuna samplers (:func:`optuna_sampler`) run inside Ray
    Tune's ``OptunaSearch``."""
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
