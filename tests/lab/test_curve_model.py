"""The curve model: a trial's final loss as the sweep's own paces predict it."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costtune.core.policy import StopReason
from costtune.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from lab.curve_model import expected_gain, final_losses, pace_multiples
from lab.outlook import outlook, smoothed
from lab.stopping import LabStopping as MarginalRoiStopping
from lab.stopping import LabStoppingRule as StoppingRule


def _power_law(c: float, a: float, alpha: float, epochs: int) -> list[float]:
    return [c + a * e**-alpha for e in range(1, epochs + 1)]


def test_few_references_give_the_optimistic_outlook() -> None:
    curve = smoothed(_power_law(0.2, 1.0, 0.5, 12), 3)
    refs = [smoothed(_power_law(0.3, 1.0, 0.5, 50), 3)] * 2  # fewer than three
    assert final_losses(curve, refs, 50) == [pytest.approx(outlook(curve, 50))]
    assert final_losses(curve[:50], [], 12) == [curve[-1]]  # at max_epochs: where it is


def test_references_of_one_family_predict_a_member_s_end() -> None:
    # curves of one shape at other levels and sizes: their paces carry over exactly
    refs = [smoothed(_power_law(c, a, 0.7, 60), 1) for c, a in ((0.3, 1.0), (0.1, 2.0), (0.5, 0.4))]
    truth = _power_law(0.25, 1.5, 0.7, 60)
    finals = final_losses(smoothed(truth[:15], 1), refs, 60)
    assert len(finals) == 3
    for f in finals:
        assert f == pytest.approx(truth[-1], rel=1e-9)
    # the optimistic outlook alone would have promised more
    assert outlook(smoothed(truth[:15], 1), 60) < min(finals)


def test_the_spread_is_the_references_spread_and_capped() -> None:
    fast = smoothed(_power_law(0.2, 1.0, 1.5, 40), 1)  # spends its fall early
    slow = smoothed([1.0 - 0.1 * math.log2(e) for e in range(1, 41)], 1)  # linear in log epochs
    late = [1.0] * 20 + [0.5] * 20  # flat at epoch 10, then a drop (a learning-rate step)
    q = pace_multiples([fast, slow, late], 10, 40)
    assert q[0] < q[1]  # the fast one had less left than linear-in-log
    assert q[1] == pytest.approx(math.log2(4))  # linear in log epochs: log2(T/t) paces left
    assert q[2] == pytest.approx(2 * math.log2(4))  # flat at t, fell later: the cap
    assert expected_gain([0.4, 0.6, 0.8], 0.7) == pytest.approx((0.3 + 0.1) / 3)


@settings(max_examples=30, deadline=None)
@given(scale=st.floats(1e-3, 1e3), shift=st.floats(-100.0, 100.0))
def test_predictions_move_with_the_metric(scale: float, shift: float) -> None:
    refs = [smoothed(_power_law(c, 1.0, a, 30), 3) for c, a in ((0.3, 0.4), (0.2, 0.9), (0.4, 0.6))]
    curve = smoothed(_power_law(0.25, 0.8, 0.5, 9), 3)
    finals = final_losses(curve, refs, 30)
    moved = final_losses(
        [shift + scale * x for x in curve], [[shift + scale * x for x in r] for r in refs], 30
    )
    assert moved == pytest.approx([shift + scale * f for f in finals], rel=1e-6, abs=1e-6 * scale)


def _sweep(stopping: MarginalRoiStopping, curves: dict[str, list[float]], usd_per_epoch: float):
    stopped = {}
    for trial_id, curve in curves.items():
        for epoch, loss in enumerate(curve, start=1):
            usd = epoch * usd_per_epoch
            if stopping.on_result(trial_id, loss, usd / 2.5, usd) is not None:
                stopped[trial_id] = epoch
                break
    return stopped


def test_expected_rule_stops_who_cannot_beat_the_best_and_keeps_who_can() -> None:
    rule = StoppingRule(min_relative_roi=0.1, max_epochs=60, expected=True)
    # references: each a new best, run to the end
    curves = {f"r{i}": _power_law(0.2 - 0.01 * i, 1.0, 0.7, 60) for i in range(3)}
    curves["behind"] = _power_law(0.6, 1.0, 0.7, 60)  # the same shape, far behind: hopeless
    curves["ahead"] = _power_law(0.05, 1.0, 0.7, 60)  # the same shape, heading below the best
    stopped = _sweep(MarginalRoiStopping(rule), curves, 1.0)
    assert not {"r0", "r1", "r2"} & set(stopped)
    assert "behind" in stopped and stopped["behind"] <= 12
    assert "ahead" not in stopped
    # judged by its pace instead, the hopeless trial runs far longer
    pace = _sweep(MarginalRoiStopping(StoppingRule(min_relative_roi=0.1, max_epochs=60)), curves, 1.0)
    assert pace.get("behind", 60) > stopped["behind"]


def test_expected_rule_cuts_the_reference_story_short_of_400_epochs() -> None:
    story = [
        0.1821 + 0.5 * (60 - e) / 60 if e <= 60 else 0.1821 - 0.0003 * (e - 60) / 340 for e in range(1, 401)
    ]
    rule = StoppingRule(min_relative_roi=0.1, max_epochs=400, expected=True)
    stopped = _sweep(MarginalRoiStopping(rule), {"t": story}, 1.0)
    assert 60 < stopped["t"] < 200


@settings(max_examples=30, deadline=None)
@given(scale=st.floats(1e-3, 1e3), shift=st.floats(-100.0, 100.0), price=st.floats(1e-2, 1e2))
def test_expected_rule_is_free_of_the_metrics_scale_and_the_price(scale, shift, price) -> None:
    curves = {
        "a": _power_law(0.30, 0.5, 0.8, 50),
        "b": _power_law(0.20, 0.9, 0.3, 50),
        "c": _power_law(0.45, 0.2, 1.5, 50),
        "d": _power_law(0.25, 0.6, 0.5, 50),
        "e": _power_law(0.35, 0.6, 0.5, 50),
    }
    rule = StoppingRule(min_relative_roi=0.3, max_epochs=50, expected=True)
    reference = _sweep(MarginalRoiStopping(rule), curves, 1.0)
    moved = {k: [shift + scale * x for x in v] for k, v in curves.items()}
    assert _sweep(MarginalRoiStopping(rule), moved, price) == reference
    assert reference, "someone stops"


def test_expected_rule_needs_rho_and_a_horizon() -> None:
    with pytest.raises(ConfigError, match="stopping.expected"):
        StoppingRule(expected=True, max_epochs=50)
    with pytest.raises(ConfigError, match="stopping.expected"):
        StoppingRule(expected=True, min_relative_roi=0.1)
    assert StopReason.MARGINAL_ROI.value == "marginal_roi"
