from __future__ import annotations

import itertools

import pytest

from costtune.core.analysis import (
    HIGH_ROI,
    MARGINAL,
    WASTE,
    cost_to_target,
    curve,
    curve_findings,
    elbow,
    findings,
    spend_by_band,
    zone_bands,
)
from costtune.core.cost import CostModel
from costtune.core.ledger import Ledger, LedgerSpec

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


def _flat_start(i: int, epochs: int = 12) -> list[float]:
    """Flat at 2.3 (a hair apart) until epoch 3 + i, then down to 0.5 − 0.02 i: the late droppers end best."""
    return [2.3 + 0.001 * i if e < 3 + i else 0.5 - 0.02 * i for e in range(1, epochs + 1)]


def test_a_sweep_that_stopped_its_trials_before_they_moved_is_told_so() -> None:
    curves = {f"c{i}": _flat_start(i) for i in range(14)}
    ran = {t: c[:2] for t, c in curves.items()}  # pruned at a first rung at epoch 2 ...
    ran.update({t: curves[t][:6] for t in ("c0", "c1", "c2")})  # ... but three promoted to 6
    judged = set(ran) - {"c0"}
    [note] = curve_findings(ran, judged, completed=set(), metric="val_loss", max_epochs=12)
    assert note.code == "stopped_before_moving"
    # c0 ran on, c1 and c2 dropped before they were stopped: 11 of the 13 judged never moved
    assert note.message.startswith("11 of the 13 trials the rungs or the stopping rule stopped had not moved")
    assert "median stop at epoch 2" in note.message
    assert "scheduler.grace_epochs" in note.message and "scheduler.type: fifo" in note.message
    # the same decisions on curves that fall from their first epoch: nothing to say
    falling = {t: [1.0 / (e + 0.1 * i) for e in range(1, len(c) + 1)] for i, (t, c) in enumerate(ran.items())}
    assert curve_findings(falling, judged, set(), "val_loss", 12) == []
    # fewer than 10 judged, or flat ones under half of them: too little to go on
    nine = {t: ran[t] for t in list(ran)[:12]}
    assert curve_findings(nine, judged & set(list(nine)[3:]), set(), "val_loss", 12) == []
    assert curve_findings({**ran, **{f"d{i}": [1.0, 0.5] for i in range(14)}}, judged | {f"d{i}" for i in range(14)},
                          set(), "val_loss", 12) == []  # fmt: skip
    # a trial that ended outside the sweep's judgement (an error, the budget) is not counted
    assert curve_findings(ran, set(), set(), "val_loss", 12) == []


def test_the_best_full_run_still_improving_at_max_epochs_is_told() -> None:
    steep = [1.0 - 0.04 * e for e in range(1, 21)]  # still falling at epoch 20, to 0.2
    flat = [1.0 / e if e < 6 else 0.1 for e in range(1, 21)]  # flat from epoch 6, at 0.1
    [note] = curve_findings({"a": steep, "b": [0.99] * 20}, set(), {"a", "b"}, "val_loss", 20)
    assert note.code == "best_still_improving" and "(a)" in note.message
    assert "last 2 epochs bought 11%" in note.message  # 0.08 of a 0.76 gain
    assert (
        curve_findings({"a": flat, "b": steep}, set(), {"a", "b"}, "val_loss", 20) == []
    )  # the best, a, is flat
    assert curve_findings({"a": steep}, set(), set(), "val_loss", 20) == []  # it did not reach max_epochs


def test_findings_read_the_ledger_direction_and_stop_reasons() -> None:
    """The ledger's trials, a max-mode metric: accuracy flat at 0.1 is a loss flat at −0.1."""
    spec = LedgerSpec(metric="acc", mode="max", cost_model=CostModel(prices={"A100": 3600.0}), max_epochs=12)
    ledger = Ledger(spec)
    for i in range(14):
        stop = 6 if i < 3 else 2
        for epoch, loss in enumerate(_flat_start(i)[:stop], start=1):
            ledger.record_result(
                f"c{i}", epoch=epoch, seconds=10.0 * epoch, metrics={"acc": 3 - loss}, device_kind="gpu"
            )
        reason = "completed" if i == 0 else "error" if i == 13 else "rung_pruned"
        ledger.end(f"c{i}", status="ERROR" if i == 13 else "TERMINATED", stop_reason=reason)
    [note] = findings(ledger)
    # c0 "completed" at epoch 6 is not judged (and is no full run: max_epochs is 12); c13 erred
    assert note.code == "stopped_before_moving" and note.message.startswith("10 of the 12 trials")
    assert "first epoch's acc" in note.message
