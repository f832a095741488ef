"""Pre-run cost estimate: trials, epochs, device-hours and dollars of a sweep, before it runs.

Pure arithmetic from the scheduler's geometry (Hyperband brackets and rungs), the number
of trials, devices per trial, price and seconds per epoch. No Ray, no torch.

Worst case: every trial runs to ``max_epochs``. An asynchronous rung decides each trial once,
on arrival, against the trials already there; a trial that arrives best so far always goes
on, so with an unlucky (or steadily improving) arrival order every trial can be promoted.

Expected: arrivals in random order. The k-th arrival at a rung is promoted when its rank
among the k recorded so far is within the first ⌈k/η⌉, which for a random order happens with
probability ⌈k/η⌉/k; so n arrivals promote Σ_{k≤n} ⌈k/η⌉/k trials on average — more than
the n/η of synchronous Hyperband. A Bayesian searcher that improves over time promotes
more than this.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from costtune.core.config import SweepConfig, planned_trials
from costtune.core.cost import device_hours, is_gpu
from costtune.core.policy import bracket_weights, max_bracket_index, rung_epochs
from costtune.core.policy.successive_halving import promoted_count
from costtune.errors import ConfigError


@dataclass(frozen=True)
class Estimate:
    trials: int
    devices_per_trial: float
    device: str
    usd_per_device_hour: float
    epoch_seconds: float
    epoch_seconds_source: str
    startup_seconds: float
    worst_epochs: float
    expected_epochs: float
    worst_device_hours: float
    expected_device_hours: float
    worst_cost_usd: float
    expected_cost_usd: float
    worst_trial_hours: float
    worst_trial_cost_usd: float
    assumptions: list[str] = field(default_factory=list)

    @property
    def is_gpu(self) -> bool:
        return is_gpu(self.device)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def expected_promotions(arrivals: float, eta: int) -> float:
    """Σ_{k=1}^{n} c(k)/k: trials an asynchronous rung promotes out of n random-order arrivals,
    c(k) = max(1, ⌊k/η⌋).

    Fractional ``arrivals`` (an expectation from the rung below) interpolate linearly.
    """
    if arrivals <= 0:
        return 0.0

    def share(k: int) -> float:
        return promoted_count(k, eta) / k

    whole = math.floor(arrivals)
    total = sum(share(k) for k in range(1, whole + 1))
    frac = arrivals - whole
    if frac > 0:
        total += frac * share(whole + 1)
    return min(total, arrivals)


def expected_epochs_hyperband(
    trials: float,
    max_epochs: int,
    grace_epochs: int,
    eta: int,
    brackets: int | None,
) -> float:
    """Expected epochs of an asynchronous Hyperband sweep (see the module docstring)."""
    most = max_bracket_index(grace_epochs, eta, max_epochs) + 1
    ladders = [rung_epochs(grace_epochs, eta, max_epochs, b) for b in range(brackets or most)]
    weights = bracket_weights(len(ladders), eta)
    total = 0.0
    for b, weight in enumerate(weights):
        arrivals = trials * weight / sum(weights)
        ladder = [*ladders[b], max_epochs]
        done = 0
        for i, epochs in enumerate(ladder):
            total += arrivals * (epochs - done)
            done = epochs
            if i < len(ladder) - 1:
                arrivals = expected_promotions(arrivals, eta)
    return total


def estimate(
    config: SweepConfig,
    epoch_seconds: float | None = None,
    source: str = "config",
    worst_epoch_seconds: float | None = None,
    startup_seconds: float | None = None,
) -> Estimate:
    """The sweep's worst-case and expected cost.

    Args:
        config: the sweep.
        epoch_seconds: seconds one epoch takes (default: ``cost.epoch_seconds``).
        source: where ``epoch_seconds`` came from, for the printed assumptions.
        worst_epoch_seconds: the slowest epoch to assume for the worst case (default:
            ``epoch_seconds``); a calibration passes the slowest epoch it measured.
        startup_seconds: metered seconds a fresh worker process spends before its first
            epoch (imports, data, warm-up; default ``cost.startup_seconds``). Workers are
            reused, so the expected cost pays it once per concurrent worker; the worst case
            once per trial.
    """
    if epoch_seconds is None:
        epoch_seconds = config.cost.epoch_seconds
    if epoch_seconds is None:
        raise ConfigError(
            "cost.epoch_seconds: needed for an estimate; set it in the config or pass --calibrate"
        )
    model = config.cost.cost_model()
    gpus, cpus = config.resources.gpus, config.resources.cpus
    kind, devices = ("gpu", gpus) if gpus > 0 else ("cpu", cpus)
    price = model.usd_per_device_hour(kind)
    trials = planned_trials(config)
    worst_epochs = float(trials * config.max_epochs)
    s = config.scheduler
    if s.type == "cost_aware_hyperband":
        expected_epochs = expected_epochs_hyperband(
            trials, config.max_epochs, s.grace_epochs, s.eta, s.brackets
        )
        geometry = (
            f"CostAwareHyperBand: rungs at {rung_epochs(s.grace_epochs, s.eta, config.max_epochs)} epochs, "
            f"eta={s.eta}; expected promotions assume random arrival order"
        )
    else:
        expected_epochs = worst_epochs
        geometry = (
            "population-based training: every trial runs max_epochs"
            if s.type == "pbt"
            else "no early stopping: every trial runs max_epochs"
        )

    slow = max(worst_epoch_seconds or epoch_seconds, epoch_seconds)
    startup = config.cost.startup_seconds if startup_seconds is None else startup_seconds
    workers = min(config.max_concurrent_trials or trials, trials)

    def usd(epochs: float, seconds: float, starts: float) -> float:
        return device_hours(epochs * seconds + starts * startup, devices) * price

    label = model.device_label(kind)
    capacity = model.capacity.replace("_", "-")
    return Estimate(
        trials=trials,
        devices_per_trial=devices,
        device=label,
        usd_per_device_hour=price,
        epoch_seconds=epoch_seconds,
        epoch_seconds_source=source,
        startup_seconds=startup,
        worst_epochs=worst_epochs,
        expected_epochs=expected_epochs,
        worst_device_hours=device_hours(worst_epochs * slow + trials * startup, devices),
        expected_device_hours=device_hours(expected_epochs * epoch_seconds + workers * startup, devices),
        worst_cost_usd=usd(worst_epochs, slow, trials),
        expected_cost_usd=usd(expected_epochs, epoch_seconds, workers),
        worst_trial_hours=(config.max_epochs * slow + startup) / 3600,
        worst_trial_cost_usd=usd(config.max_epochs, slow, 1),
        assumptions=[
            f"{trials} trials" + (" (grid)" if config.searcher.type == "grid" else ""),
            f"{devices:g} × {label} per trial at ${price:g} per device-hour ({capacity})"
            + (
                "; trials placed on other GPU types are billed at theirs"
                if kind == "gpu" and config.resources.accelerator_type is None
                else ""
            ),
            f"{epoch_seconds:.4g} s per epoch ({source})"
            + (f", worst case {slow:.4g} s" if slow > epoch_seconds else ""),
            f"{startup:.3g} s start-up per worker process ({workers} expected, up to {trials})",
            f"max_epochs {config.max_epochs}",
            geometry,
        ],
    )
