from __future__ import annotations

import math

import pytest

from costtune.core.cost import CostModel, device_hours, devices_from_resources, roi
from costtune.core.direction import Direction
from costtune.errors import ConfigError


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"CPU": 1.0, "GPU": 8.0}, ("gpu", 8.0)),
        ({"CPU": 4.0, "GPU": 0.5}, ("gpu", 0.5)),
        ({"CPU": 2.0}, ("cpu", 2.0)),
        ({"CPU": 3.0, "GPU": 0.0}, ("cpu", 3.0)),
        # a trial that asked for a GPU type is billed as that type (Ray's names, aliased)
        ({"CPU": 1.0, "GPU": 2.0, "accelerator_type:T4": 0.001}, ("T4", 2.0)),
        ({"CPU": 1.0, "GPU": 1.0, "accelerator_type:A100-40G": 0.001}, ("A100", 1.0)),
        ({"CPU": 1.0, "accelerator_type:T4": 0.001}, ("cpu", 1.0)),
    ],
)
def test_devices_from_resources_bills_gpus_else_cores(resources, expected) -> None:
    assert devices_from_resources(resources) == expected


def test_cost_model_a100_default_price_and_cpu_core_hours() -> None:
    model = CostModel()
    # an 8×A100 trial for 90 minutes: 12 GPU-hours at $2.50
    assert model.cost_usd(5400, 8, "gpu") == pytest.approx(30.0)
    assert model.cost_usd(3600, 2, "cpu") == pytest.approx(2 * model.prices["cpu"])


def test_cost_model_prices_are_overridable() -> None:
    model = CostModel(accelerator="H100", prices={"H100": 3.0, "cpu": 0.1})
    assert model.usd_per_device_hour("gpu") == 3.0
    assert model.usd_per_device_hour("cpu") == 0.1
    assert model.device_label("gpu") == "H100"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"accelerator": "TPUv9"}, "cost.accelerator"),
        ({"prices": {"A100": -1.0}}, "cost.prices.A100"),
        ({"prices": {"cpu": math.nan}}, "cost.prices.cpu"),
        ({"prices": {"T4": {"spot": 0.1}}}, "cost.prices.T4"),
        ({"prices": {"T4": {"on_demand": 0.3, "preemptible": 0.1}}}, "cost.prices.T4.preemptible"),
        ({"prices": {"T4": {"on_demand": 0.3, "spot": -0.1}}}, "cost.prices.T4.spot"),
        ({"prices": {"T4": True}}, "cost.prices.T4"),
        ({"prices": {"gpu": 2.5}}, "cost.prices.gpu"),
        ({"capacity": "reserved"}, "cost.capacity"),
    ],
)
def test_cost_model_bad_prices_name_the_field(kwargs, field) -> None:
    with pytest.raises(ConfigError, match=f"^{field}:"):
        CostModel(**kwargs)


def test_device_hours_never_negative() -> None:
    assert device_hours(-5, 8) == 0.0
    assert device_hours(1800, 4) == pytest.approx(2.0)


def test_roi_is_improvement_times_value_per_dollar() -> None:
    delta = Direction.MIN.improvement(0.40, 0.25)
    assert delta == pytest.approx(0.15)
    assert roi(delta, business_value_usd=1000.0, cost_usd=50.0) == pytest.approx(3.0)
    assert Direction.MAX.improvement(0.90, 0.95) == pytest.approx(0.05)
    assert math.isnan(roi(0.1, 1.0, 0.0))


def test_the_price_table_has_an_on_demand_and_a_spot_column_for_each_type() -> None:
    for kind in ("A100", "A100-80G", "H100", "H200", "L4", "T4", "cpu"):
        on_demand = CostModel(capacity="on_demand").usd_per_device_hour(kind)
        spot = CostModel(capacity="spot").usd_per_device_hour(kind)
        assert 0 < spot < on_demand, kind
    assert CostModel(accelerator="H100", capacity="spot").cost_usd(3600, 8, "gpu") == pytest.approx(
        8 * CostModel(capacity="spot").usd_per_device_hour("H100")
    )


def test_prices_override_one_column_or_both() -> None:
    both = CostModel(prices={"T4": 0.5}, capacity="spot")  # a number: paid whatever the capacity
    assert both.usd_per_device_hour("T4") == 0.5
    pair = {"T4": {"on_demand": 0.4, "spot": 0.1}}
    assert CostModel(prices=pair).usd_per_device_hour("T4") == 0.4
    assert CostModel(prices=pair, capacity="spot").usd_per_device_hour("T4") == 0.1
    # no spot market for a type: spot sweeps pay on-demand
    assert (
        CostModel(prices={"MI300": {"on_demand": 3.0}}, capacity="spot").usd_per_device_hour("MI300") == 3.0
    )


def test_each_gpu_type_is_billed_at_its_own_price_and_an_unknown_one_as_the_sweeps() -> None:
    model = CostModel(accelerator="H100")
    assert model.usd_per_device_hour("T4") == pytest.approx(0.35)
    assert model.usd_per_device_hour("gpu") == model.usd_per_device_hour("H100") == pytest.approx(4.0)
    assert model.device_label("T4") == "T4" and model.device_label("gpu") == "H100"
    assert not model.knows("B300") and model.knows("T4") and model.knows("A100-40G")
    assert model.usd_per_device_hour("B300") == model.usd_per_device_hour("H100")
    assert model.device_label("B300") == "B300"  # the table says where it ran
    assert CostModel(accelerator="A100-40G").accelerator == "A100"  # Ray's label, the table's name
