"""The Python API: config → ``ray.tune.Tuner`` → run → ledger → tables.

``run_sweep`` is what ``costtune sweep`` calls; nothing is reachable only from the CLI.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import inspect
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from costtune.core.config import (
    REMOVED_FIELDS,
    SweepConfig,
    check_price_names,
    load_config,
    nested,
    parse_config,
    short_repr,
)
from costtune.core.estimate import estimate
from costtune.core.files import write_json_atomic
from costtune.core.gate import GateFailed, GateResult, check
from costtune.core.ledger import (
    LEDGER_FILE,
    RAY_RESULT_FIELDS,
    Ledger,
    LedgerWarning,
    LedgerWriteError,
    check_intact,
    repair_tail,
)
from costtune.core.policy import (
    Governor,
    MarginalRoiStopping,
    ReasonSource,
    StoppingRule,
    StopReason,
    SweepBudget,
    SweepProgress,
)
from costtune.core.policy.hyperband import plain_geometry
from costtune.core.run import ledger_spec, load_run_config
from costtune.core.rundir import (
    EXPERIMENT_NAME,
    LOCK_FILE,
    SOURCE_FILE,
    claim_existing,
    claim_new,
    disk_full,
    never_metered,
    refuse_unresumable,
    relocating,
    repair_ray_state,
    tune_known_trials,
)
from costtune.errors import ConfigError, SweepFailed
from costtune.idle import GpuSampler, NvmlSampler, NvmlUnavailable
from costtune.ray.idle import IdleGpuStopper
from costtune.ray.private import RAY_LOGGERS, staging_of_its_own, storage_rebased, trials_created_at_least
from costtune.results import SweepResult, best_checkpoint
from costtune.trainables import BUILTIN_TRAINABLES


def resolve_trainable(reference: str, config_dir: Path | None = None) -> Callable[[dict[str, Any]], Any]:
    """``amp`` or ``module:function`` → the function; only an explicit reference is imported.

    A user's own module is found the way ``python -m`` finds it: beside the config file
    (``config_dir``) or in the working directory, then on the Python path. A module found
    in one of those two folders is shipped to Ray's workers by value, so that they need not
    find it themselves (a worker's import path is not the driver's).
    """
    builtin = reference in BUILTIN_TRAINABLES
    reference = BUILTIN_TRAINABLES.get(reference, reference)
    module_name, _, attr = reference.partition(":")
    folders = [str(p.resolve()) for p in (config_dir, Path.cwd()) if p is not None]
    for folder in reversed(folders):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        where = "the config's folder, the working directory and the Python path"
        raise ConfigError(
            f"trainable.name: cannot import module {module_name!r} (looked in {where}): {exc}"
        ) from None
    fn = getattr(module, attr, None)
    if not callable(fn) and module_name == "__main__":
        raise ConfigError(
            f"trainable.name: {reference!r} is a function of the script that started the sweep, which "
            "cannot be imported by name; resume from Python: "
            f"costtune.resume_sweep(run_dir, trainable={attr})"
        )
    if not callable(fn):
        raise ConfigError(f"trainable.name: {module_name!r} has no function {attr!r}")
    check_trainable(fn, f"trainable.name: {reference}")
    source = getattr(module, "__file__", None)
    top_name = module_name.partition(".")[0]
    if (
        not builtin
        and top_name != "costtune"  # an editable install lives under the working directory too
        and source is not None
        and any(Path(source).resolve().is_relative_to(f) for f in folders)
    ):
        import ray.cloudpickle

        ray.cloudpickle.register_pickle_by_value(sys.modules[top_name])
    return fn


def check_trainable(fn: Any, where: str) -> None:
    """Ray Tune runs a Python function (``def train(config)``) or a ``tune.Trainable`` subclass;
    anything else (a builtin such as ``os.system``, another class) fails every trial."""
    if inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, functools.partial):
        return
    if isinstance(fn, type):
        from ray.tune import Trainable

        if issubclass(fn, Trainable):
            return
        raise ConfigError(f"{where} is a class, not a function trainable or a ray.tune.Trainable subclass")
    raise ConfigError(f"{where} is a {type(fn).__name__}, not a Python function taking the trial's config")


#: CostAwareHyperBand's rung state, rewritten whole whenever it changes
SCHEDULER_STATE = "scheduler_state.json"


def default_output_dir(config: SweepConfig) -> Path:
    return Path("runs") / f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_sweep(
    trainable: SweepConfig | str | Path | Callable[..., Any],
    output: str | Path | None = None,
    *,
    search_space: Mapping[str, Any] | None = None,
    seed: int | None = None,
    callbacks: Sequence[Any] = (),
    progress: bool = False,
    ray_address: str | None = None,
    approved: bool = False,
    gpu_sampler_factory: Callable[[], GpuSampler] | None = None,
    config_dir: str | Path | None = None,
    **settings: Any,
) -> SweepResult:
    """Run a cost-metered sweep and write its ledger, ``trials.csv/.parquet`` and ``summary.json``.

    Two ways in::

        # a function and its search space (Ray Tune domains or costtune's dict form)
        result = run_sweep(train_fn, search_space={"lr": tune.loguniform(1e-4, 1e-1)},
                           metric="loss", max_epochs=50, num_samples=32,
                           cost={"accelerator": "H100", "capacity": "spot"}, output="runs/lr")
        # or a whole config: a YAML path or a SweepConfig
        result = run_sweep("experiments/digits.yaml")

    Args:
        trainable: a function trainable (``ray.tune.report`` once per epoch), a
            ``"module:function"`` reference, or a config (YAML path / :class:`SweepConfig`).
        output: run directory (default ``runs/<name>-<timestamp>``); must not hold a sweep.
        search_space: with a function: hyperparameter → Ray Tune domain (``tune.uniform``,
            ``loguniform``, ``randint``, ``lograndint``, ``choice``) or costtune's
            ``{"type": ..., "low": ..., "high": ...}``; any other value is passed as is.
        seed: overrides the config's seed (searcher and trainables).
        callbacks: Ray Tune callbacks (``WandbLoggerCallback``, ``MLflowLoggerCallback``, ...);
            every result they see carries the trial's ``cost_usd``, ``device_hours`` and
            ``gpu_hours`` so far.
        progress: show a live table in the terminal while trials run.
        ray_address: connect to this Ray cluster instead of starting a local instance.
        approved: run even when the budget gate fails (a person signed off elsewhere).
        gpu_sampler_factory: where the idle-GPU stopper reads utilisation (default NVML).
        config_dir: where the config came from, to find a ``module:function`` trainable beside
            it (default: the config file's folder when ``config`` is a path).
        **settings: with a function: any other top-level config field (``metric``, ``mode``,
            ``max_epochs``, ``num_samples``, ``name``, ``scheduler``, ``searcher``, ``cost``,
            ``budget``, ``stopping``, ``resources``, ...), validated as strictly as a YAML file.

    Raises:
        ConfigError: invalid settings (one line naming the field); nothing was started.
        GateFailed: the sweep is over its limits (or a grid search) with no approval.
        SweepFailed: the sweep started but every trial failed, the metric was never
            reported, or the disk filled up (the result so far is on the exception).
    """
    config_dir = Path(config_dir) if config_dir is not None else None
    callbacks = _checked_callbacks(callbacks)
    settings = _ray_keywords(settings)
    if callable(trainable) and not isinstance(trainable, SweepConfig):
        settings = _resources_of(trainable, settings)
    function: Callable[..., Any] | None = None
    if isinstance(trainable, SweepConfig | Path) or (
        isinstance(trainable, str) and _is_config_path(trainable)
    ):
        if search_space is not None or settings:
            given = ", ".join(sorted([*settings, *(["search_space"] if search_space is not None else [])]))
            raise ConfigError(f"run_sweep: {given} go with a function trainable; a config carries its own")
        if isinstance(trainable, str | Path):
            config_dir = config_dir or Path(trainable).parent
            config = load_config(trainable)
        else:
            config = trainable
    elif isinstance(trainable, str) or callable(trainable):
        if callable(trainable):
            check_trainable(trainable, "run_sweep: trainable")
            function = trainable
        config = config_from_function(trainable, search_space, settings)
    else:
        raise ConfigError(
            f"run_sweep: trainable must be a function, 'module:function' or a config, got {trainable!r}"
        )
    if seed is not None:
        config = config.model_copy(update={"seed": seed})
    out = Path(output) if output is not None else default_output_dir(config)
    out = out.resolve()
    finished = finished_sweep_of(config, out)
    if finished is not None:
        return finished
    gate_result = pre_run_gate(config)
    if not gate_result.passed and not approved:
        raise GateFailed(f"budget gate: {gate_result.message()} (or run with --approved)")
    fn = function or resolve_trainable(config.trainable.name, config_dir)
    if function is not None:
        _ship_by_value(function)
    created, had_lock = not out.exists(), (out / LOCK_FILE).exists()
    lock = claim_new(out)
    try:
        return _run(config, fn, out, progress, ray_address, gpu_sampler_factory, config_dir, list(callbacks))
    except ConfigError:
        # refused before anything ran (the cluster cannot hold a trial, say): leave no trace
        if not had_lock and [p.name for p in out.iterdir()] == [LOCK_FILE]:
            (out / LOCK_FILE).unlink()
            if created:
                out.rmdir()
        raise
    finally:
        lock.release()


def finished_sweep_of(config: SweepConfig, out: Path) -> SweepResult | None:
    """A re-run into a run directory (a notebook cell run twice): the sweep it holds when that is
    this config's and finished, loaded with a one-line note on stderr (as Optuna's
    ``load_if_exists``); ``None`` when ``out`` holds no sweep. Refused in one line: a sweep of
    another config (naming the first field that differs, both values), or an unfinished one
    (pointing to resume)."""
    if not ((out / "config.yaml").is_file() and (out / LEDGER_FILE).is_file()) or never_metered(out):
        return None
    held = load_run_config(out)
    mine, theirs = config.model_dump(mode="json"), held.model_dump(mode="json")
    if mine != theirs:
        field, here, there = _first_difference(mine, theirs)
        raise ConfigError(
            f"output: {out} holds a sweep of another config ({field}: {short_repr(there)} there, "
            f"{short_repr(here)} here); give another output, or delete that run to start over"
        )
    from costtune.results import load_run

    result = load_run(out)
    if result.interrupted or not (out / "summary.json").is_file():
        claim_new(out).release()  # refuses in one line: in use, or unfinished (pointing to resume)
    print(
        f"costtune: {out} already holds this finished sweep ({len(result.ledger.trials)} trials); "
        "loaded it, nothing was run (give another output for a new sweep)",
        file=sys.stderr,
        flush=True,
    )
    return result


def _first_difference(a: Any, b: Any, where: str = "") -> tuple[str, Any, Any]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{where}.{key}" if where else str(key))
    return where or "config", a, b


#: Ray Tune's ``Tuner`` / ``TuneConfig`` / ``RunConfig`` / ``tune.run`` keywords that costtune
#: does not take as they are: what to write instead (``time_budget_s`` and ``name`` are honoured)
RAY_EQUIVALENTS = {
    "stop": "max_epochs=N (Ray's stop={'training_iteration': N}); budget={...} and stopping={...} stop "
    "on dollars and returns",
    "checkpoint_config": "nothing: each trial keeps its two best checkpoints by metric and mode, and its "
    "newest for resume (result.best['checkpoint'])",
    "resources_per_trial": "resources={'cpus': ..., 'gpus': ...}, or tune.with_resources(fn, {...})",
    "search_alg": "searcher={'type': 'gp' | 'optuna' | 'hyperopt' | 'random'}",
    "storage_path": "output='DIR' (the run directory)",
    "param_space": "search_space={...}",
    "config": "search_space={...}",
    "tune_config": "the fields as keywords: metric=, mode=, num_samples=, max_concurrent_trials=, ...",
    "run_config": "the fields as keywords: output=, callbacks=, name=, ...",
    "max_failures": "failures={'max_retries': N}",
    "local_dir": "output='DIR' (the run directory)",
}


def _ray_keywords(settings: dict[str, Any]) -> dict[str, Any]:
    """Ray Tune's keywords: ``time_budget_s`` kept with Ray's meaning (``budget.max_wall_seconds``),
    a Ray scheduler object or any keyword of :data:`RAY_EQUIVALENTS` refused in one line naming
    costtune's equivalent."""
    for key, instead in RAY_EQUIVALENTS.items():
        if key in settings:
            raise ConfigError(f"{key}: a Ray Tune keyword costtune does not take; write {instead}")
    scheduler = settings.get("scheduler")
    if scheduler is not None and not isinstance(scheduler, Mapping):
        raise ConfigError(
            f"scheduler: a {type(scheduler).__name__} object; costtune's scheduler is set as "
            "scheduler={'type': 'cost_aware_hyperband', 'grace_epochs': 5, 'eta': 5} (Ray's "
            "ASHAScheduler(grace_period=5, reduction_factor=5)), or 'pbt' / 'fifo'"
        )
    if "time_budget_s" in settings:
        settings = dict(settings)
        seconds = settings.pop("time_budget_s")
        budget = settings.get("budget") or {}
        if not isinstance(budget, Mapping):
            raise ConfigError(f"budget: must be a mapping, got {type(budget).__name__}")
        if "max_wall_seconds" in budget:
            raise ConfigError("time_budget_s: also set as budget.max_wall_seconds; keep one")
        settings["budget"] = {**budget, "max_wall_seconds": seconds}
    return settings


def _resources_of(trainable: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """``tune.with_resources(fn, {"cpu": 2, "gpu": 1})`` sets what each trial holds and is
    billed for, as in Ray; ``resources=`` beside it is refused (which one?). A per-config
    resource function or a multi-bundle placement group is refused in one line."""
    from ray.tune import PlacementGroupFactory

    # Ray keeps a function trainable's resources on the function (ray.tune.with_resources)
    request = getattr(trainable, "_resources", None)
    if request is None:
        return settings
    if "resources" in settings:
        raise ConfigError("resources: also set by tune.with_resources on the trainable; keep one")
    if not isinstance(request, PlacementGroupFactory) or len(request.bundles) != 1:
        raise ConfigError(
            "resources: tune.with_resources with a function or several bundles; costtune bills "
            "one bundle per trial: give a dict such as {'cpu': 2, 'gpu': 1}"
        )
    held = {k.lower(): float(v) for k, v in request.required_resources.items()}
    types = [k.partition(":")[2] for k in request.required_resources if k.startswith("accelerator_type:")]
    unknown = sorted(k for k in held if k not in ("cpu", "gpu") and not k.startswith("accelerator_type:"))
    if unknown:
        raise ConfigError(f"resources: tune.with_resources asks for {unknown[0]!r}; costtune takes cpu, gpu")
    resources: dict[str, Any] = {"cpus": held.get("cpu", 1.0), "gpus": held.get("gpu", 0.0)}
    if types:
        resources["accelerator_type"] = types[0]
    return {**settings, "resources": resources}


def _checked_callbacks(callbacks: Any) -> list[Any]:
    """``callbacks``: a list of Ray Tune callbacks, checked before anything is created."""
    from ray.tune import Callback

    if isinstance(callbacks, Callback):
        callbacks = [callbacks]
    if isinstance(callbacks, str | bytes | Mapping) or not isinstance(callbacks, Sequence):
        raise ConfigError(
            f"callbacks: must be a list of ray.tune.Callback objects, got {type(callbacks).__name__}"
        )
    for i, callback in enumerate(callbacks):
        if not isinstance(callback, Callback):
            raise ConfigError(
                f"callbacks[{i}]: must be a ray.tune.Callback (WandbLoggerCallback, ...), "
                f"got {type(callback).__name__}"
            )
    return list(callbacks)


def _is_config_path(value: str) -> bool:
    return value.endswith((".yaml", ".yml")) or not re.fullmatch(r"[\w.]+:[\w.]+", value)


def config_from_function(
    trainable: str | Callable[..., Any], search_space: Mapping[str, Any] | None, settings: Mapping[str, Any]
) -> SweepConfig:
    """The :class:`SweepConfig` of a Python-first call: a function (or ``module:function``),
    its search space (Ray Tune domains or costtune's dict form) and top-level fields."""
    if search_space is None:
        raise ConfigError("search_space: required with a function trainable (hyperparameter → domain)")
    if not isinstance(search_space, Mapping) or not search_space:
        raise ConfigError("search_space: must be a non-empty mapping of hyperparameter → domain")
    if callable(trainable):
        module = getattr(trainable, "__module__", None) or "__main__"
        # recorded for --resume, which imports it by name; a lambda or a nested function
        # runs all the same (Ray ships it by value) but cannot be resumed by name
        reference = f"{module}:{_function_attr(trainable)}"
        default_name = str(getattr(trainable, "__name__", "sweep"))
    else:
        reference = trainable
        default_name = reference.rpartition(":")[2]
    space: dict[str, Any] = {}
    fixed: dict[str, Any] = (
        dict(settings.get("trainable", {}).get("args", {}))
        if isinstance(settings.get("trainable"), Mapping)
        else {}
    )
    for name, domain in _flattened(search_space):
        spec = param_spec_of(name, domain)
        if spec is None:
            fixed[name] = domain
        else:
            space[name] = spec
    if not space:
        raise ConfigError("search_space: holds only fixed values; give at least one domain to search")
    if any(spec.get("grid") for spec in space.values()) and "searcher" not in settings:
        # Ray Tune's meaning: grid values are crossed, num_samples times, by its own searcher
        settings = {**settings, "searcher": {"type": "random"}}
    name = settings.get("name") or re.sub(r"[^A-Za-z0-9_.-]", "-", default_name).strip("-._") or "sweep"
    raw = {
        **{k: v for k, v in settings.items() if k != "trainable"},
        "name": name,
        "trainable": {"name": reference, "args": fixed},
        "search_space": space,
    }
    raw.setdefault("metric", "loss")
    check_price_names(raw)
    return parse_config(raw)


def _flattened(space: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """A nested search space as Ray Tune flattens it: ``{"opt": {"lr": ...}}`` is ``opt/lr``
    (the function still receives ``config["opt"]["lr"]``). A nested mapping with no domain
    in it is a fixed value, passed as it is."""
    out: list[tuple[str, Any]] = []
    for key, value in space.items():
        name = f"{prefix}{key}"
        if "/" in str(key):
            raise ConfigError(f"search_space.{name}: '/' joins nested names; use a nested mapping instead")
        if isinstance(value, Mapping) and not _costtune_form(value) and "grid_search" not in value:
            inner = _flattened(value, f"{name}/")
            if any(param_spec_of(n, v) is not None for n, v in inner):
                out += inner
                continue
        out.append((str(name), value))
    return out


def _costtune_form(value: Mapping[str, Any]) -> bool:
    """``{"type": ..., "low": ..., "high": ...}``, not a nested space that names a "type"."""
    from ray.tune.search import sample

    return "type" in value and not any(isinstance(v, sample.Domain | Mapping) for v in value.values())


def param_spec_of(name: str, domain: Any) -> dict[str, Any] | None:
    """A Ray Tune domain (or costtune's dict form) as costtune's search-space entry; ``None``
    for a fixed value. Domains costtune cannot record (quantised, custom functions) are refused."""
    if isinstance(domain, Mapping) and _costtune_form(domain):
        return dict(domain)
    from ray.tune.search import sample

    if not isinstance(domain, sample.Domain):
        if isinstance(domain, Mapping) and "grid_search" in domain:
            return {"type": "choice", "values": list(domain["grid_search"]), "grid": True}
        return None
    sampler = domain.get_sampler()
    if isinstance(sampler, sample.Quantized):
        raise ConfigError(f"search_space.{name}: quantised domains are not supported; use an int or a choice")
    if isinstance(domain, sample.Categorical):
        return {"type": "choice", "values": list(domain.categories)}
    log = isinstance(sampler, sample.LogUniform)
    if isinstance(domain, sample.Float) and isinstance(sampler, sample.Uniform | sample.LogUniform):
        return {"type": "loguniform" if log else "uniform", "low": domain.lower, "high": domain.upper}
    if isinstance(domain, sample.Integer) and isinstance(sampler, sample.Uniform | sample.LogUniform):
        # Ray's upper bound is exclusive, costtune's inclusive
        return {"type": "logint" if log else "int", "low": domain.lower, "high": domain.upper - 1}
    raise ConfigError(
        f"search_space.{name}: {type(domain).__name__} with a {type(sampler).__name__} sampler is not "
        "supported; use uniform, loguniform, randint, lograndint or choice"
    )


def _ship_by_value(function: Callable[..., Any]) -> None:
    """A function defined in the user's own module (beside the working directory) is sent
    to Ray's workers by value: they cannot be relied on to import it (``__main__`` always is)."""
    module_name = getattr(function, "__module__", None)
    module = sys.modules.get(module_name or "")
    source = getattr(module, "__file__", None)
    top = (module_name or "").partition(".")[0]
    if module is None or source is None or top in ("costtune", "__main__") or top in BUILTIN_TRAINABLES:
        return
    if Path(source).resolve().is_relative_to(Path.cwd().resolve()):
        import ray.cloudpickle

        ray.cloudpickle.register_pickle_by_value(sys.modules[top])


def _run(
    config: SweepConfig,
    trainable: Callable[..., Any],
    out: Path,
    progress: bool,
    ray_address: str | None,
    gpu_sampler_factory: Callable[[], GpuSampler] | None,
    config_dir: Path | None = None,
    extra_callbacks: Sequence[Any] = (),
) -> SweepResult:
    _prepare_environment()
    _ensure_ray(ray_address, config)
    (out / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    # where a module:function trainable was found, for --resume from another directory; and the
    # searcher as it starts, which a resume restores from Tune's pickle whatever config.yaml says
    source = {
        "config_dir": str(config_dir.resolve()) if config_dir is not None else None,
        "searcher": config.searcher.model_dump(mode="json"),
    }
    write_json_atomic(out / SOURCE_FILE, source)

    from ray import tune
    from ray.tune.stopper import CombinedStopper, FunctionStopper

    from costtune.ray import CostAwareFIFO, LedgerCallback
    from costtune.ray.callbacks import ForgetVanishedCheckpoints, KeepRayState
    from costtune.ray.governed import GovernorHooks
    from costtune.ray.stoppers import EpochLimit, WallClockBudget
    from costtune.search import build_search_space, make_searcher

    cost_model = config.cost.cost_model()
    ledger = Ledger(ledger_spec(config), out).share()
    governor, cost_stopper = _governance(config, ledger)
    idle_stopper = _idle_stopper(config, gpu_sampler_factory, governor)
    scheduler: Any
    if config.scheduler.type == "cost_aware_hyperband":
        scheduler = hyperband_of(
            config,
            cost_model=cost_model,
            seconds_field=config.cost.time_field,
            governor=governor,
            state_path=out / SCHEDULER_STATE,
            ledger=ledger,
        )
    elif config.scheduler.type == "pbt":
        from costtune.core.policy import Mutation
        from costtune.ray.pbt import CostAwarePBT

        scheduler = CostAwarePBT(
            mutations={
                name: Mutation(spec.type, spec.low, spec.high, tuple(spec.values or ()))
                for name, spec in config.search_space.items()
            },
            perturbation_interval=config.scheduler.perturbation_interval,
            quantile_fraction=config.scheduler.quantile_fraction,
            seed=config.seed,
            cost_model=cost_model,
            seconds_field=config.cost.time_field,
            ledger=ledger,
        )
    else:
        scheduler = CostAwareFIFO(governor)
    sources: list[ReasonSource] = [cost_stopper, scheduler]
    # the cost stopper first: Tune's CombinedStopper stops asking at the first "stop", and
    # the budget must see every metered result, the last epoch of a trial included
    stoppers: list[Any] = [cost_stopper]
    if idle_stopper is not None:
        stoppers.append(FunctionStopper(idle_stopper))
        sources.insert(0, idle_stopper)
    stoppers.append(EpochLimit(config.max_epochs))  # by epoch number, not a count of results
    wall_clock = WallClockBudget(config.budget.max_wall_seconds) if config.budget.max_wall_seconds else None
    if wall_clock is not None:
        stoppers.append(wall_clock)
        sources.append(wall_clock)

    def stop_reason_of(trial_id: str) -> str | None:
        """The first source that ended the trial says why (the idle watchdog, the stopper, the
        scheduler); each answers a StopReason value."""
        return next((r for r in (s.stop_reason(trial_id) for s in sources) if r is not None), None)

    hooks = GovernorHooks(governor)  # bound methods that find the one governor after a resume
    callbacks: list[Any] = [
        ForgetVanishedCheckpoints(),
        KeepRayState(out),
        LedgerCallback(
            ledger,
            hyperparameters=list(config.search_space),
            stop_reason_of=stop_reason_of,
            seconds_field=config.cost.time_field,
            extra_seconds_of=hooks.extra_seconds,
            tables_dir=out,
            # lost work and hung time reach the budget when charged, not at a next report
            charged=hooks.charged,
        ),
    ]
    if progress:
        from costtune.ray.progress import progress_callback

        callbacks.append(progress_callback(ledger, config.num_samples))
    if config.tracking.mlflow is not None:
        callbacks.append(_mlflow_live(config, out, stop_reason_of, ledger))
    callbacks.extend(extra_callbacks)  # after the ledger's: they see the cost fields it adds

    param_space = nested(
        {
            **config.trainable.args,
            "max_epochs": config.max_epochs,
            "seed": config.seed,
            "threads": max(1, int(config.resources.cpus)),
            **build_search_space(config.search_space, grid=config.searcher.type == "grid"),
        }
    )
    resources = trial_resources(config)
    searcher = make_searcher(
        config.searcher, config.metric, config.mode, config.seed, config.max_concurrent_trials
    )
    tuner = tune.Tuner(
        tune.with_resources(trainable, resources),
        param_space=param_space,
        tune_config=tune.TuneConfig(
            metric=config.metric,
            mode=config.mode,
            num_samples=config.num_samples,
            search_alg=searcher,
            scheduler=scheduler,
            max_concurrent_trials=None
            if config.searcher.type in ("random", "grid")
            else config.max_concurrent_trials,
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(
            name=EXPERIMENT_NAME,
            storage_path=str(out),
            callbacks=callbacks,
            verbose=0,
            stop=CombinedStopper(*stoppers),
            checkpoint_config=checkpoint_config(config),
            failure_config=tune.FailureConfig(max_failures=config.failures.max_retries),
        ),
    )
    return _fit_and_write(
        tuner, config, ledger, out, ended_by=lambda: wall_clock.stop_reason("") if wall_clock else None
    )


def _mlflow_live(
    config: SweepConfig, out: Path, stop_reason_of: Callable[[str], str | None], ledger: Ledger
) -> Any:
    from costtune.ray.callbacks import MlflowCallback
    from costtune.ray.tracking import MlflowLive, default_tracking_uri

    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise ConfigError(
            "tracking.mlflow: MLflow is not installed (pip install 'costtune[mlflow]')"
        ) from None
    settings = config.tracking.mlflow
    assert settings is not None
    live = MlflowLive(
        experiment=settings.experiment or config.name,
        tracking_uri=settings.tracking_uri or default_tracking_uri(out),
        run_dir=out,
        hyperparameters=list(config.search_space),
        stop_reason_of=stop_reason_of,
        billed_of=lambda trial_id: (
            ledger.cost_usd(ledger.trials[trial_id]) if trial_id in ledger.trials else None
        ),
    )
    return MlflowCallback(live)


def hyperband_of(config: SweepConfig, **wiring: Any) -> Any:
    """The sweep's :class:`~costtune.ray.CostAwareHyperBand` as its config sets it;
    ``wiring``: what connects it to the run (cost model, governor, state file, ledger)."""
    from costtune.ray import CostAwareHyperBand

    s = config.scheduler
    return CostAwareHyperBand(  # metric and mode: Tune sets them from TuneConfig
        max_epochs=config.max_epochs,
        grace_epochs=s.grace_epochs,
        eta=s.eta,
        brackets=s.brackets,
        **wiring,
    )


def checkpoint_config(config: SweepConfig) -> Any:
    """Which checkpoints each trial keeps: its two best by the sweep's metric and mode (the best
    epoch's weights are what a user loads), and Ray always keeps the newest too (what a resume or
    a paused trial restarts from). PBT keeps every one: a clone restores a donor's checkpoint
    that may be several epochs old, and with ``num_to_keep`` Ray deletes it first."""
    from ray import tune

    if config.scheduler.type == "pbt":
        return tune.CheckpointConfig(num_to_keep=None)
    return tune.CheckpointConfig(
        num_to_keep=2, checkpoint_score_attribute=config.metric, checkpoint_score_order=config.mode
    )


def trial_resources(config: SweepConfig) -> dict[str, float]:
    """What each trial asks Ray for; an accelerator type becomes Ray's custom resource."""
    resources: dict[str, float] = {"cpu": config.resources.cpus, "gpu": config.resources.gpus}
    if config.resources.accelerator_type:
        resources[f"accelerator_type:{config.resources.accelerator_type}"] = 0.001
    return resources


def _fit_and_write(
    tuner: Any,
    config: SweepConfig,
    ledger: Ledger,
    out: Path,
    ended_by: Callable[[], str | None] = lambda: None,
) -> SweepResult:
    """``ended_by``: why Tune ended the trials still running when it returned, when costtune
    ended the whole sweep (the wall-clock budget); ``None``: a killed driver lost them."""
    started = time.perf_counter()
    failure: str | None = None
    was_interrupted = False
    ledger_writable = True
    with _watch_interrupts() as interrupted, _quiet_ray_logs(), staging_of_its_own():
        try:
            tuner.fit()
        except LedgerWriteError as exc:  # the books cannot be kept (a full disk): stop here
            failure = str(exc)
            ledger_writable = False
        except Exception as exc:  # Tune gave up (a result it rejects, a broken searcher, ...)
            failure = _tune_failure(exc, config)
        was_interrupted = interrupted()
    wall = time.perf_counter() - started
    ledger = ledger.reloaded()  # the log on disk is the record, also across resumes
    for record in list(ledger.trials.values()):
        if record.status != "RUNNING":
            continue
        if failure is not None:
            if ledger_writable:
                try:
                    ledger.end(record.trial_id, status="ERROR", stop_reason=StopReason.ERROR.value)
                    continue
                except LedgerWriteError:  # the disk filled after Tune gave up for another reason
                    ledger_writable = False
            record.status, record.stop_reason = "ERROR", StopReason.ERROR.value
        elif was_interrupted:
            # Ctrl-C: Tune's last snapshot holds it as running, and a resume continues it
            # from its last checkpoint. Shown as paused; nothing is written to the log.
            record.status, record.stop_reason = "PAUSED", StopReason.INTERRUPTED.value
        else:
            # Tune finished without it: it started after the last experiment snapshot of a
            # killed driver, so a resume could not see it. What it ran stays charged.
            try:
                reason = ended_by() or StopReason.INTERRUPTED.value
                ledger.end(record.trial_id, status="TERMINATED", stop_reason=reason)
            except LedgerWriteError as exc:
                failure, ledger_writable = str(exc), False
                record.status, record.stop_reason = "TERMINATED", StopReason.INTERRUPTED.value
    try:
        summary = ledger.write_tables(
            out, wall_seconds=wall, output_dir=str(out), best_checkpoint=best_checkpoint(ledger, out)
        )
    except OSError as exc:  # the tables are rebuilt from the ledger by `costtune report`
        if failure is None:
            failure = f"tables: cannot write to {out}: {exc.strerror}; the ledger is kept"
        summary = ledger.summary()
    result = SweepResult(
        output_dir=out, ledger=ledger, summary=summary, wall_seconds=wall, interrupted=was_interrupted
    )
    records = list(ledger.trials.values())
    if failure is None and records and all(r.status == "ERROR" for r in records) and not was_interrupted:
        failure = f"every trial failed ({len(records)} of {len(records)}): {_first_trial_error(out)}"
    full = disk_full(out)
    if full is not None and (failure is not None or any(r.status == "ERROR" for r in records)):
        failure = f"{full}; the sweep stopped, every ledger line written before is kept"
    if failure is not None:
        raise SweepFailed(failure, result)
    return result


def _tune_failure(exc: BaseException, config: SweepConfig) -> str:
    """One line for an error that ended ``Tuner.fit`` (Tune's own is a whole traceback)."""
    text = str(exc)
    if "did not include the specified metric" in text:
        reported = re.search(r"Result: (\{.*\})", text)
        keys: list[str] = []
        if reported is not None:
            with contextlib.suppress(ValueError, SyntaxError):
                keys = [
                    k
                    for k in ast.literal_eval(reported.group(1))
                    if not k.startswith("config/") and k not in RAY_RESULT_FIELDS
                ]
        return (
            f"metric: the trainable's first result has no {config.metric!r} "
            f"(it reported: {', '.join(keys) or 'nothing of its own'}); report it with "
            f"ray.tune.report({{{config.metric!r}: ...}}) or set metric: to one it reports"
        )
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"Ray Tune stopped the sweep: {lines[-1] if lines else type(exc).__name__}"


def _first_trial_error(out: Path) -> str:
    """The first failed trial's error, from Ray's ``error.txt``: the exception and where it rose."""
    files = sorted((out / EXPERIMENT_NAME).glob("*/error.txt"), key=lambda p: p.stat().st_mtime)
    if not files:
        return "no error was recorded"
    lines = [line.rstrip() for line in files[0].read_text(errors="replace").splitlines() if line.strip()]
    error = lines[-1].strip() if lines else "unknown error"
    where = next(
        (m for line in reversed(lines) if (m := re.match(r'\s*File "(.+)", line (\d+), in (\S+)', line))),
        None,
    )
    at = f" at {where.group(1)}:{where.group(2)} in {where.group(3)}" if where else ""
    return f"{error}{at} (details: {files[0]})"


@contextlib.contextmanager
def _watch_interrupts() -> Iterator[Callable[[], bool]]:
    """Whether a SIGINT or a SIGTERM arrived while inside: Tune catches Ctrl-C itself, ends the
    run cleanly and returns as if it had finished. A SIGTERM (``kill``, a job scheduler's
    time limit, ``docker stop``) is handed on as a Ctrl-C, so that it ends the run the same
    way, books and tables written, instead of Ray's handler killing the driver mid-write.
    Python writes every caught signal's number to the wakeup fd, whatever handler Tune
    installed (main thread only; elsewhere: never)."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    previous_term = signal.signal(signal.SIGTERM, _term_as_ctrl_c)
    seen: set[int] = set()

    def interrupted() -> bool:
        with contextlib.suppress(BlockingIOError):
            while chunk := reader.recv(4096):
                seen.update(chunk)
        return bool(seen & {int(signal.SIGINT), int(signal.SIGTERM)})

    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()


def _term_as_ctrl_c(signum: int, frame: Any) -> None:
    os.kill(os.getpid(), signal.SIGINT)


class _RayLogsInOneLine(logging.Filter):
    """Tune's log, with costtune's own lines where it has them: no restore hint for the Python
    API (costtune prints its own), and every error in one line instead of a traceback (a
    failed trial's whole traceback stays in its ``error.txt``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "Tuner.restore(" in message or message.startswith("Trials did not complete"):
            return False
        if message.startswith(("Received additional result for trial", "Received additional completion")):
            # Ray's Optuna searcher on a trial a rung paused and then took up: it was told the
            # trial ended at the rung (as costtune replay's searcher is); its later epochs, and
            # Tune's closing of it, are not the searcher's (one warning per epoch, with the result)
            return False
        text = message
        if record.exc_info and record.exc_info[1] is not None:
            text = f"{message}\n{record.exc_info[1]}"
        if text != message or "Traceback (most recent call last)" in message:
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            head = lines[0].rstrip(":")
            record.msg = head if len(lines) == 1 else f"{head}: {lines[-1]}"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True


@contextlib.contextmanager
def _quiet_ray_logs() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in RAY_LOGGERS]
    one_line = _RayLogsInOneLine()
    for logger in loggers:
        logger.addFilter(one_line)
    try:
        with warnings.catch_warnings():
            # a resumed trial re-runs the epochs after its last checkpoint, and Ray's Optuna
            # searcher reports each again: Optuna keeps the first value and warned once per
            # epoch (the ledger charges both runs; the searcher's value is the same epoch's)
            warnings.filterwarnings("ignore", message=r"The reported value is ignored because this `step=")
            yield
    finally:
        for logger in loggers:
            logger.removeFilter(one_line)


def resume_sweep(
    run_dir: str | Path,
    trainable: Callable[..., Any] | None = None,
    *,
    progress: bool = False,
    ray_address: str | None = None,
) -> SweepResult:
    """Continue an interrupted sweep (driver killed, machine rebooted) where it stopped.

    Trials that finished keep their rows; unfinished ones restart from their last
    checkpoint. The ledger is continued, not rewritten: work lost since a checkpoint was
    charged when it ran and its re-run is charged again, nothing else twice; downtime is
    never charged (costs are metered per epoch). The scheduler's rung state and the
    stopper's budget and curves are rebuilt from ``scheduler_state.json`` and the ledger.

    Args:
        run_dir: the interrupted sweep's directory.
        trainable: the function the sweep ran, where it cannot be imported by the name the
            sweep recorded: one defined in the script that called :func:`run_sweep` (run as
            ``__main__``), a lambda or a nested function. Its name must be the recorded one.
            ``None``: imported by that name (``module:function``, or a built-in trainable).

    Raises:
        ConfigError: nothing to resume, or a ``trainable`` that is not the sweep's (one line;
            the run directory is left as it was).
    """
    from ray import tune

    out = Path(run_dir).resolve()
    experiment = out / EXPERIMENT_NAME
    if not (out / LEDGER_FILE).exists() or not tune.Tuner.can_restore(str(experiment)):
        refuse_unresumable(out)
    del progress  # the live view is restored with the other callbacks
    lock = claim_existing(out)
    try:
        function = _resumed_trainable(out, trainable)  # before anything in the directory changes
        check_intact(out)  # a log cut short or swapped would be written over the tables
        repair_tail(out)  # a driver killed mid-line: cut the fragment before anything appends
        repaired = repair_ray_state(out)  # Tune's own state file, cut by the same kill
        if repaired is not None:
            warnings.warn(LedgerWarning(f"--resume: {repaired}"), stacklevel=2)
        config = load_run_config(out, for_resume=True)
        check_scheduler_state(config, out / SCHEDULER_STATE)
        check_searcher_record(config, out / SOURCE_FILE)
        unreadable = Ledger(ledger_spec(config), out).unreadable_lines
        if unreadable:
            warnings.warn(
                LedgerWarning(f"--resume: {unreadable} unreadable ledger line(s) skipped"), stacklevel=2
            )
        return _resume(out, experiment, ray_address, function)
    finally:
        lock.release()


def _resumed_trainable(out: Path, trainable: Callable[..., Any] | None) -> Callable[..., Any]:
    """The function a resumed sweep runs: ``trainable`` when given (it must bear the name the
    sweep recorded), else the recorded ``module:function`` imported again."""
    config = load_run_config(out, for_resume=True)
    if trainable is None:
        config_dir = read_source_record(out / SOURCE_FILE).get("config_dir")
        if config_dir is not None and not isinstance(config_dir, str):
            raise ConfigError(f"{SOURCE_FILE}: config_dir must be a path, got {config_dir!r}")
        return resolve_trainable(config.trainable.name, Path(config_dir) if config_dir else None)
    check_trainable(trainable, "resume_sweep: trainable")
    recorded = config.trainable.name
    name = _function_attr(trainable)
    if recorded in BUILTIN_TRAINABLES or name != recorded.rpartition(":")[2]:
        raise ConfigError(
            f"resume_sweep: trainable: the sweep ran {recorded!r}, got a function named {name!r}; "
            "pass the function the sweep ran"
        )
    _ship_by_value(trainable)
    return trainable


def _function_attr(function: Callable[..., Any]) -> str:
    """The name a function is recorded under in ``trainable.name`` (``module:<this>``)."""
    return re.sub(r"\W", "_", str(getattr(function, "__name__", "trainable"))).strip("_") or "trainable"


def check_scheduler_state(config: SweepConfig, path: Path) -> None:
    """Refuse a resume whose ``config.yaml`` no longer describes the scheduler that ran.

    Tune restores the scheduler as it was pickled; the books (the ledger's spec) come from
    ``config.yaml``. Edited, the two would disagree silently: the rungs of one geometry, the
    savings counted against another. A damaged state file is named, in one line.
    """
    if config.scheduler.type != "cost_aware_hyperband" or not path.exists():
        return
    from costtune.ray.hyperband import read_state

    now = hyperband_of(config).policy.geometry()  # the scheduler this config builds
    saved = read_state(path)["policy"].get("geometry")
    if saved is None:
        return
    saved = plain_geometry(saved)
    # a geometry names escalate and rung_checks only when on (a state saved before they existed
    # has neither)
    now, saved = (
        {
            **now,
            "escalate": bool(now.get("escalate")),
            "rung_checks": int(now.get("rung_checks", 0)),
            "hedge": bool(now.get("hedge")),
            "hedge_judges": now.get("hedge_judges", "full_runs"),
        },
        {
            **saved,
            "escalate": bool(saved.get("escalate")),
            "rung_checks": int(saved.get("rung_checks", 0)),
            "hedge": bool(saved.get("hedge")),
            "hedge_judges": saved.get("hedge_judges", "full_runs"),
        },
    )
    if not now["hedge"] and not saved["hedge"]:  # whose losses judge the hedge: moot without one
        now.pop("hedge_judges")
        saved.pop("hedge_judges")
    if saved == now:
        return
    differ = [k for k in [*now, *(k for k in saved if k not in now)] if saved.get(k) != now.get(k)]
    names = {k: k if k == "max_epochs" else f"scheduler.{k}" for k in [*now, *saved]}
    first = differ[0]
    if first in REMOVED_FIELDS["scheduler"]:
        raise ConfigError(
            f"scheduler state: the sweep ran with scheduler.{first} {saved.get(first)!r}, an option this "
            "version of costtune no longer has; finish the sweep with the version that started it"
        )
    raise ConfigError(
        f"config.yaml: {names[first]} is {now.get(first)!r}, but the sweep ran with {saved.get(first)!r} "
        f"(also differ: {', '.join(names[k] for k in differ[1:]) or 'nothing else'}); a resumed sweep "
        "keeps the scheduler it ran with: restore config.yaml"
    )


def read_source_record(path: Path) -> dict[str, Any]:
    """A run's ``source.json`` (``{}`` where there is none: a run older than the record); one cut
    by a crash or edited by hand is named in one line."""
    try:
        record = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError as exc:
        record = exc
    if not isinstance(record, dict):
        kind = record.__class__.__name__
        raise ConfigError(
            f"{path.name}: not the record this sweep wrote ({kind}); restore it from a copy of the "
            "run, or delete it to resume without the searcher check (a module:function trainable is "
            "then looked up from the working directory)"
        )
    return record


def check_searcher_record(config: SweepConfig, path: Path) -> None:
    """Refuse a resume whose ``config.yaml`` no longer describes the searcher that ran.

    Tune restores the searcher as it was pickled (its sampler, its settings), so an edited
    ``searcher:`` section would be ignored silently while config.yaml, and the reports that
    print it, say otherwise. A run recorded before the searcher was (no ``searcher`` in its
    ``source.json``) is not checked; a field the record lacks is not compared."""
    saved = read_source_record(path).get("searcher")
    if not isinstance(saved, dict):
        return
    now = config.searcher.model_dump(mode="json")
    differ = [k for k in now if k in saved and saved[k] != now[k]]
    if not differ:
        return
    first = differ[0]
    raise ConfigError(
        f"config.yaml: searcher.{first} is {now[first]!r}, but the sweep ran with {saved[first]!r} "
        f"(also differ: {', '.join('searcher.' + k for k in differ[1:]) or 'nothing else'}); a resumed "
        "sweep keeps the searcher it ran with: restore config.yaml"
    )


def _resume(
    out: Path, experiment: Path, ray_address: str | None, trainable: Callable[..., Any]
) -> SweepResult:
    from ray import tune

    config = load_run_config(out)
    _prepare_environment()
    _ensure_ray(ray_address, config)
    resources = trial_resources(config)
    from costtune.ray.governed import forget_governors

    forget_governors()  # the governor copies this restore unpickles meet on a fresh one
    ledger = Ledger(ledger_spec(config), out).share()
    known = tune_known_trials(out)
    # Tune's trials, and those that ran and ended after its last snapshot (judged and paid)
    created = (
        0
        if known is None
        else len(known)
        + sum(
            r.status != "RUNNING" and r.stop_reason != StopReason.INTERRUPTED.value and t not in known
            for t, r in ledger.trials.items()
        )
    )
    # a copied or moved run writes only into itself
    with relocating(out), storage_rebased(out, EXPERIMENT_NAME), trials_created_at_least(created):
        try:
            tuner = tune.Tuner.restore(
                str(experiment),
                trainable=tune.with_resources(trainable, resources),
                resume_unfinished=True,
                resume_errored=False,
            )
        except ModuleNotFoundError as exc:  # saved objects of a costtune laid out otherwise
            if not (exc.name or "").startswith("costtune"):
                raise
            raise ConfigError(
                f"--resume: {out} was saved by an earlier costtune ({exc.name} no longer exists); "
                "its results and reports still read, but the sweep cannot continue: start a new one"
            ) from None
        return _fit_and_write(tuner, config, ledger, out)


def pre_run_gate(config: SweepConfig) -> GateResult:
    """The gate every sweep passes first; without an epoch time only the structural rules apply."""
    known = estimate(config) if config.cost.epoch_seconds is not None else None
    return check(config, known)


def _governance(config: SweepConfig, ledger: Ledger) -> tuple[Governor, Any]:
    """The caps/budget governor and the Stopper that applies it with the stopping rules."""
    from costtune.ray import CostStopper

    gpus, cpus = config.resources.gpus, config.resources.cpus
    kind, devices = ("gpu", gpus) if gpus > 0 else ("cpu", cpus)
    price = config.cost.cost_model().usd_per_device_hour(kind)
    s = config.scheduler
    governor = Governor(
        usd_per_second=devices * price / 3600,
        max_hours_per_trial=config.budget.max_hours_per_trial,
        max_cost_usd_per_trial=config.budget.max_cost_usd_per_trial,
        budget=SweepBudget(config.budget.max_cost_usd),
        first_rung_epochs=min(s.grace_epochs, config.max_epochs)
        if s.type == "cost_aware_hyperband"
        else config.max_epochs,
    )
    from costtune.ray.governed import forget_governors, shared_governor

    forget_governors()
    shared_governor(governor)  # a copy Tune unpickles in this process meets this one
    st = config.stopping
    rule = StoppingRule(
        patience_epochs=st.patience_epochs,
        min_marginal_roi=st.min_marginal_roi,
        max_epochs=config.max_epochs,
    )
    stopper = CostStopper(
        governor,
        metric=config.metric,
        mode=config.mode,
        devices=devices,
        stopping=MarginalRoiStopping(rule, config.cost.business_value_usd) if rule.active else None,
        sweep_progress=SweepProgress(st.sweep_min_improvement_per_usd)
        if st.sweep_min_improvement_per_usd is not None
        else None,
        seconds_field=config.cost.time_field,
        ledger=ledger,
    )
    return governor, stopper


def _idle_stopper(
    config: SweepConfig, factory: Callable[[], GpuSampler] | None, governor: Governor
) -> IdleGpuStopper | None:
    idle = config.idle
    if idle.enabled is False or (idle.enabled == "auto" and config.resources.gpus == 0):
        return None
    if factory is None:
        try:
            NvmlSampler().close()  # fail here, before anything starts, not inside Tune
        except NvmlUnavailable as exc:
            if idle.enabled is True:
                raise ConfigError(f"idle.enabled: {exc}") from None
            print(f"costtune: idle-GPU watchdog off: {exc}", file=sys.stderr)
            return None
        factory = NvmlSampler
    return IdleGpuStopper(factory, idle.util_below_pct, idle.idle_minutes, governor)


def _prepare_environment() -> None:
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # the legacy reporter honours verbose=0
    # A checkpoint every epoch with num_to_keep forces frequent experiment snapshots; the
    # snapshots are what lets a killed sweep resume, so keep them and skip the warning.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # Snapshot the experiment state often: after a SIGKILL, Tune resumes from the last one.
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "2")
    # a failed trial is reported once, by Tune and the ledger; not again by Ray's object store
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")


def _ensure_ray(address: str | None, config: SweepConfig) -> None:
    import ray

    if not ray.is_initialized():
        _start_ray(address)
    problem = unfit_request(trial_resources(config), ray.cluster_resources())
    if problem is not None:
        raise ConfigError(problem)


def unfit_request(request: dict[str, float], cluster: dict[str, float]) -> str | None:
    """Why a trial asking for ``request`` can never run on a cluster of ``cluster`` in all
    (Ray's resource names), or None. Without this, Tune waits forever ("No trial is running")."""
    names = {"cpu": ("CPU", "resources.cpus"), "gpu": ("GPU", "resources.gpus")}
    for key, amount in request.items():
        if amount <= 0:
            continue
        ray_name, field = names.get(key, (key, "resources.accelerator_type"))
        have = float(cluster.get(ray_name, 0.0))
        if amount > have:
            what = ray_name.removeprefix("accelerator_type:")
            if key not in names:
                return f"{field}: no node of the Ray cluster has {what} accelerators"
            return (
                f"{field}: each trial asks for {amount:g} {ray_name}, the Ray cluster has {have:g} "
                "in all; no trial could ever start"
            )
    return None


def _start_ray(address: str | None) -> None:
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    if address is not None:
        ray.init(address=address, logging_level="WARNING", log_to_driver=False)
    else:
        ray.init(
            include_dashboard=False,
            dashboard_host="127.0.0.1",
            logging_level="WARNING",
            log_to_driver=False,
            configure_logging=True,
        )
