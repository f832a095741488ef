"""Prices, metered device-hours and ROI: the arithmetic every other module trusts.

Pure stdlib. A trial's cost is *metered*: the seconds it reported (Ray's cumulative
``time_total_s`` by default, which does not grow while a trial is paused) times the
devices it held times the price of one device-hour. Nothing is guessed from wall-clock
time on the driver, so downtime between a stop and a resume is never charged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from costtune.errors import ConfigError

#: On-demand list prices in USD per device-hour (one GPU, or one CPU core for ``cpu``).
#: Sources: public cloud on-demand rates, rounded; override any of them in the config.
DEFAULT_USD_PER_DEVICE_HOUR: Mapping[str, float] = {
    "A100": 2.50,
    "A100-80G": 3.20,
    "H100": 4.00,
    "H200": 4.50,
    "L4": 0.80,
    "A10G": 1.00,
    "T4": 0.35,
    "V100": 2.00,
    "cpu": 0.05,
}

SECONDS_PER_HOUR = 3600.0


def devices_from_resources(resources: Mapping[str, float]) -> tuple[str, float]:
    """Which kind of device a trial is billed for, and how many.

    A trial that holds any GPU is billed per GPU (CPU cores alongside are included in
    the GPU price, as clouds do); a CPU-only trial is billed per core.

    Returns:
        ``("gpu", n_gpus)`` or ``("cpu", n_cpus)``.
    """
    gpus = float(resources.get("GPU", 0.0) or 0.0)
    if gpus > 0:
        return "gpu", gpus
    return "cpu", float(resources.get("CPU", 1.0) or 0.0)


@dataclass(frozen=True, slots=True)
class CostModel:
    """What one device-hour costs, for the GPU type a sweep runs on and for CPU cores.

    Args:
        accelerator: GPU type the sweep's GPU trials run on (a key of ``prices``).
        prices: USD per device-hour by type; merged over :data:`DEFAULT_USD_PER_DEVICE_HOUR`.
    """

    accelerator: str = "A100"
    prices: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        merged = {**DEFAULT_USD_PER_DEVICE_HOUR, **self.prices}
        for name, price in merged.items():
            if not (isinstance(price, int | float) and math.isfinite(price) and price >= 0):
                raise ConfigError(f"cost.prices.{name}: must be a finite price >= 0, got {price!r}")
        if self.accelerator not in merged:
            known = ", ".join(sorted(merged))
            raise ConfigError(
                f"cost.accelerator: no price for {self.accelerator!r}; "
                f"add it under cost.prices or use one of: {known}"
            )
        object.__setattr__(self, "prices", merged)

    def usd_per_device_hour(self, kind: str) -> float:
        """Price of one device-hour of ``kind`` (``"gpu"`` or ``"cpu"``)."""
        return self.prices["cpu"] if kind == "cpu" else self.prices[self.accelerator]

    def device_label(self, kind: str) -> str:
        return "cpu" if kind == "cpu" else self.accelerator

    def cost_usd(self, seconds: float, devices: float, kind: str) -> float:
        return device_hours(seconds, devices) * self.usd_per_device_hour(kind)


def device_hours(seconds: float, devices: float) -> float:
    """Device-hours held: metered seconds × devices (GPU-hours when the devices are GPUs)."""
    return max(seconds, 0.0) * devices / SECONDS_PER_HOUR


def roi(delta_metric: float, business_value_usd: float, cost_usd: float) -> float:
    """Return on investment of a trial: value bought per dollar spent.

    ROI = Δmetric × business value / (device-hours × price per device-hour).

    Args:
        delta_metric: improvement bought, in "higher is better" units (a loss that fell
            from 0.40 to 0.25 bought 0.15). See :func:`improvement`.
        business_value_usd: what one unit of metric improvement is worth, in USD.
        cost_usd: metered spend that bought it.

    Returns:
        The ratio; ``nan`` when nothing was spent (ROI is undefined, not infinite).
    """
    if cost_usd <= 0:
        return math.nan
    return delta_metric * business_value_usd / cost_usd


def improvement(baseline: float, value: float, mode: str) -> float:
    """Δmetric of ``value`` over ``baseline``, positive when ``value`` is better.

    The one place that knows about metric direction for ROI: ``mode`` is ``"min"``
    (a loss) or ``"max"`` (an accuracy).
    """
    return baseline - value if mode == "min" else value - baseline
