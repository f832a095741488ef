"""The scale-free outlook rule: stop a trial whose optimistic future cannot beat the sweep's best."""

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

from lab.outlook import OutlookRule, OutlookStopping, outlook, smoothed


def test_outlook_of_a_curve_linear_in_log_epochs_is_its_true_end() -> None:
    # m(t) = 1 − 0.1·log2(t): falls 0.1 per doubling; at T = 64 it ends at 0.4
    curve = [1 - 0.1 * math.log2(t) for t in range(1, 9)]
    assert outlook(curve, 64) == pytest.approx(0.4)
    assert outlook(curve, 64, optimism=2.0) == pytest.approx(1 - 0.3 - 2 * 0.3)
    assert outlook(curve, 8) == curve[-1]  # at max_epochs there is no future


def test_flat_and_power_law_curves_end_no_lower_than_their_outlook() -> None:
    assert outlook([0.5] * 10, 100) == 0.5
    # a power law y = 0.2 + t^-0.5 decays faster than linear-in-log: the outlook is optimistic
    curve = [0.2 + t**-0.5 for t in range(1, 11)]
    assert outlook(curve, 100) < 0.2 + 100**-0.5


def test_smoothing_ignores_a_single_spike_and_never_rises() -> None:
    assert smoothed([1.0, 0.8, 5.0, 0.6], window=3) == [1.0, 0.9, 0.9, 0.8]
    assert smoothed([1.0, math.nan, 0.5], window=3) == [1.0, 1.0, 0.75]


def _feed(rule: OutlookRule, curves: dict[str, list[float]]) -> dict[str, tuple[int, StopReason] | None]:
    """One worker, curves in order; where each stopped (or None: ran to the end)."""
    stopper = OutlookStopping(rule)
    out: dict[str, tuple[int, StopReason] | None] = {}
    for trial, curve in curves.items():
        out[trial] = None
        for epoch, loss in enumerate(curve, start=1):
            reason = stopper.on_result(trial, loss)
            if reason is not None:
                out[trial] = (epoch, reason)
                break
    return out


def test_a_flat_trial_behind_the_best_stops_and_a_steep_late_bloomer_goes_on() -> None:
    best = [1.0 / math.sqrt(t) for t in range(1, 41)]  # ends at 0.158
    flat = [0.9 - 0.01 * t for t in range(1, 6)] + [0.85] * 35  # flat from epoch 5, far behind
    # behind the best all along until late (0.35 > 0.316 at epoch 10), but steeper: ends at 0.129
    bloomer = [0.02 + 3.0 * t**-0.9 for t in range(1, 41)]
    stops = _feed(OutlookRule(max_epochs=40), {"best": best, "flat": flat, "bloomer": bloomer})
    assert stops["best"] is None  # the incumbent never stops on this rule
    assert stops["flat"] is not None and stops["flat"][1] is StopReason.OUTLOOK and stops["flat"][0] <= 8
    assert stops["bloomer"] is None  # its outlook stayed below the best while it fell


def test_no_decision_before_min_epochs_and_optimism_zero_is_plain_comparison() -> None:
    curves = {"a": [0.1] * 10, "b": [0.5, 0.4, 0.3, 0.29, 0.28, 0.27]}
    strict = _feed(OutlookRule(max_epochs=10, optimism=0.0, min_epochs=4), curves)
    assert strict["b"] == (4, StopReason.OUTLOOK)  # behind the best, no optimism: stops at once
    patient = _feed(OutlookRule(max_epochs=10, optimism=0.0, min_epochs=6), curves)
    assert patient["b"] == (6, StopReason.OUTLOOK)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(0.01, 10.0, allow_nan=False), min_size=1, max_size=20), min_size=1, max_size=6
    ),
    st.floats(0.0, 4.0),
)
def test_the_trial_holding_the_best_smoothed_loss_is_never_stopped(curves, optimism) -> None:
    """Asynchronous interleaving too: trials report round-robin. Same inputs, same decisions."""
    logs = []
    for _ in range(2):
        stopper = OutlookStopping(OutlookRule(max_epochs=20, optimism=optimism, min_epochs=2))
        stopped: dict[str, int] = {}
        for epoch in range(max(len(c) for c in curves)):
            for i, curve in enumerate(curves):
                trial = f"t{i}"
                if trial in stopped or epoch >= len(curve):
                    continue
                reason = stopper.on_result(trial, curve[epoch])
                if reason is not None:
                    stopped[trial] = epoch
                    assert smoothed(curve[: epoch + 1], 3)[-1] > stopper.incumbent  # behind the best
        assert len(stopped) < len(curves)  # someone holds the best
        logs.append(stopped)
    assert logs[0] == logs[1]


def test_bad_rule_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"^stopping\.outlook\.optimism: must be a number >= 0"):
        OutlookRule(max_epochs=10, optimism=-1.0)
    with pytest.raises(ConfigError, match=r"^stopping\.outlook\.min_epochs: must be >= 2"):
        OutlookRule(max_epochs=10, min_epochs=1)
