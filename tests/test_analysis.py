from __future__ import annotations

import itertools

import pytest

from costtune.analysis import (
    HIGH_ROI,
    MARGINAL,
    WASTE,
    cost_to_target,
    curve,
    elbow,
    spend_by_band,
    zone_bands,
)
from costtune.cost import CostModel
from costtune.ledger import Ledger, LedgerSpec

# one GPU at $3600 per hour: one second costs one dollar, so seconds read as dollars
SPEC = LedgerSpec(metric="val_loss", mode="min", cost_model=CostModel(prices={"A100": 3600.0}), max_epochs=8)
# the reference story in small: fast gains, then a flat tail that still costs $10 an epoch
FLATTENING = [1.0, 0.6, 0.4, 0.3, 0.29, 0.289, 0.2889, 0.2889]


def _ledger() -> Ledger:
    ledger = Ledger(SPEC)
    for epoch, loss in enumerate(FLATTENING, start=1):
        ledger.record_result(
            "a", epoch=epoch, seconds=10.0 * epoch, metrics={"val_loss": loss}, device_kind="gpu"
        )
    for epoch, loss in enumerate([0.9, 0.8], start=1):
        ledger.record_result(
            "b", epoch=epoch, seconds=5.0 * epoch, metrics={"val_loss": loss}, device_kind="gpu"
        )
    return ledger


def test_curve_meters_dollars_and_zones_with_a_window() -> None:
    ledger = _ledger()
    points = curve(ledger, ledger.trials["a"], window=1, min_roi=0.005)
    assert [p.usd for p in points] == pytest.approx([10, 20, 30, 40, 50, 60, 70, 80])
    # window 1: epoch 5 bought 0.01 for $10 = 0.001 per $ (< 0.005): marginal; epoch 8 bought nothing
    assert [p.zone for p in points] == [
        HIGH_ROI,
        HIGH_ROI,
        HIGH_ROI,
        HIGH_ROI,
        MARGINAL,
        MARGINAL,
        MARGINAL,
        WASTE,
    ]
    assert points[2].marginal_roi == pytest.approx(0.02)


def test_elbow_is_the_last_epoch_still_worth_its_dollars() -> None:
    ledger = _ledger()
    e = elbow(ledger, ledger.trials["a"], window=1, min_roi=0.005)
    assert (e.epoch, e.metric, e.usd, e.usd_after) == (4, 0.3, pytest.approx(40), pytest.approx(40))


def test_zone_bands_are_at_most_three_contiguous_bands_ending_where_the_gains_did() -> None:
    ledger = _ledger()
    points = curve(ledger, ledger.trials["a"], window=1, min_roi=0.005)
    e = elbow(ledger, ledger.trials["a"], window=1, min_roi=0.005)
    bands = zone_bands(points, e.epoch)
    # high-ROI to the elbow (4), marginal to the last gain (7: 0.2889), waste after
    assert [(p.epoch, p.zone) for p in bands] == [(4, HIGH_ROI), (7, MARGINAL), (8, WASTE)]


def test_a_noisy_curve_that_flips_zones_every_few_epochs_still_gets_three_bands() -> None:
    """The report's finding: zones alternated high-ROI and waste at epochs 7, 8, 11, 14, …"""
    ledger = Ledger(SPEC)
    noisy = [1.0, 0.5, 0.4, 0.35, 0.36, 0.33, 0.34, 0.335, 0.32, 0.33, 0.325, 0.318, 0.33, 0.33, 0.33, 0.33]
    for epoch, loss in enumerate(noisy, start=1):
        ledger.record_result(
            "n", epoch=epoch, seconds=10.0 * epoch, metrics={"val_loss": loss}, device_kind="gpu"
        )
    points = curve(ledger, ledger.trials["n"], window=1, min_roi=0.002)
    flips = sum(1 for a, b in itertools.pairwise(points) if a.zone != b.zone)
    assert flips > 3  # what the old summary printed, one line per flip
    bands = zone_bands(points, elbow(ledger, ledger.trials["n"], window=1, min_roi=0.002).epoch)
    assert 1 <= len(bands) <= 3
    order = [HIGH_ROI, MARGINAL, WASTE]
    assert [order.index(p.zone) for p in bands] == sorted(order.index(p.zone) for p in bands)
    assert bands[-1].epoch == 16 and bands[-1].zone == WASTE  # nothing improved after epoch 12


def test_cost_to_target_counts_every_epoch_in_the_order_it_ran() -> None:
    ledger = _ledger()  # a's eight epochs ($80) ran before b's two ($10)
    assert cost_to_target(ledger, 0.6) == pytest.approx(20)
    assert cost_to_target(ledger, 0.2889) == pytest.approx(70)
    assert cost_to_target(ledger, 0.1) is None


def test_spend_by_band_splits_epochs_at_the_rungs() -> None:
    assert spend_by_band(_ledger(), [2, 8]) == pytest.approx({"1-2": 20 + 10, "3-8": 60})
