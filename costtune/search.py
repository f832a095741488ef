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


#: the default searcher's random start-up trials before the Gaussian process proposes. Chosen
#: on LCBench's dev tasks, it held on the test tasks (20 seeds, benchmarks/ARCHIVE.md):
#: 0.082 / 0.068 of the grid's dollars to target against 0.115 / 0.089 with Optuna's 10, cheaper
#: in 110 and 103 of 160 paired runs; with 5 knobs no curve depends on (test, 20 seeds, stop
#: 25) 0.127 / 0.095 against 0.155 / 0.120, successful in 152 and 159 of 160 runs against
#: 152 and 156.
GP_STARTUP_TRIALS = 5


def gp_sampler(
    seed: int,
    n_startup_trials: int = 10,
    cost_exponent: float = 0.0,
    value_transform: str | None = None,
    fast_from: int | None = None,
    fast_search: dict[str, int] | None = None,
    believer: bool = True,
    fidelity_epochs: int | None = None,
    longest_min: int | None = None,
    model_check: float | None = None,
) -> Any:
    """Optuna's ``GPSampler``, asked the same and answering the same, without its per-ask
    ``torch.device("cpu")`` mode where torch's default device is the CPU already
    (:class:`costtune.gp.CpuGPSampler`)."""
    from costtune.gp import FAST_ASK_FROM, CpuGPSampler

    return CpuGPSampler(
        fast_from=FAST_ASK_FROM if fast_from is None else fast_from,
        fast_search=fast_search,
        believer=believer,
        fidelity_epochs=fidelity_epochs,
        longest_min=longest_min,
        model_check=model_check,
        seed=seed,
        n_startup_trials=n_startup_trials,
        cost_exponent=cost_exponent,
        value_transform=value_transform,
    )


def make_searcher(
    config: SearcherConfig,
    metric: str,
    mode: str,
    seed: int,
    max_concurrent: int | None = None,
    max_epochs: int | None = None,
) -> Any:
    """A seeded Ray Tune search algorithm: Optuna's Gaussian process (``gp``, the default),
    Optuna TPE, HyperOpt TPE or random; each tries ``points_to_evaluate`` first.

    ``max_epochs``: the sweep's, for ``searcher.over_epochs`` (the process over configuration
    and epochs run reads its acquisition there); the epochs each trial ran reach the sampler
    through :class:`RungEstimates`."""
    points = [dict(p) for p in config.points_to_evaluate] or None
    if config.type == "gp":
        import optuna
        from ray.tune.search.optuna import OptunaSearch

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # the default: chosen on LCBench's dev tasks, it held on the test tasks (20 seeds):
        # 0.119 / 0.103 of the grid's dollars to target against 0.226 / 0.194 with TPE and the
        # same rungs and stopper, cheaper in 108 and 107 of 160 paired runs, dearer in 42 and
        # 47 (benchmarks/ARCHIVE.md). It refits the process at every ask:
        # benchmarks/overhead.py --searchers gives its seconds per proposal.
        # value_transform "clip" (the default): the bad tail raised to the Tukey
        # fence; on LCBench's test tasks 0.112 / 0.099 of the grid's dollars against 0.120 /
        # 0.103, a direction and no more (p = 0.44, 0.78), a guard against diverged trials
        gp = gp_sampler(
            seed,
            n_startup_trials=config.n_startup_trials or GP_STARTUP_TRIALS,
            value_transform=None if config.value_transform == "none" else config.value_transform,
            fast_from=config.fast_ask_from,
            fidelity_epochs=max_epochs if config.over_epochs and (max_epochs or 0) >= 2 else None,
            model_check=config.model_check,
            cost_exponent=config.cost_exponent,
        )
        return OptunaSearch(metric=metric, mode=mode, sampler=gp, points_to_evaluate=points)
    if config.type == "optuna":
        import optuna
        from ray.tune.search.optuna import OptunaSearch

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        from costtune.tpe import QuickTPESampler

        # univariate TPE, the default searcher (benchmarks/RESULTS.md). Optuna 5's default is
        # multivariate for one objective; on LCBench's test tasks that reached the targets less
        # often (benchmarks/ARCHIVE.md, "Which TPE").
        # QuickTPESampler: Optuna's univariate TPESampler's proposals in a fifth of its time.
        sampler = QuickTPESampler(seed=seed, n_startup_trials=config.n_startup_trials or 10)
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
    """A searcher told what the scheduler knows of the trials it ended: for a trial the
    look-ahead pruned, its estimated metric at the rung it was judged for
    (:meth:`~costtune.policy.AsyncHyperband.rung_estimate`) instead of its last report; and,
    for the Gaussian-process searcher, how many epochs each trial ran, so that once the hedge
    has shown the rungs mislead (``AsyncHyperband.switched``) the process models the full runs
    alone (:meth:`costtune.gp.CpuGPSampler.forget_below`).

    The look-ahead stops hopeless trials an epoch or two in. Told their epoch-1 loss, a TPE
    searcher would rank them against trials told at epoch 5 or 52 (on LCBench's dev tasks it
    then missed the target in runs the rungs alone reached it). Told the rung estimate, it
    compares trials at the rung, as it would have without the look-ahead. Everything else
    passes through unchanged.

    The GP's trials also carry their seconds per epoch (:data:`costtune.gp.COST_ATTR`: the
    result's ``seconds_field`` over its epochs), which ``searcher.cost_exponent`` weighs the
    proposals by. One sweep prices every device-second alike, so seconds rank the trials as
    dollars do.

    Args:
        searcher: the searcher to tell (Optuna, HyperOpt).
        scheduler: a :class:`~costtune.schedulers.CostAwareHyperBand` (read when a trial ends,
            so a scheduler restored by ``--resume`` is the one asked), or None (another
            scheduler: the GP over epochs still learns the epochs each trial ran, which the
            stopping rule may have ended early).
        seconds_field: the result's cumulative seconds (a sweep's ``cost.time_field``).
    """

    def __init__(
        self, searcher: Searcher, scheduler: Any = None, seconds_field: str = "time_total_s"
    ) -> None:
        self.searcher = searcher
        self.scheduler = scheduler
        self.seconds_field = seconds_field
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
        self._tell_epochs(trial_id, result)
        self.searcher.on_trial_complete(trial_id, result=result, error=error)

    def _tell_epochs(self, trial_id: str, result: dict | None) -> None:
        """(the Gaussian-process searcher) The trial's epochs and seconds per epoch on its Optuna
        trial, and, once the policy has switched to full runs, the process told to fit the full
        runs alone."""
        from costtune.gp import COST_ATTR, EPOCHS_ATTR, CpuGPSampler

        sampler = getattr(getattr(self.searcher, "_ot_study", None), "sampler", None)  # Ray's OptunaSearch
        if not isinstance(sampler, CpuGPSampler):
            return
        trial = getattr(self.searcher, "_ot_trials", {}).get(trial_id)
        epochs = (result or {}).get(getattr(self.scheduler, "time_attr", "training_iteration"))
        done = trial_id in getattr(self.searcher, "_completed_trials", ())
        if trial is not None and epochs is not None and not done:
            trial.set_user_attr(EPOCHS_ATTR, int(epochs))
            seconds = (result or {}).get(
                getattr(self, "seconds_field", "time_total_s")
            )  # absent in an older pickle
            if isinstance(seconds, int | float) and seconds > 0 and int(epochs) > 0:
                trial.set_user_attr(COST_ATTR, float(seconds) / int(epochs))
        policy = getattr(self.scheduler, "policy", None)
        if policy is not None:
            sampler.forget_below(policy.searcher_min_epochs())

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
