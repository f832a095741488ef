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
from typing import Any

from costtune.errors import ConfigError

#: List prices in USD per device-hour (one GPU, or one CPU core for ``cpu``), as
#: ``(on_demand, spot)``. Public cloud rates, rounded: a starting point, not a quote.
#: Override any of them with ``cost.prices`` or a ``cost.price_file``.
DEFAULT_PRICES: Mapping[str, tuple[float, float]] = {
    "A100": (2.50, 1.10),
    "A100-80G": (3.20, 1.40),
    "H100": (4.00, 2.00),
    "H200": (4.50, 2.30),
    "L40S": (1.90, 0.80),
    "L4": (0.80, 0.30),
    "A10G": (1.00, 0.40),
    "T4": (0.35, 0.15),
    "V100": (2.00, 0.80),
    "cpu": (0.05, 0.02),
}

#: Ray's accelerator labels (``ray.util.accelerators``) that name a type of the table.
ALIASES: Mapping[str, str] = {"A100-40G": "A100", "CPU": "cpu"}

CAPACITIES = ("on_demand", "spot")

SECONDS_PER_HOUR = 3600.0


#: the accelerator labels Ray puts on nodes (``ray.util.accelerators``, Ray 2.60), so that the
#: core reads them without importing Ray; a contract test holds them to the installed Ray
_RAY_LABELS = (
    "A100 A100-40G A100-80G A10G AMD-Instinct-MI100 AMD-Instinct-MI210 AMD-Instinct-MI250X-MI250 "
    "AMD-Instinct-MI300A AMD-Radeon-HD-7900 AMD-Radeon-R9-200-HD-7900 Apple-Silicon Ascend910B "
    "Ascend910B4 B200 B300 FURIOSA_RNGD GB200 GB300 H100 H20 H200 Intel-GAUDI Intel-GPU-Max-1100 "
    "Intel-GPU-Max-1550 K80 L4 L40S M1 M1-Max M1-Pro M1-Ultra M2 M2-Max M2-Pro M2-Ultra M3 "
    "M3-Max M3-Pro MOBILINT_ARIES MOBILINT_REGULUS MXC500 MXC550 P100 P4 RTX-PRO-6000 T4 TPU-V2 "
    "TPU-V3 TPU-V4 TPU-V5LITEPOD TPU-V5P TPU-V6E TPU-V7X V100 aws-neuron-core"
)
RAY_ACCELERATOR_LABELS: frozenset[str] = frozenset(_RAY_LABELS.split())


def is_known_device(label: str) -> bool:
    """A type of the price table, or an accelerator label Ray puts on nodes."""
    return canonical_device(label) in DEFAULT_PRICES or label in RAY_ACCELERATOR_LABELS


def canonical_device(label: str) -> str:
    """A Ray accelerator label (``A100-40G``) as the price table names it (``A100``)."""
    return ALIASES.get(label, label)


def devices_from_resources(resources: Mapping[str, float]) -> tuple[str, float]:
    """Which kind of device a trial is billed for, and how many.

    A trial that holds any GPU is billed per GPU (CPU cores alongside are included in
    the GPU price, as clouds do); a CPU-only trial is billed per core. A trial that
    asked for a GPU type (Ray's ``accelerator_type:<T>`` resource) is billed as that type;
    otherwise as ``"gpu"``, the sweep's ``cost.accelerator``, until its node says more
    (:func:`costtune.ray.placement.trial_devices`).

    Returns:
        ``(kind, n)``: kind is ``"cpu"``, ``"gpu"`` or an accelerator type such as ``"T4"``.
    """
    gpus = float(resources.get("GPU", 0.0) or 0.0)
    if gpus > 0:
        for key in resources:
            if key.startswith("accelerator_type:"):
                return canonical_device(key.split(":", 1)[1]), gpus
        return "gpu", gpus
    return "cpu", float(resources.get("CPU", 1.0) or 0.0)


def _price_pair(name: str, value: Any) -> tuple[float, float]:
    """``cost.prices.<name>``: one number (paid whatever the capacity) or
    ``{on_demand: x, spot: y}`` (spot defaults to on-demand: no spot market)."""
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(CAPACITIES))
        if unknown:
            raise ConfigError(f"cost.prices.{name}.{unknown[0]}: unknown; use on_demand and/or spot")
        if "on_demand" not in value:
            raise ConfigError(f"cost.prices.{name}: needs on_demand (spot is optional)")
        pair = (value["on_demand"], value.get("spot", value["on_demand"]))
        fields = ("on_demand", "spot")
    else:
        pair, fields = (value, value), ("", "")
    for price, sub in zip(pair, fields, strict=True):
        ok = isinstance(price, int | float) and not isinstance(price, bool) and math.isfinite(price)
        if not (ok and price >= 0):
            where = f"cost.prices.{name}" + (f".{sub}" if sub else "")
            raise ConfigError(f"{where}: must be a finite price >= 0, got {price!r}")
    return float(pair[0]), float(pair[1])


@dataclass(frozen=True, slots=True)
class CostModel:
    """What one device-hour costs, by device type and capacity.

    Args:
        accelerator: GPU type a trial is billed as when nothing says where it ran
            (a key of ``prices``).
        prices: USD per device-hour by type, each a number or ``{on_demand, spot}``;
            merged over :data:`DEFAULT_PRICES`.
        capacity: ``"on_demand"`` or ``"spot"``: which column is paid.
    """

    accelerator: str = "A100"
    prices: Mapping[str, Any] = field(default_factory=dict)
    capacity: str = "on_demand"
    #: ``{type: (on_demand, spot)}``, the defaults merged with ``prices``
    table: Mapping[str, tuple[float, float]] = field(init=False, repr=False, compare=False)
    _rates: dict[str, float] = field(init=False, repr=False, compare=False)  # price by kind, memoised

    def __post_init__(self) -> None:
        if self.capacity not in CAPACITIES:
            raise ConfigError(f"cost.capacity: must be on_demand or spot, got {self.capacity!r}")
        table = dict(DEFAULT_PRICES)
        for name, value in self.prices.items():
            if name == "gpu":
                raise ConfigError(
                    "cost.prices.gpu: name the GPU type (the sweep's is cost.accelerator, "
                    f"{self.accelerator!r}), e.g. prices: {{{self.accelerator}: 2.5}}"
                )
            table[canonical_device(str(name))] = _price_pair(str(name), value)
        accelerator = canonical_device(self.accelerator)
        if accelerator not in table:
            known = ", ".join(sorted(table))
            raise ConfigError(
                f"cost.accelerator: no price for {self.accelerator!r}; "
                f"add it under cost.prices or use one of: {known}"
            )
        column = CAPACITIES.index(self.capacity)
        object.__setattr__(self, "accelerator", accelerator)
        object.__setattr__(self, "table", table)
        #: what one device-hour of each type costs at this capacity
        object.__setattr__(self, "prices", {name: pair[column] for name, pair in table.items()})
        object.__setattr__(self, "_rates", {})

    def knows(self, kind: str) -> bool:
        """Whether ``kind`` has a price of its own (else it is billed as ``accelerator``)."""
        return kind in ("cpu", "gpu") or canonical_device(kind) in self.prices

    def device_label(self, kind: str) -> str:
        """The device ``kind`` names: ``cpu``, the sweep's accelerator for ``gpu``, or a type."""
        if kind == "cpu":
            return "cpu"
        return self.accelerator if kind == "gpu" else canonical_device(kind)

    def usd_per_device_hour(self, kind: str) -> float:
        """Price of one device-hour of ``kind`` (``"cpu"``, ``"gpu"`` or a GPU type); a type
        with no price is billed as the sweep's accelerator (the sweep warns when it happens)."""
        rates = getattr(self, "_rates", None)  # None: unpickled from a costtune before it
        rate = None if rates is None else rates.get(kind)
        if rate is None:  # a ledger of 100,000 epochs asks this 200,000 times
            label = self.device_label(kind)
            rate = float(self.prices.get(label, self.prices[self.accelerator]))
            if rates is not None:
                rates[kind] = rate
        return rate

    def cost_usd(self, seconds: float, devices: float, kind: str) -> float:
        return device_hours(seconds, devices) * self.usd_per_device_hour(kind)


def is_gpu(kind: str) -> bool:
    """Whether a billed device kind is a GPU (anything but ``"cpu"``)."""
    return kind != "cpu"


def device_hours(seconds: float, devices: float) -> float:
    """Device-hours held: metered seconds × devices (GPU-hours when the devices are GPUs)."""
    return max(seconds, 0.0) * devices / SECONDS_PER_HOUR


def roi(delta_metric: float, business_value_usd: float, cost_usd: float) -> float:
    """Return on investment of a trial: value bought per dollar spent.

    ROI = Δmetric × business value / (device-hours × price per device-hour).

    Args:
        delta_metric: improvement bought, in "higher is better" units (a loss that fell
            from 0.40 to 0.25 bought 0.15). See :meth:`costtune.core.direction.Direction.improvement`.
        business_value_usd: what one unit of metric improvement is worth, in USD.
        cost_usd: metered spend that bought it.

    Returns:
        The ratio; ``nan`` when nothing was spent (ROI is undefined, not infinite).
    """
    if cost_usd <= 0:
        return math.nan
    return delta_metric * business_value_usd / cost_usd
