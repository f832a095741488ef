from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costtune.core.policy import AsyncHyperband, Decision, StopReason, bracket_weights
from costtune.errors import ConfigError

# Recorded-style curves: val_loss per epoch (epochs 1..9) of six configurations.
CURVES = {
    "t0": [0.5 / e for e in range(1, 10)],
    "t1": [0.4 / e for e in range(1, 10)],
    "t2": [0.6 / e for e in range(1, 10)],
    "t3": [0.3 / e for e in range(1, 10)],
    "t4": [0.7 / e for e in range(1, 10)],
    "t5": [0.2] * 9,  # flat: looks best at epoch 1, worst at epoch 3
}


def _run_one_worker(policy: AsyncHyperband, curves: dict[str, list[float]], cost_per_epoch: float = 1.0):
    """One worker: each trial trains until the policy stops it. Returns (trial, stop epoch, reason)."""
    log = []
    for trial, curve in curves.items():
        policy.on_add(trial)
        for epoch, loss in enumerate(curve, start=1):
            if policy.on_result(trial, epoch, loss, cost_per_epoch * epoch) is Decision.STOP:
                log.append((trial, epoch, policy.stop_reason(trial)))
                break
    return log


def test_golden_decisions_on_recorded_curves() -> None:
    # rungs at 1 and 3 epochs (η = 3), max 9. Worked by hand:
    #  t0 first at both rungs → on; t1 best so far at both → on; t2 3rd of 3 at rung 1
    #  (share 1) → pruned; t3 best → on; t4 5th of 5 → pruned; t5 best at rung 1 (0.2)
    #  but 4th of 4 at rung 3 (0.2 > 0.1667) → pruned at epoch 3.
    policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1)
    assert _run_one_worker(policy, CURVES) == [
        ("t0", 9, StopReason.COMPLETED),
        ("t1", 9, StopReason.COMPLETED),
        ("t2", 1, StopReason.RUNG_PRUNED),
        ("t3", 9, StopReason.COMPLETED),
        ("t4", 1, StopReason.RUNG_PRUNED),
        ("t5", 3, StopReason.RUNG_PRUNED),
    ]


def test_bracket_weights_match_hyperband_table() -> None:
    # Li et al. (2018), R = 27, η = 3: n = 27, 12, 6, 4 for s = 3, 2, 1, 0
    assert bracket_weights(4, 3) == [27, 12, 6, 4]
    assert bracket_weights(2, 5) == [5, 2]


def test_brackets_are_assigned_in_hyperband_proportions_without_randomness() -> None:
    first = AsyncHyperband(max_epochs=27, grace_epochs=1, eta=3, brackets=None)
    second = AsyncHyperband(max_epochs=27, grace_epochs=1, eta=3, brackets=None)
    a = [first.on_add(f"t{i}") for i in range(49)]
    b = [second.on_add(f"x{i}") for i in range(49)]
    assert a == b
    assert Counter(a) == {0: 27, 1: 12, 2: 6, 3: 4}


def test_a_bracket_starts_its_trials_at_grace_times_eta_to_the_s() -> None:
    policy = AsyncHyperband(max_epochs=50, grace_epochs=5, eta=5, brackets=None)
    assert policy.rungs_by_bracket == [[5, 25], [25]]
    assert AsyncHyperband(max_epochs=50).rungs_by_bracket == [[5, 25]]  # the default: one bracket


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"brackets": 3}, "scheduler.brackets"),
        ({"eta": 1}, "scheduler.eta"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, field) -> None:
    with pytest.raises(ConfigError, match=f"^{field}:"):
        AsyncHyperband(max_epochs=50, **kwargs)


def test_state_dict_round_trip_continues_with_the_same_decisions() -> None:
    whole = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3)
    expected = _run_one_worker(whole, CURVES)
    first_half = dict(list(CURVES.items())[:3])
    second_half = dict(list(CURVES.items())[3:])
    before = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3)
    log = _run_one_worker(before, first_half)
    after = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3)
    after.load_state_dict(json.loads(json.dumps(before.state_dict())))
    log += _run_one_worker(after, second_half)
    assert log == expected


curve_sets = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=3),
    st.lists(st.floats(0, 5, allow_nan=False), min_size=27, max_size=27),
    min_size=1,
    max_size=12,
)


@settings(max_examples=50, deadline=None)
@given(curve_sets, st.randoms(use_true_random=False))
def test_a_stopped_trial_never_continues_and_stops_only_at_rungs(curves, rnd) -> None:
    policy = AsyncHyperband(max_epochs=27, grace_epochs=1, eta=3)
    epoch = dict.fromkeys(curves, 0)
    stopped: dict[str, int] = {}
    live = list(curves)
    for t in live:
        policy.on_add(t)
    while live:  # random interleaving of asynchronous workers
        t = rnd.choice(live)
        epoch[t] += 1
        d = policy.on_result(t, epoch[t], curves[t][epoch[t] - 1], cost_usd=epoch[t] * (1 + len(t)))
        if d is Decision.STOP:
            stopped[t] = epoch[t]
            live.remove(t)
    for t, at in stopped.items():
        ladder = policy.rungs_by_bracket[policy.trials[t].bracket]
        assert at in [*ladder, 27]
        assert policy.on_result(t, at + 1, 0.0, 0.0) is Decision.STOP


def test_saved_rung_state_is_refused_by_a_scheduler_of_another_geometry() -> None:
    from costtune.errors import ConfigError

    ran = AsyncHyperband(max_epochs=27, grace_epochs=1, eta=3)
    ran.on_add("a")
    ran.on_result("a", 1, 0.5, 0.1)
    state = ran.state_dict()
    same = AsyncHyperband(max_epochs=27, grace_epochs=1, eta=3)
    same.load_state_dict(state)
    assert same.state_dict() == state
    with pytest.raises(ConfigError, match=r"^scheduler state: .*eta 3 then, 4 now"):
        AsyncHyperband(max_epochs=27, grace_epochs=1, eta=4).load_state_dict(state)
    # a state saved when the rungs' rule and count were options reads as today's where they
    # held today's rule; any other is refused
    old = {**state, "geometry": {**state["geometry"], "promotion": "loss", "keep": "floor"}}
    same.load_state_dict(old)
    assert same.state_dict() == state
    for key, value in (("keep", "ceil"), ("promotion", "pareto")):
        other = {**state, "geometry": {**state["geometry"], key: value}}
        with pytest.raises(ConfigError, match=rf"{key} '{value}' then, None now"):
            AsyncHyperband(max_epochs=27, grace_epochs=1, eta=3).load_state_dict(other)


# ----------------------------------------------------------------- look-ahead between rungs
def test_state_with_a_word_for_a_number_is_refused() -> None:
    state = AsyncHyperband(max_epochs=50).state_dict()
    state["rungs"][0]["5"]["t"] = ["lots", 1.0]
    with pytest.raises(ConfigError, match=r"^scheduler state: 'lots' is not a number"):
        AsyncHyperband(max_epochs=50).load_state_dict(state)


def test_a_diverged_trial_is_saved_as_strict_json_and_read_back() -> None:
    """A NaN loss is saved as a string every JSON parser reads and comes back as NaN."""
    policy = AsyncHyperband(max_epochs=50, grace_epochs=5, eta=5)
    _run_one_worker(policy, CURVES)
    policy.on_add("nan")
    for epoch in range(1, 6):
        policy.on_result("nan", epoch, math.nan, 0.1 * epoch)
    text = json.dumps(policy.state_dict(), allow_nan=False)  # raises on Infinity/NaN tokens
    restored = AsyncHyperband(max_epochs=50, grace_epochs=5, eta=5)
    restored.load_state_dict(json.loads(text))
    assert math.isnan(restored.rungs[0][5]["nan"].loss)
    assert restored.state_dict() == policy.state_dict()


def test_once_no_configuration_is_left_a_stopped_trial_that_makes_its_rungs_cut_is_taken_up() -> None:
    policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1)  # rungs at 1 and 3
    # at the first rung, in this order: a promoted (first), b..e stopped (not in the top third so far)
    for trial_id, loss in [("a", 0.1), ("b", 0.9), ("c", 0.8), ("d", 0.7), ("e", 0.3), ("f", 0.6)]:
        policy.on_result(trial_id, 1, loss, 1.0)
    assert policy.stop_reason("e") is StopReason.RUNG_PRUNED
    # six at the rung: its cut is the top two, a and e; only e of the stopped ones makes it
    assert policy.next_promotion(candidates={"b", "c", "d", "f"}) is None  # e cannot go on
    assert policy.next_promotion() == "e" and policy.stop_reason("e") is None
    assert policy.next_promotion() is None  # nothing else makes the cut: the sweep ends
    assert policy.on_result("e", 2, 0.3, 2.0) is Decision.CONTINUE  # judged again at its next rung
    policy.on_result("a", 3, 0.1, 3.0)
    assert policy.on_result("e", 3, 0.3, 3.0) is Decision.STOP  # second of two at epoch 3: stopped
    assert policy.next_promotion() is None
    # four more reach epoch 3, each best at epoch 1 and worse than e at epoch 3: six there, and
    # e, second of them, makes that rung's cut now; it is taken up again from there
    for k, trial_id in enumerate("ghij"):
        assert policy.on_result(trial_id, 1, 0.04 - 0.01 * k, 1.0) is Decision.CONTINUE
        policy.on_result(trial_id, 2, 0.4, 2.0)
        assert policy.on_result(trial_id, 3, 0.5 + 0.1 * k, 3.0) is Decision.STOP
    saved = policy.state_dict()
    assert policy.next_promotion() == "e"
    restored = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1)
    restored.load_state_dict(saved)  # what a waiting trial needs survives a saved state
    assert restored.stop_reason("e") is StopReason.RUNG_PRUNED and restored.next_promotion() == "e"
