"""The sweep config: one YAML file, validated up front, one clear error per bad field.

Every model forbids unknown keys (a typo is an error, not a silent default) and every
error names its YAML path: ``scheduler.eta: must be an integer >= 2, got 1``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import reprlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from costtune.core.cost import CostModel, canonical_device, is_known_device
from costtune.core.policy.defaults import DEFAULTS
from costtune.errors import ConfigError


def _shipped(installed: str, in_repository: str) -> Path:
    """A data folder of the package: inside it when installed from a wheel, at the top of the
    repository in a checkout (pyproject.toml maps one onto the other)."""
    package = Path(__file__).resolve().parents[1]  # costtune/, above core/
    inside = package / installed
    return inside if inside.is_dir() else package.parent / in_repository


#: Where ``search_space: NAME.yaml`` is also looked up: the library shipped with costtune.
SEARCH_SPACE_LIBRARY = _shipped("search_spaces", "search_spaces")
#: The ready sweep configs (``costtune sweep --example NAME``); ``digits`` is the embedded default.
EXAMPLES_DIR = _shipped("examples", "experiments")


def example_config(name: str) -> Path:
    """The shipped example ``name`` (``digits``, ``digits_long``); one line if there is none."""
    path = EXAMPLES_DIR / f"{name}.yaml"
    if not re.fullmatch(r"[A-Za-z0-9_-]+", name) or not path.is_file():
        known = ", ".join(sorted(p.stem for p in EXAMPLES_DIR.glob("*.yaml")))
        raise ConfigError(f"--example: no example {name!r}; the shipped ones are {known}")
    return path


#: what the built-in ``amp`` trainable reads, from ``trainable.args`` or ``search_space``:
#: names with a fixed set of values, then plain numbers and flags (costtune/trainables/amp.py)
AMP_CHOICES: dict[str, tuple[str, ...]] = {
    "model": ("mlp", "cnn", "transformer"),
    "precision": ("fp32", "bf16", "fp16"),
    "optimizer": ("adamw", "sgd"),
    "dataset": ("digits", "breast_cancer"),
}
#: ``activation_checkpointing``'s values (case aside), as the amp trainable reads them. A
#: selective form (keep the matrix products, recompute the rest) was measured and dropped:
#: slower and larger than full checkpointing in eager PyTorch (benchmarks/ARCHIVE.md, "GPU")
CHECKPOINTING_MODES: dict[str, bool] = {"false": False, "off": False, "true": True, "on": True}
AMP_OTHER = (
    "batch_size",
    "accumulation_steps",
    "activation_checkpointing",
    "lr",
    "weight_decay",
    "momentum",
    "width",
    "depth",
    "dropout",
    "heads",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """``max_epochs: true`` is refused, not read as 1 (pydantic takes a bool for an int)."""
        if isinstance(value, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            if _takes_number(annotation) and not _takes(annotation, bool):
                raise ValueError(f"must be a number, got {str(value).lower()}")
        return value


def _takes(annotation: Any, kind: type) -> bool:
    return annotation is kind or any(_takes(a, kind) for a in get_args(annotation))


def _takes_number(annotation: Any) -> bool:
    return _takes(annotation, int) or _takes(annotation, float)


class TrainableConfig(_Strict):
    name: str = Field("amp", description="'amp' or 'replay' (built-in), or 'module:function'")
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _reference(cls, v: str) -> str:
        if v not in ("amp", "replay") and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", v):
            raise ValueError(f"must be 'amp', 'replay' or a 'module:function' reference, got {v!r}")
        return v


class ParamSpec(_Strict):
    """One hyperparameter's distribution."""

    type: Literal["uniform", "loguniform", "int", "logint", "choice"]
    low: float | None = None
    high: float | None = None
    values: list[Any] | None = None
    grid: bool = Field(
        False,
        description="with choice: every value runs, crossed with the other grid values, num_samples "
        "times (Ray Tune's tune.grid_search); needs searcher.type random",
    )

    @model_validator(mode="after")
    def _bounds(self) -> ParamSpec:
        if self.grid and self.type != "choice":
            raise ValueError(f"grid: only a choice runs every value, got type {self.type}")
        if self.type == "choice":
            if not self.values:
                raise ValueError("choice needs a non-empty 'values' list")
            if self.low is not None or self.high is not None:
                raise ValueError("choice takes 'values', not 'low'/'high'")
            return self
        if self.values is not None:
            raise ValueError(f"{self.type} takes 'low' and 'high', not 'values'")
        if self.low is None or self.high is None:
            raise ValueError(f"{self.type} needs both 'low' and 'high'")
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low >= self.high:
            raise ValueError(f"needs finite low < high, got low={self.low}, high={self.high}")
        if self.type.startswith("log") and self.low <= 0:
            raise ValueError(f"{self.type} needs low > 0, got {self.low}")
        if self.type in ("int", "logint") and (self.low != int(self.low) or self.high != int(self.high)):
            raise ValueError(f"{self.type} needs integer bounds, got {self.low}, {self.high}")
        return self


#: options earlier versions had, by section, each with the value it held unless a user set it.
#: Each was dropped because it did not earn its place on every family of curves
#: (benchmarks/RESULTS.md) or was a faster copy of Optuna's sampler. A config holding that
#: value still reads (a saved run holds every field); a new config setting anything else is
#: refused in one line (:func:`drop_removed`).
REMOVED_FIELDS: dict[str, dict[str, Any]] = {
    "searcher": {
        "value_transform": "clip",
        "fast_ask_from": 200,
        "over_epochs": False,
        "cost_exponent": 0.0,
        "model_check": 0.4,
    },
    "scheduler": {
        "promotion": "loss",
        "keep": "floor",
        "lookahead": None,
        "warmup_trials": None,
        "escalate": False,
        "hedge": False,
        "hedge_judges": "every_bracket",
        "rung_checks": 0,
        "resample_probability": 0.25,
        "pbt_key": "loss",
    },
    "stopping": {
        "min_delta": 0.0,
        "min_slope_per_device_hour": None,
        "min_relative_roi": None,
        "spare_best": True,
        "expected_gain": False,
        "noise_aware": True,
        "window_epochs": 5,
        "min_epochs": 5,
        "sweep_window_epochs": 50,
        "outlook": None,
    },
}


def drop_removed(raw: dict[str, Any], saved: bool = False) -> tuple[dict[str, Any], list[str]]:
    """``raw`` without the options of :data:`REMOVED_FIELDS`, and the names of those it set to
    something other than the value they held by default.

    A new config (``saved`` False) setting one is refused in one line naming it; a saved run's
    (``saved``) is read all the same, for its reports, and the names are returned."""
    out = dict(raw)
    changed: list[str] = []
    for section, removed in REMOVED_FIELDS.items():
        given = out.get(section)
        if not isinstance(given, dict) or not set(given) & set(removed):
            continue
        kept = dict(given)
        for name, old in removed.items():
            if name not in kept:
                continue
            value = kept.pop(name)
            if value == old:
                continue
            if not saved:
                why = (
                    "the gp searcher is Optuna's GPSampler with its own defaults"
                    if section == "searcher"
                    else "it did not earn its place on every family of curves (benchmarks/RESULTS.md)"
                )
                raise ConfigError(f"{section}.{name}: removed; {why}; got {short_repr(value)}")
            changed.append(f"{section}.{name}")
        out[section] = kept
    return out, changed


class SearcherConfig(_Strict):
    type: Literal["gp", "optuna", "hyperopt", "random", "grid"] = Field(
        DEFAULTS.searcher,  # type: ignore[arg-type]
        description="optuna: Optuna's univariate TPE (the default); gp: Optuna's Gaussian process, "
        "outlying losses clipped; hyperopt: HyperOpt's TPE; random; grid: every combination of choice values",
    )
    n_startup_trials: int | None = Field(
        None,
        ge=1,
        description="random trials before the model is used (by default gp 5, optuna 10, hyperopt 20)",
    )
    points_to_evaluate: list[dict[str, Any]] = Field(
        default_factory=list,
        description="configurations tried first, in this order, before anything is sampled (known-good "
        "settings, last sweep's best); each gives every search_space name; they count toward num_samples",
    )


class SchedulerConfig(_Strict):
    """The scheduler. Its defaults are :data:`costtune.core.policy.defaults.DEFAULTS`: Optuna's
    successive halving, decision for decision, and at the end the trials a rung stopped that make
    its cut as it stands."""

    type: Literal["cost_aware_hyperband", "pbt", "fifo"] = "cost_aware_hyperband"
    grace_epochs: int = Field(
        DEFAULTS.grace_epochs,
        ge=1,
        description="epochs: the first rung, where every trial is first judged; by default 5, or "
        "max_epochs when that is fewer",
    )
    eta: int = Field(DEFAULTS.eta, ge=2, description="η: the best 1/η of a rung go on to η times the epochs")
    brackets: int | None = Field(
        DEFAULTS.brackets, ge=1, description="Hyperband brackets; null: all that fit"
    )
    # population-based training
    perturbation_interval: int = Field(5, ge=1)
    quantile_fraction: float = Field(0.2, gt=0, le=0.5)


class CostConfig(_Strict):
    accelerator: str = Field(
        "A100",
        description="GPU type a trial is billed as when nothing says where it ran "
        "(default: resources.accelerator_type when set, else A100)",
    )
    capacity: Literal["on_demand", "spot"] = Field("on_demand", description="which price column is paid")
    prices: dict[str, float | dict[str, float]] = Field(
        default_factory=dict,
        description="USD per device-hour by type: a number, or {on_demand: x, spot: y}; "
        "a cost.price_file is merged in below these",
    )
    business_value_usd: float = Field(1.0, ge=0, allow_inf_nan=False)
    baseline_metric: float | None = Field(None, allow_inf_nan=False)
    time_field: str = "time_total_s"
    epoch_seconds: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="seconds per epoch, for the pre-run estimate"
    )
    startup_seconds: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="metered seconds a fresh worker spends before its first epoch",
    )

    def cost_model(self) -> CostModel:
        return CostModel(accelerator=self.accelerator, prices=self.prices, capacity=self.capacity)


class ResourcesConfig(_Strict):
    cpus: float = Field(1.0, gt=0, le=10_000, allow_inf_nan=False)
    gpus: float = Field(0.0, ge=0, le=1_000, allow_inf_nan=False)
    accelerator_type: str | None = Field(
        None, description="schedule only on nodes with this GPU type (Ray's accelerator_type:<T>)"
    )


class FailureConfig(_Strict):
    max_retries: int = Field(
        0, ge=0, le=100, description="restarts of a failed trial from its last checkpoint"
    )


class BudgetConfig(_Strict):
    """Spending limits. Per-trial defaults follow our policy: 48 hours and $300 per task."""

    max_cost_usd: float | None = Field(None, gt=0, allow_inf_nan=False, description="whole sweep")
    max_cost_usd_per_trial: float = Field(300.0, gt=0, allow_inf_nan=False)
    max_hours_per_trial: float = Field(48.0, gt=0, allow_inf_nan=False)
    max_wall_seconds: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="wall-clock seconds the sweep may run (Ray Tune's time_budget_s): then running "
        "trials stop at their next report and none starts; null: no limit",
    )


class StoppingConfig(_Strict):
    """Stop trials (and the sweep) where money stops buying quality. Every rule is off unless
    set; a rule judges a trial from its 5th epoch, on a window of its last 5."""

    patience_epochs: int | None = Field(None, ge=1)
    min_marginal_roi: float | None = Field(None, ge=0, allow_inf_nan=False)
    sweep_min_improvement_per_usd: float | None = Field(None, ge=0, allow_inf_nan=False)


class MlflowConfig(_Strict):
    tracking_uri: str | None = Field(None, description="default: a local store under the run directory")
    experiment: str | None = Field(None, description="default: the sweep's name")


class TrackingConfig(_Strict):
    mlflow: MlflowConfig | None = None


class IdleConfig(_Strict):
    """End GPU trials whose GPUs stay below ``util_below_pct`` for ``idle_minutes``.

    ``enabled: auto`` watches whenever trials hold GPUs and NVML is available.
    """

    enabled: bool | Literal["auto"] = "auto"
    util_below_pct: float = Field(1.0, gt=0, le=100, allow_inf_nan=False)
    idle_minutes: float = Field(120.0, gt=0, allow_inf_nan=False)


class ApprovalConfig(_Strict):
    """What a grid search, or a sweep over the limits, must state before it may run."""

    justification: str = Field(min_length=3, description="why this many samples")
    estimated_resources: str = Field(min_length=1)
    stop_conditions: str = Field(min_length=1)
    approver: str = Field(min_length=1)


class SweepConfig(_Strict):
    """A whole sweep. See ``experiments/digits.yaml`` for an annotated example."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=100)
    trainable: TrainableConfig = TrainableConfig()
    metric: str = "val_loss"
    mode: Literal["min", "max"] = "min"
    max_epochs: int = Field(ge=1, le=1_000_000)
    num_samples: int = Field(ge=1, le=1_000_000)
    max_concurrent_trials: int | None = Field(None, ge=1)
    seed: int = Field(0, ge=0, lt=2**32)
    search_space: dict[str, ParamSpec] = Field(min_length=1)
    searcher: SearcherConfig = SearcherConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    cost: CostConfig = CostConfig()
    resources: ResourcesConfig = ResourcesConfig()
    budget: BudgetConfig = BudgetConfig()
    stopping: StoppingConfig = StoppingConfig()
    idle: IdleConfig = IdleConfig()
    failures: FailureConfig = FailureConfig()
    tracking: TrackingConfig = TrackingConfig()
    approval: ApprovalConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _billed_as_it_runs(cls, raw: Any) -> Any:
        """Trials pinned to a GPU type (``resources.accelerator_type``) are billed as that
        type unless ``cost.accelerator`` says otherwise (which ``_consistent`` refuses)."""
        if not isinstance(raw, dict):
            return raw
        resources, cost = raw.get("resources"), raw.get("cost")
        wanted = resources.get("accelerator_type") if isinstance(resources, dict) else None
        unset = cost is None or (isinstance(cost, dict) and "accelerator" not in cost)
        if isinstance(wanted, str) and unset:
            return {**raw, "cost": {**(cost or {}), "accelerator": canonical_device(wanted)}}
        return raw

    @model_validator(mode="before")
    @classmethod
    def _grace_fits(cls, raw: Any) -> Any:
        """A sweep of fewer epochs than the default first rung (5) judges its trials first at
        its last epoch, where no rung can prune, rather than refusing a field the user never set."""
        if not isinstance(raw, dict):
            return raw
        epochs, scheduler = raw.get("max_epochs"), raw.get("scheduler", {})
        if not isinstance(epochs, int) or isinstance(epochs, bool) or not 1 <= epochs < DEFAULTS.grace_epochs:
            return raw
        if not isinstance(scheduler, dict) or "grace_epochs" in scheduler:
            return raw  # a set first rung (or a malformed scheduler) is checked as given
        return {**raw, "scheduler": {**scheduler, "grace_epochs": epochs}}

    @model_validator(mode="after")
    def _consistent(self) -> SweepConfig:
        if self.scheduler.type == "cost_aware_hyperband" and self.scheduler.grace_epochs > self.max_epochs:
            raise ValueError(
                f"scheduler.grace_epochs: must be <= max_epochs ({self.max_epochs}), "
                f"got {self.scheduler.grace_epochs}"
            )
        if self.scheduler.type == "pbt" and self.searcher.type != "random":
            raise ValueError(
                "searcher.type: pbt samples its initial population at random and explores from "
                f"there; use searcher.type random (got {self.searcher.type})"
            )
        clash = sorted(set(self.search_space) & set(self.trainable.args))
        if clash:
            raise ValueError(f"search_space.{clash[0]}: also fixed in trainable.args; keep one")
        if self.trainable.name == "amp":
            _check_amp_args(self.trainable.args, self.search_space)
        _check_points(self.searcher, self.search_space, self.num_samples)
        grid_axes = [name for name, spec in self.search_space.items() if spec.grid]
        if grid_axes and self.searcher.type not in ("random", "grid"):
            raise ValueError(
                f"search_space.{grid_axes[0]}: a grid value list (tune.grid_search) runs every value, "
                f"which searcher {self.searcher.type!r} cannot; use searcher.type random (Ray Tune's own "
                "searcher), or a plain choice to let the searcher pick"
            )
        nested = [name for name in self.search_space if "/" in name]
        if nested and self.scheduler.type == "pbt":
            raise ValueError(f"search_space.{nested[0]}: pbt explores top-level hyperparameters only")
        if self.searcher.type == "grid":
            for name, spec in self.search_space.items():
                if spec.type != "choice":
                    raise ValueError(
                        f"search_space.{name}: grid search needs type 'choice' (a list of values), "
                        f"got {spec.type}"
                    )
        wanted = self.resources.accelerator_type
        if wanted is not None and canonical_device(self.cost.accelerator) != canonical_device(wanted):
            raise ValueError(
                f"cost.accelerator: {self.cost.accelerator!r}, but resources.accelerator_type runs "
                f"every trial on {wanted!r}; drop cost.accelerator (trials are billed as {wanted})"
            )
        self.cost.cost_model()  # prices and accelerator are checked here, naming the field
        return self


def check_price_names(raw: Mapping[str, Any]) -> None:
    """A config's own ``cost.prices`` name types a trial can be billed as: the price table's, a
    Ray accelerator label, or the sweep's ``cost.accelerator`` / ``resources.accelerator_type``.
    A typo would otherwise be kept silently and never paid. (A shared ``cost.price_file`` may
    price every type an organisation uses, so it is not checked this way; nor is a run's saved
    config, which carries that file's prices.)"""
    cost, resources = raw.get("cost"), raw.get("resources")
    prices = cost.get("prices") if isinstance(cost, Mapping) else None
    if not isinstance(prices, Mapping):
        return
    named = [
        section.get(key)
        for section, key in ((cost, "accelerator"), (resources, "accelerator_type"))
        if isinstance(section, Mapping)
    ]
    billable = {canonical_device(n) for n in named if isinstance(n, str)}
    for name in prices:
        if isinstance(name, str) and canonical_device(name) not in billable and not is_known_device(name):
            raise ConfigError(
                f"cost.prices.{name}: no trial can be billed as {name!r}: not a type of the price "
                "table or a Ray accelerator label; name it in cost.accelerator or "
                "resources.accelerator_type to bill trials as it"
            )


def _check_points(searcher: SearcherConfig, space: dict[str, ParamSpec], num_samples: int) -> None:
    """``searcher.points_to_evaluate``: each a full point of the search space, in its bounds."""
    points = searcher.points_to_evaluate
    if not points:
        return
    if searcher.type == "grid":
        raise ValueError("searcher.points_to_evaluate: a grid search runs its grid; use a sampling searcher")
    if len(points) > num_samples:
        raise ValueError(
            f"searcher.points_to_evaluate: {len(points)} points, but num_samples is {num_samples} "
            "(the points count toward it)"
        )
    for i, point in enumerate(points):
        where = f"searcher.points_to_evaluate[{i}]"
        unknown = sorted(set(point) - set(space))
        if unknown:
            raise ValueError(f"{where}.{unknown[0]}: not in search_space ({', '.join(space)})")
        missing = [name for name in space if name not in point]
        if missing:
            raise ValueError(f"{where}: gives no {missing[0]!r}; a point gives every search_space name")
        for name, spec in space.items():
            value = point[name]
            if spec.type == "choice":
                if value not in (spec.values or []):
                    raise ValueError(f"{where}.{name}: must be one of {spec.values}, got {value!r}")
                continue
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or not spec.low <= value <= spec.high:
                hint = " (YAML 1.1 reads 1e-3 as text: write 1.0e-3)" if isinstance(value, str) else ""
                raise ValueError(
                    f"{where}.{name}: must be a number in [{spec.low}, {spec.high}], got {value!r}{hint}"
                )
            if spec.type in ("int", "logint") and value != int(value):
                raise ValueError(f"{where}.{name}: must be an integer, got {value!r}")


def _check_amp_args(args: dict[str, Any], space: dict[str, ParamSpec]) -> None:
    """The built-in trainable's settings, checked before anything starts: a name it never
    reads, or a value it cannot use, would otherwise fail (or be ignored by) every trial."""
    known = (*AMP_CHOICES, *AMP_OTHER)
    for where, names in (("trainable.args", list(args)), ("search_space", list(space))):
        for name in names:
            if name not in known:
                raise ValueError(
                    f"{where}.{name}: the amp trainable does not read {name!r}; it reads {', '.join(known)}"
                )
    for name, choices in AMP_CHOICES.items():
        values = [args[name]] if name in args else list(space[name].values or []) if name in space else []
        for value in values:
            if value not in choices:
                field = "trainable.args" if name in args else "search_space"
                raise ValueError(f"{field}.{name}: must be one of {', '.join(choices)}, got {value!r}")
    name = "activation_checkpointing"
    values = [args[name]] if name in args else list(space[name].values or []) if name in space else []
    for value in values:
        if str(value).strip().lower() not in CHECKPOINTING_MODES:
            field = "trainable.args" if name in args else "search_space"
            raise ValueError(f"{field}.{name}: must be true or false, got {value!r}")


def grid_size(config: SweepConfig) -> int:
    """Trials a grid search runs: the product of the value lists, times num_samples."""
    size = config.num_samples
    for spec in config.search_space.values():
        size *= len(spec.values or [])
    return size


def planned_trials(config: SweepConfig) -> int:
    """Trials the sweep starts: ``num_samples`` times each combination of its grid values."""
    if config.searcher.type == "grid":
        return grid_size(config)
    size = config.num_samples
    for spec in config.search_space.values():
        size *= len(spec.values or []) if spec.grid else 1
    return size


def param_value(config: Mapping[str, Any], name: str) -> Any:
    """A hyperparameter's value in a trial's config; ``a/b`` names ``config["a"]["b"]`` (a nested
    search space, flattened as Ray Tune flattens it)."""
    if name in config or "/" not in name:
        return config.get(name)
    value: Any = config
    for part in name.split("/"):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a/b": x}`` as ``{"a": {"b": x}}``: the shape a nested search space had."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        *parents, leaf = name.split("/")
        node = out
        for part in parents:
            child = node.get(part)
            node[part] = child = dict(child) if isinstance(child, Mapping) else {}  # never the caller's
            node = child
        node[leaf] = value
    return out


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping: plain YAML keeps the last
    and silently drops the first (a second ``stopping:`` block would replace the first whole)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(f"config: key {key!r} given twice (lines {seen[key]} and {line}); keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


#: limits on a YAML document, checked on its event stream before anything is built from it:
#: a config is a few kilobytes, and these leave room for generated ones
YAML_MAX_BYTES = 1 << 20
YAML_MAX_DEPTH = 64
YAML_MAX_VALUES = 100_000  # scalars and collections, each alias counted as what it expands to
YAML_MAX_NUMBER_CHARS = 100


def read_yaml(text: str, where: str) -> Any:
    """A YAML document read within bounded time and memory, or one :class:`ConfigError` line
    naming ``where`` (a file, a field) and never quoting its contents.

    Refused before building anything: more than 1 MiB, nesting deeper than 64, more than
    100,000 values once aliases are expanded (an "anchor bomb" that a validator would walk
    whole), and a plain number longer than 100 characters (Python refuses to read an
    integer of more than 4,300 digits); then read with a safe loader that refuses a key given
    twice in one mapping.
    """
    if len(text) > YAML_MAX_BYTES:
        raise ConfigError(f"{where}: {len(text):,} characters; at most {YAML_MAX_BYTES:,} are read")
    sizes: dict[str, int] = {}  # each anchor: how many values it stands for
    open_: list[tuple[str | None, int]] = []  # (anchor, values so far) of each open collection
    total = 0

    def add(n: int) -> None:
        nonlocal total
        total += n
        if total > YAML_MAX_VALUES:
            raise ConfigError(
                f"{where}: expands to more than {YAML_MAX_VALUES:,} values (aliases counted whole); refused"
            )
        if open_:
            anchor, count = open_[-1]
            open_[-1] = (anchor, count + n)

    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            line = event.start_mark.line + 1 if event.start_mark is not None else 0
            if isinstance(event, yaml.CollectionStartEvent):
                if len(open_) >= YAML_MAX_DEPTH:
                    raise ConfigError(f"{where}: nested deeper than {YAML_MAX_DEPTH} levels at line {line}")
                open_.append((event.anchor, 1))
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, count = open_.pop()
                if anchor is not None:
                    sizes[anchor] = count
                add(count)
            elif isinstance(event, yaml.ScalarEvent):
                value = event.value
                if (
                    event.style is None
                    and len(value) > YAML_MAX_NUMBER_CHARS
                    and value[:2].lstrip("+-")[:1].isdigit()
                ):
                    raise ConfigError(
                        f"{where}: line {line}: a number of {len(value):,} characters; "
                        f"at most {YAML_MAX_NUMBER_CHARS} are read"
                    )
                if event.anchor is not None:
                    sizes[event.anchor] = 1
                add(1)
            elif isinstance(event, yaml.AliasEvent):
                add(sizes.get(event.anchor or "", 1))
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{where} is not valid YAML{at}") from None
    except (ValueError, RecursionError):  # what the bounds above leave to a loader
        raise ConfigError(f"{where}: a value YAML cannot read (a number too long?)") from None


def load_config(
    path: str | Path, overrides: dict[str, Any] | None = None, allow_paths: Sequence[str | Path] = ()
) -> SweepConfig:
    """Read and validate a sweep config; raise :class:`ConfigError` with a one-line message.

    A ``search_space: FILE`` is read only from under the config's folder, the search-space
    library, or an ``allow_paths`` folder: a config reviewed in CI must not read (and echo)
    files elsewhere. Errors in a search space read from a file never quote its values.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config: no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config: cannot read {path}: {exc}") from None
    raw = read_yaml(text, f"config: {path}")
    if not isinstance(raw, dict):
        raise ConfigError(f"config: {path} must be a YAML mapping of keys, got {type(raw).__name__}")
    check_price_names(raw)
    redact: tuple[str, ...] = ()
    if isinstance(raw.get("cost"), dict) and "price_file" in raw["cost"]:
        redact = ("cost.prices",)
    raw = inline_price_file(raw, path.parent, allow_paths)
    if isinstance(raw.get("search_space"), str):
        raw["search_space"] = _load_search_space(raw["search_space"], path.parent, allow_paths)
        redact = (*redact, "search_space")
    return parse_config({**raw, **(overrides or {})}, redact=redact)


def parse_config(raw: dict[str, Any], redact: Sequence[str] = (), saved: bool = False) -> SweepConfig:
    """Validate an already-parsed config mapping (the Python API's entry point).

    ``redact``: fields (``search_space``, ``cost.prices``) whose offending values an error
    must not quote: they came from a file. ``saved``: a run's own config.yaml, read for its
    reports: options this version no longer has are dropped (:func:`drop_removed`).
    """
    raw, _ = drop_removed(raw, saved)
    if isinstance(raw.get("cost"), dict) and "price_file" in raw["cost"]:
        redact = (*redact, "cost.prices")
    raw = inline_price_file(raw, Path.cwd())
    try:
        return SweepConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, redact)) from None
    except ConfigError as exc:  # a check inside a validator (the price table's) names its value
        text = str(exc)
        field = text.partition(":")[0]
        if any(f"{field}.".startswith(f"{r}.") for r in redact) and ", got " in text:
            raise ConfigError(
                f"{text.partition(', got ')[0]} (value not shown: it came from a file)"
            ) from None
        raise


def inline_price_file(
    raw: dict[str, Any], base: Path, allow_paths: Sequence[str | Path] = ()
) -> dict[str, Any]:
    """``cost.price_file: FILE`` read into ``cost.prices`` (the config's own prices win).

    The file is a YAML mapping like ``cost.prices`` (``T4: 0.35`` or ``H100: {on_demand: 4,
    spot: 2}``) or a CSV with the header ``accelerator,on_demand,spot`` (spot may be empty).
    It is read once, when the sweep is configured: the run's saved ``config.yaml`` carries
    the prices it was billed at, so its books never change when the file does. Paths
    follow the search-space rules (under the config's folder or an ``allow_paths`` folder).
    """
    cost = raw.get("cost")
    if not isinstance(cost, dict) or "price_file" not in cost:
        return raw
    name = cost["price_file"]
    if not isinstance(name, str) or not name:
        raise ConfigError(f"cost.price_file: must be a file name, got {name!r}")
    candidate = base / name
    real = candidate.resolve()
    roots = [base.resolve(), *(Path(p).resolve() for p in allow_paths)]
    if not any(real.is_relative_to(root) for root in roots):
        raise ConfigError(
            f"cost.price_file: {name!r} is outside the config's folder; "
            "move it there or allow its folder (--allow-path)"
        )
    try:
        text = real.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"cost.price_file: no such file: {candidate}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cost.price_file: cannot read {candidate}: {exc}") from None
    table = _read_price_table(text, candidate)
    prices = cost.get("prices") or {}
    if not isinstance(prices, dict):
        kind = type(prices).__name__
        raise ConfigError(f"cost.prices: must be a mapping of device type to price, got {kind}")
    rest = {k: v for k, v in cost.items() if k != "price_file"}
    return {**raw, "cost": {**rest, "prices": {**table, **prices}}}


def _read_price_table(text: str, where: Path) -> dict[str, Any]:
    if where.suffix.lower() == ".csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        header = set(rows[0]) if rows else set()
        if not {"accelerator", "on_demand"} <= header:
            raise ConfigError(f"cost.price_file: {where} needs the CSV header accelerator,on_demand[,spot]")
        table: dict[str, Any] = {}
        for line, row in enumerate(rows, start=2):
            try:
                entry = {"on_demand": float(row["on_demand"])}
                if (row.get("spot") or "").strip():
                    entry["spot"] = float(row["spot"])
            except (TypeError, ValueError):
                raise ConfigError(f"cost.price_file: {where} line {line}: prices must be numbers") from None
            table[str(row["accelerator"]).strip()] = entry
        return table
    loaded = read_yaml(text, f"cost.price_file: {where}")
    if not isinstance(loaded, dict):
        raise ConfigError(f"cost.price_file: {where} must map device types to prices")
    return {str(k): v for k, v in loaded.items()}


def _load_search_space(name: str, base: Path, allow_paths: Sequence[str | Path] = ()) -> Any:
    roots = [base.resolve(), SEARCH_SPACE_LIBRARY.resolve(), *(Path(p).resolve() for p in allow_paths)]
    outside = None
    for candidate in (base / name, SEARCH_SPACE_LIBRARY / name, SEARCH_SPACE_LIBRARY / f"{name}.yaml"):
        if not candidate.is_file():
            continue
        real = candidate.resolve()  # links and '..' followed: where the bytes really are
        if not any(real.is_relative_to(root) for root in roots):
            outside = candidate
            continue
        try:
            text = real.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"search_space: {candidate} is not valid YAML") from None
        except OSError as exc:
            raise ConfigError(f"search_space: cannot read {candidate}: {exc.strerror}") from None
        loaded = read_yaml(text, f"search_space: {candidate}")
        if not isinstance(loaded, dict):
            raise ConfigError(f"search_space: {candidate} must be a YAML mapping of parameters")
        return loaded
    if outside is not None:
        raise ConfigError(
            f"search_space: {name!r} is outside the config's folder and search_spaces/; "
            "move it there or allow its folder (--allow-path)"
        )
    raise ConfigError(
        f"search_space: no search-space file {name!r} (looked beside the config and in search_spaces/)"
    )


def _path_part(part: Any) -> str:
    text = str(part)
    return text if re.fullmatch(r"[\w-]+", text) else json.dumps(text)


def _one_line(exc: ValidationError, redact: Sequence[str] = ()) -> str:
    return " ".join(_message(exc, redact).splitlines())


def _message(exc: ValidationError, redact: Sequence[str] = ()) -> str:
    err = exc.errors(include_url=False)[0]
    loc = ".".join(_path_part(p) for p in err["loc"] if not str(p).startswith("function-"))
    msg: str = err["msg"]
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"{loc}: unknown key"
    if kind == "missing":
        return f"{loc}: required key is missing"
    prefix = f"{loc}: " if loc else ""
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
        # a model-level check names its own field when it can
        return msg if re.match(r"^[\w.]+: ", msg) else f"{prefix}{msg}"
    if any(f"{loc}.".startswith(f"{field}.") for field in redact):
        return f"{prefix}{msg[:1].lower()}{msg[1:]} (value not shown: it came from a file)"
    return f"{prefix}{msg[:1].lower()}{msg[1:]}, got {short_repr(err.get('input'))}"


_SHORT = reprlib.Repr()  # keyword arguments only from Python 3.12
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 2, 40, 40
_SHORT.maxdict = _SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxset = 4


def short_repr(value: Any) -> str:
    """A value for an error line: bounded in size whatever the value (never rendered whole)."""
    text = _SHORT.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: what the fields whose ``Field`` has no description are, for :func:`config_reference`
FIELD_NOTES = {
    "name": "the sweep's name (letters, digits, _ . -); the run directory is runs/<name>-<time>",
    "metric": "the reported metric the sweep optimises",
    "mode": "min or max: which way the metric is better",
    "max_epochs": "epochs a trial may run (a rung-free trial's full run)",
    "num_samples": "trials to start (each combination of grid values this many times)",
    "max_concurrent_trials": "trials running at once (null: as many as the cluster holds)",
    "seed": "seeds the searcher and the trainables",
    "search_space": "hyperparameter → distribution, inline or a file under search_spaces/",
    "approval": "the sign-off a grid search or a sweep over its limits needs (the gate)",
    "trainable.args": "fixed arguments passed to the trainable in its config",
    "search_space.type": "uniform, loguniform, int, logint or choice",
    "search_space.low": "the lower bound (uniform, loguniform, int, logint)",
    "search_space.high": "the upper bound, inclusive",
    "search_space.values": "the values of a choice",
    "scheduler.type": "cost_aware_hyperband (the rungs), pbt, or fifo (no early stopping)",
    "scheduler.perturbation_interval": "pbt: epochs between exploits (each copied hyperparameter "
    "resampled with chance 0.25, else perturbed; a cheaper donor among the top is likelier)",
    "scheduler.quantile_fraction": "pbt: the share of the population that exploits, and is copied",
    "cost.business_value_usd": "USD per unit of metric improvement (ROI's numerator)",
    "cost.baseline_metric": "where ROI credits start (null: the median trial at the first rung)",
    "cost.time_field": "the cumulative result field metered as seconds (a replay: sim_seconds)",
    "resources.cpus": "CPU cores each trial holds (billed per core when it holds no GPU)",
    "resources.gpus": "GPUs each trial holds (billed per GPU)",
    "budget.max_cost_usd_per_trial": "USD: a trial that reaches it stops",
    "budget.max_hours_per_trial": "device-hours: a trial that reaches them stops",
    "stopping.patience_epochs": "stop a trial after this many epochs without a gain",
    "stopping.min_marginal_roi": "stop when Δloss × business_value_usd per dollar falls below this",
    "stopping.sweep_min_improvement_per_usd": "stop the whole sweep when its best improves less per dollar "
    "over its last 50 epochs",
    "idle.enabled": "stop trials whose GPUs sit idle (NVML)",
    "idle.util_below_pct": "percent: a GPU below this is idle",
    "idle.idle_minutes": "minutes idle before the trial stops",
    "tracking.mlflow": "log each trial live to MLflow (null: off)",
    "approval.estimated_resources": "the resources the approver saw",
    "approval.stop_conditions": "what stops the sweep, as approved",
    "approval.approver": "who approved it",
}


def config_reference() -> str:
    """Every config option as a markdown table (field, default, what it is), generated from the
    models themselves: README.md's reference is this text, and a test fails when it drifts."""
    from pydantic.fields import FieldInfo

    def default_of(info: FieldInfo) -> str:
        if info.is_required():
            return "required"
        value = info.get_default(call_default_factory=True)
        if isinstance(value, BaseModel):
            return "see below"
        text = json.dumps(value, default=str)
        return "`null`" if text == "null" else f"`{text}`"

    def rows(model: type[BaseModel], prefix: str) -> list[str]:
        out: list[str] = []
        nested: list[tuple[str, type[BaseModel]]] = []
        for name, info in model.model_fields.items():
            kind = info.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                nested.append((f"{prefix}{name}.", kind))
                continue
            inner = [a for a in get_args(kind) if isinstance(a, type) and issubclass(a, BaseModel)]
            description = info.description or FIELD_NOTES.get(f"{prefix}{name}")
            if not description:
                raise ValueError(f"{prefix}{name}: no description (Field(description=...) or FIELD_NOTES)")
            description = " ".join(description.split()).replace("|", "\\|")
            out.append(f"| `{prefix}{name}` | {default_of(info)} | {description} |")
            nested += [(f"{prefix}{name}.", m) for m in inner]
        for where, sub in nested:
            out += rows(sub, where)
        return out

    header = ["| field | default | what it is |", "|---|---|---|"]
    return "\n".join([*header, *rows(SweepConfig, "")]) + "\n"
