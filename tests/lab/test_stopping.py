"""The benchmarks' stopping rules (``benchmarks/lab/stopping.py``): the slope rule, the relative
rule with its best-trial spare and its noise-aware reading. costtune does not ship them;
``families.py`` ablates them against the rungs alone."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costtune.core.policy import StopReason
from costtune.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from lab.stopping import LabStopping as MarginalRoiStopping
from lab.stopping import LabStoppingRule as StoppingRule
from lab.stopping import epoch_noise

from tests.policy.test_stopping import _run, reference_curve


def test_slope_rule_cuts_the_reference_story_soon_after_it_goes_flat() -> None:
    rule = StoppingRule(min_slope_per_device_hour=0.0001, window_epochs=5, min_epochs=5)
    epoch, reason = _run(MarginalRoiStopping(rule), reference_curve(), hours_per_epoch=1.0)
    assert reason is StopReason.MARGINAL_ROI
    assert 60 < epoch <= 60 + 2 * 5 + 5  # the EMA needs a few epochs to see the plateau


def _sweep(stopping: MarginalRoiStopping, curves: dict[str, list[float]], usd_per_epoch: float):
    """Run trials one after another (as one worker would); return where each stopped."""
    stopped = {}
    for trial_id, curve in curves.items():
        for epoch, loss in enumerate(curve, start=1):
            hours = epoch * usd_per_epoch / 2.5
            if stopping.on_result(trial_id, loss, hours, epoch * usd_per_epoch) is not None:
                stopped[trial_id] = epoch
                break
    return stopped


def _power_law(c: float, a: float, alpha: float, epochs: int = 60) -> list[float]:
    return [c + a * e**-alpha for e in range(1, epochs + 1)]


def test_relative_rule_cuts_the_reference_story_soon_after_it_goes_flat() -> None:
    rule = StoppingRule(min_relative_roi=0.1, window_epochs=5, min_epochs=5)
    epoch, reason = _run(MarginalRoiStopping(rule), reference_curve())
    assert reason is StopReason.MARGINAL_ROI
    assert 60 < epoch <= 60 + 2 * 5 + 5
    # sparing the best trial, the rule waits until its last doubling of epochs stops paying:
    # still far short of 400 epochs
    spared = StoppingRule(min_relative_roi=0.1, spare_best=True, max_epochs=400)
    epoch, reason = _run(MarginalRoiStopping(spared), reference_curve())
    assert reason is StopReason.MARGINAL_ROI
    assert 110 < epoch <= 130


def test_relative_rule_never_stops_a_curve_that_keeps_its_pace() -> None:
    # a steady fall buys as much per dollar as the sweep has bought: at any scale and price
    for scale, price in ((1e-4, 0.01), (1.0, 2.5), (1e3, 400.0)):
        curve = [scale * (10.0 - 0.05 * e) for e in range(1, 150)]
        rule = StoppingRule(min_relative_roi=0.5, window_epochs=5, min_epochs=5)
        assert _run(MarginalRoiStopping(rule), curve, usd_per_hour=price) is None


@settings(max_examples=40, deadline=None)
@given(
    scale=st.floats(1e-3, 1e3),
    shift=st.floats(-100.0, 100.0),
    price=st.floats(1e-2, 1e2),
    rho=st.sampled_from([0.05, 0.1, 0.3, 1.0]),
)
def test_relative_rule_is_free_of_the_metrics_scale_and_the_price(scale, shift, price, rho) -> None:
    curves = {
        "a": _power_law(0.30, 0.5, 0.8),
        "b": _power_law(0.20, 0.9, 0.3),
        "c": _power_law(0.45, 0.2, 1.5),
        "d": _power_law(0.25, 0.6, 0.5),
    }
    rule = StoppingRule(min_relative_roi=rho, window_epochs=5, min_epochs=5)
    reference = _sweep(MarginalRoiStopping(rule), curves, usd_per_epoch=1.0)
    moved = {k: [shift + scale * x for x in v] for k, v in curves.items()}
    assert _sweep(MarginalRoiStopping(rule), moved, usd_per_epoch=price) == reference
    assert reference, "the flattening power laws stop somewhere"


def test_relative_rule_is_judged_against_what_the_sweep_bought() -> None:
    # the same slow curve: kept in a sweep that has bought little per dollar, stopped in one
    # whose first trial fell fast
    slow = [1.0 - 0.001 * e for e in range(1, 40)]
    rule = StoppingRule(min_relative_roi=0.5, window_epochs=5, min_epochs=5)
    patient = _sweep(
        MarginalRoiStopping(rule), {"flat": [1.0 - 0.0008 * e for e in range(1, 40)], "slow": slow}, 1.0
    )
    assert "slow" not in patient
    eager = _sweep(MarginalRoiStopping(rule), {"fast": _power_law(0.1, 1.0, 0.2, 40), "slow": slow}, 1.0)
    assert eager["slow"] <= 10


def test_relative_rule_counts_a_replayed_trial_once() -> None:
    rule = StoppingRule(min_relative_roi=0.1, window_epochs=5, min_epochs=5)
    live = MarginalRoiStopping(rule)
    curve = _power_law(0.2, 1.0, 0.7, 20)
    _sweep(live, {"a": curve}, 1.0)
    rate = live.sweep_rate
    live.forget("a")  # a resume replays the trial's history into the same stopper
    _sweep(live, {"a": curve}, 1.0)
    assert rate > 0 and live.sweep_rate == pytest.approx(rate)


def test_bad_relative_roi_names_the_field() -> None:
    with pytest.raises(ConfigError, match="stopping.min_relative_roi"):
        StoppingRule(min_relative_roi=-0.1)


def test_sparing_the_best_judges_it_against_the_horizon_not_its_pace() -> None:
    # slow power laws (the kind of curve a pace rule cuts short); t0 is the best
    def best_stopped_at(spare: bool, horizon: int) -> int | None:
        curves = {f"t{i}": _power_law(0.2 + 0.02 * i, 1.0, 0.3, horizon) for i in (3, 0, 5, 1, 4, 2)}
        rule = StoppingRule(min_relative_roi=0.3, spare_best=spare, max_epochs=horizon)
        return _sweep(MarginalRoiStopping(rule), curves, 1.0).get("t0")

    pace = best_stopped_at(False, 200)
    assert pace is not None and pace == best_stopped_at(False, 400)  # blind to the horizon
    spared_200, spared_400 = best_stopped_at(True, 200), best_stopped_at(True, 400)
    assert spared_200 is not None and spared_400 is not None
    assert pace < spared_200 < spared_400 < 400  # more epochs to gain, longer run; still stopped


# ------------------------------------------------------------- noise-aware relative rule
def test_epoch_noise_reads_the_noise_not_the_curve() -> None:
    rng = np.random.default_rng(0)
    smooth = _power_law(0.3, 2.0, 0.6)
    assert epoch_noise(smooth[20:32]) < 1e-3  # a smooth curve's bend is not noise
    assert epoch_noise([0.5 - 0.01 * e for e in range(12)]) == pytest.approx(0.0, abs=1e-12)
    estimates = [epoch_noise(list(0.4 + 0.05 * rng.standard_normal(12))) for _ in range(400)]
    assert float(np.median(estimates)) == pytest.approx(0.05, rel=0.15)
    spiked = [0.4] * 12
    spiked[6] = 9.0  # one broken validation pass
    assert epoch_noise(spiked) == 0.0
    assert epoch_noise([1.0, 0.5]) == 0.0  # too short to tell


def _noisy_sweep(seed: int, pace: float) -> dict[str, list[float]]:
    """A sweep under epoch noise σ = 0.03: a fast power law, a flat trial, a slow improver at
    ``pace`` per epoch (0.003 pays for itself at ρ = 0.3 here, 0.001 does not), and a smooth flat
    trial."""
    rng = np.random.default_rng(seed)
    return {
        "fast": [
            x + 0.03 * float(z)
            for x, z in zip(_power_law(0.2, 1.0, 1.5, 60), rng.standard_normal(60), strict=True)
        ],
        "noisy": [0.6 + 0.03 * float(z) for z in rng.standard_normal(120)],
        "slow": [0.6 - pace * e + 0.03 * float(z) for e, z in enumerate(rng.standard_normal(120), 1)],
        "flat": [0.6] * 120,
    }


@pytest.mark.parametrize("seed", range(3))
def test_noise_aware_rule_does_not_stop_a_noisy_slow_improver_for_its_noise(seed: int) -> None:
    # a window's gain is noise there, and the plain rule stops a slow improver as if it were
    # flat; noise-aware, a stop waits while the window cannot measure the gain that matters:
    # an improver that pays runs on, one that does not is stopped once half its run shows it,
    # a noisy flat trial later, a smooth flat one as without the rule
    def stops(noise_aware: bool, pace: float) -> dict[str, int]:
        rule = StoppingRule(min_relative_roi=0.3, window_epochs=5, min_epochs=5, noise_aware=noise_aware)
        return _sweep(MarginalRoiStopping(rule), _noisy_sweep(seed, pace), 1.0)

    plain, aware = stops(False, 0.003), stops(True, 0.003)
    assert plain["slow"] <= 10 and plain["noisy"] <= 10 and plain["flat"] == 6
    assert "slow" not in aware  # ran its 120 epochs
    assert 20 <= aware["noisy"] <= 40 and aware["flat"] == plain["flat"]
    too_slow = stops(True, 0.001)["slow"]
    assert 20 <= too_slow < 120 and too_slow > 2 * stops(False, 0.001)["slow"]


def test_noise_aware_rule_stops_smooth_and_overfitting_curves_as_the_plain_rule() -> None:
    # noise small against the gains that matter, or a loss that rose far beyond its noise
    # (an overfitting bend with a little jitter): the same stops as without the rule
    rng = np.random.default_rng(4)
    curves = {
        f"t{i}": _power_law(float(c), float(a), float(alpha), 80)
        for i, (c, a, alpha) in enumerate(
            zip(rng.uniform(0.2, 0.5, 6), rng.uniform(0.5, 2, 6), rng.uniform(0.3, 1.5, 6), strict=True)
        )
    }
    curves["overfit"] = [
        0.3 + 0.5 / e + 0.0004 * max(e - 12, 0) ** 2 + 0.002 * float(z)
        for e, z in enumerate(rng.standard_normal(80), 1)
    ]
    for window in (5, 10):
        rule = StoppingRule(min_relative_roi=0.3, window_epochs=window, min_epochs=5)
        plain = _sweep(MarginalRoiStopping(rule), curves, 1.0)
        aware = _sweep(MarginalRoiStopping(dataclasses.replace(rule, noise_aware=True)), curves, 1.0)
        assert "overfit" in plain
        assert aware == plain
