from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costtune.core.policy import (
    Governor,
    MarginalRoiStopping,
    StoppingRule,
    StopReason,
    SweepBudget,
    SweepProgress,
    cap_reason,
)
from costtune.errors import ConfigError


def _run(
    stopping: MarginalRoiStopping, curve: list[float], hours_per_epoch: float = 1.0, usd_per_hour: float = 2.5
):
    for epoch, loss in enumerate(curve, start=1):
        reason = stopping.on_result(
            "t", loss, epoch * hours_per_epoch, epoch * hours_per_epoch * usd_per_hour
        )
        if reason is not None:
            return epoch, reason
    return None


def reference_curve(epochs: int = 400) -> list[float]:
    """The reference story: val loss falls fast, then crawls from 0.1821 at epoch 60 to 0.1818."""
    out = []
    for e in range(1, epochs + 1):
        if e <= 60:
            out.append(0.1821 + 0.5 * (60 - e) / 60)
        else:
            out.append(0.1821 - 0.0003 * (e - 60) / (epochs - 60))
    return out


def test_marginal_roi_rule_uses_business_value_per_dollar() -> None:
    # at $2.50 per hour, 0.0001 loss/hour is worth $1000 × 0.0001 / 2.5 = $0.04 per $
    rule = StoppingRule(min_marginal_roi=1.0, window_epochs=5)
    epoch, reason = _run(MarginalRoiStopping(rule, business_value_usd=1000.0), reference_curve())
    assert reason is StopReason.MARGINAL_ROI and epoch > 60
    # worth $10M per unit of loss, the plateau still pays
    rich = MarginalRoiStopping(rule, business_value_usd=1e7)
    assert _run(rich, reference_curve()) is None


def test_a_single_spike_in_a_steep_descent_does_not_stop_the_trial() -> None:
    curve = [1.0 - 0.01 * e for e in range(60)]
    curve[30] = 5.0  # one broken validation pass
    curve[31] = 0.0  # and one lucky one
    rule = StoppingRule(min_marginal_roi=0.001, window_epochs=5)
    assert _run(MarginalRoiStopping(rule), curve) is None
    # the same rule stops it once the descent ends
    epoch, reason = _run(MarginalRoiStopping(rule), curve[:30] + [curve[29]] * 30)
    assert reason is StopReason.MARGINAL_ROI and 30 < epoch <= 30 + 2 * 5 + 5


def test_patience_counts_epochs_without_a_min_delta_improvement() -> None:
    rule = StoppingRule(patience_epochs=3, min_delta=0.01, min_epochs=1)
    curve = [1.0, 0.9, 0.895, 0.893, 0.892, 0.5]
    assert _run(MarginalRoiStopping(rule), curve) == (5, StopReason.PATIENCE)


def test_nothing_stops_before_min_epochs() -> None:
    rule = StoppingRule(patience_epochs=1, min_epochs=10)
    assert _run(MarginalRoiStopping(rule), [1.0] * 9) is None


def test_bad_rule_names_the_field() -> None:
    with pytest.raises(ConfigError, match="^stopping.window_epochs:"):
        StoppingRule(window_epochs=0)


@pytest.mark.parametrize(
    ("seconds", "usd", "expected"),
    [(100, 10, None), (48 * 3600, 10, StopReason.TRIAL_TIME_CAP), (100, 300, StopReason.TRIAL_COST_CAP)],
)
def test_cap_reason_defaults(seconds, usd, expected) -> None:
    assert cap_reason(seconds, usd, 48, 300) is expected


def test_budget_refuses_a_trial_whose_first_rung_it_cannot_pay() -> None:
    budget = SweepBudget(max_cost_usd=10.0)
    assert budget.can_start(5)  # nothing metered yet: no price known
    budget.record("a", 4, 8.0)  # $2 per epoch so far
    assert budget.first_rung_usd(5) == 10.0
    assert not budget.can_start(5)  # $2 left, a first rung costs $10
    assert budget.can_start(1)


def test_governor_ends_a_hung_trial_at_its_cap_and_charges_the_time_held() -> None:
    governor = Governor(usd_per_second=1 / 3600, max_hours_per_trial=2.0)
    governor.on_start("t", now=0.0)
    assert governor.on_result("t", 1, seconds=3600.0, now=3600.0) is None
    assert governor.overdue("t", now=5000.0) is None
    assert governor.overdue("t", now=3600.0 + 3600.0) is StopReason.TRIAL_TIME_CAP
    assert governor.extra_seconds["t"] == 3600.0


def test_sweep_progress_stops_when_the_best_stops_improving_per_dollar() -> None:
    progress = SweepProgress(min_improvement_per_usd=0.001, window_epochs=3)
    for i, loss in enumerate([1.0, 0.5, 0.4, 0.39, 0.389, 0.3889]):
        progress.record(loss, sweep_spent_usd=10.0 * (i + 1))
    assert progress.should_stop()


# ------------------------------------------------------------------ properties
trials_costs = st.lists(st.lists(st.floats(0.01, 5.0), min_size=1, max_size=40), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(
    trials_costs,
    st.floats(1.0, 50.0),
    st.floats(0.5, 20.0),
    st.integers(1, 4),
    st.randoms(use_true_random=False),
)
def test_spend_never_exceeds_a_cap_by_more_than_one_step_per_running_trial(
    per_epoch_usd, sweep_cap, trial_cap, concurrency, rnd
) -> None:
    """Drive the governor like an asynchronous sweep: caps and budget hold to one step."""
    governor = Governor(usd_per_second=1.0, max_cost_usd_per_trial=trial_cap, budget=SweepBudget(sweep_cap))
    pending = list(range(len(per_epoch_usd)))
    running: dict[int, tuple[int, float]] = {}
    stopped: set[int] = set()
    overshoot_allowance = 0.0
    while pending or running:
        while pending and len(running) < concurrency:
            t = pending.pop(0)
            if not governor.can_start():
                stopped.add(t)
                continue
            running[t] = (0, 0.0)
        if not running:
            break
        t = rnd.choice(sorted(running))
        epoch, spent = running[t]
        step = per_epoch_usd[t][epoch % len(per_epoch_usd[t])]
        spent += step
        reason = governor.on_result(str(t), epoch + 1, spent, now=0.0)  # usd_per_second = 1
        if reason is StopReason.SWEEP_BUDGET or governor.budget.exhausted():
            # every other running trial may report one more step before it is stopped
            overshoot_allowance = step + sum(max(per_epoch_usd[o]) for o in running if o != t)
            stopped.update(running)
            running.clear()
            stopped.update(pending)
            pending.clear()
            break
        if reason is not None or epoch + 1 >= 40:
            assert reason is None or spent < trial_cap + step + 1e-9
            running.pop(t)
            stopped.add(t)
        else:
            running[t] = (epoch + 1, spent)
    for spent in governor.budget.spent_by_trial.values():
        assert spent < trial_cap + 5.0 + 1e-9
    assert governor.budget.spent_usd <= sweep_cap + overshoot_allowance + 1e-9
    assert not math.isnan(governor.budget.spent_usd)


# ------------------------------------------------------------- the scale-free relative rule
def test_a_trial_at_max_epochs_has_completed_not_stopped() -> None:
    rule = StoppingRule(patience_epochs=1, min_epochs=1, max_epochs=3)
    assert _run(MarginalRoiStopping(rule), [1.0, 1.0, 1.0, 1.0]) == (2, StopReason.PATIENCE)
    assert (
        _run(MarginalRoiStopping(StoppingRule(patience_epochs=2, min_epochs=1, max_epochs=3)), [1.0] * 3)
        is None
    )
