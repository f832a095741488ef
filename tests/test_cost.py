from __future__ import annotations

import math

import pytest

from costtune.cost import CostModel, device_hours, devices_from_resources, improvement, roi
from costtune.errors import ConfigError


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"CPU": 1.0, "GPU": 8.0}, ("gpu", 8.0)),
        ({"CPU": 4.0, "GPU": 0.5}, ("gpu", 0.5)),
        ({"CPU": 2.0}, ("cpu", 2.0)),
        ({"CPU": 3.0, "GPU": 0.0}, ("cpu", 3.0)),
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
    ],
)
def test_cost_model_bad_prices_name_the_field(kwargs, field) -> None:
    with pytest.raises(ConfigError, match=f"^{field}:"):
        CostModel(**kwargs)


def test_device_hours_never_negative() -> None:
    assert device_hours(-5, 8) == 0.0
    assert device_hours(1800, 4) == pytest.approx(2.0)


def test_roi_is_improvement_times_value_per_dollar() -> None:
    delta = improvement(baseline=0.40, value=0.25, mode="min")
    assert delta == pytest.approx(0.15)
    assert roi(delta, business_value_usd=1000.0, cost_usd=50.0) == pytest.approx(3.0)
    assert improvement(baseline=0.90, value=0.95, mode="max") == pytest.approx(0.05)
    assert math.isnan(roi(0.1, 1.0, 0.0))
