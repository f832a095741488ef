"""The benchmarks' scheduling mechanisms (``benchmarks/lab/hyperband.py``): escalation and
the hedge, the warm-up, the look-ahead, the rung checks and the rank readings. costtune does
not ship them; ``families.py`` ablates them against the rungs alone."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from lab.hyperband import LabHyperband

from costtune.core.policy import Decision, StopReason
from costtune.errors import ConfigError
from tests.policy.test_hyperband import CURVES, _run_one_worker


def _lookahead_curves(n: int, informative: bool = True) -> dict[str, list[float]]:
    """n trials, 10 epochs each (rungs at 5 and 25 for η = 5): trial i starts at loss 1 + i/n
    and ends by its rank. Informative: epoch-1 rank = epoch-5 rank. Not: reversed."""
    curves = {}
    for i in range(n):
        start = 1.0 + i / n
        end = 0.5 + (i if informative else n - i) / (10 * n)
        curves[f"t{i:03d}"] = [start + (end - start) * (e - 1) / 4 if e <= 5 else end for e in range(1, 11)]
    return curves


def test_warmup_first_rung_promotes_nobody_until_it_holds_w_trials() -> None:
    # the golden run above with warmup_trials=3: t0 and t1 (each the best so far) now stop at
    # rung 1; t2 is the 3rd there but not the best; t3 (best of 4) is promoted, and so on as
    # before. The second rung (epoch 3) is not warmed up: t3, the first to reach it, goes on.
    policy = LabHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, warmup_trials=3)
    assert _run_one_worker(policy, CURVES) == [
        ("t0", 1, StopReason.RUNG_PRUNED),
        ("t1", 1, StopReason.RUNG_PRUNED),
        ("t2", 1, StopReason.RUNG_PRUNED),
        ("t3", 9, StopReason.COMPLETED),
        ("t4", 1, StopReason.RUNG_PRUNED),
        ("t5", 3, StopReason.RUNG_PRUNED),
    ]
    # warmed up or not, the rung holds every arrival: the cut after the warm-up compares with them
    assert len(policy.rungs[0][1]) == 6


def test_warmup_applies_to_each_brackets_first_rung() -> None:
    policy = LabHyperband(max_epochs=27, grace_epochs=1, eta=3, brackets=2, warmup_trials=2)
    by_bracket: dict[int, list[Decision]] = {0: [], 1: []}
    loss = 1.0
    for k in range(20):  # each arrival better than every one before: promoted unless warming up
        bracket = policy.on_add(f"t{k}")
        loss /= 2
        by_bracket[bracket].append(policy.on_result(f"t{k}", policy.rungs_by_bracket[bracket][0], loss, 1.0))
    assert all(len(d) >= 2 for d in by_bracket.values())
    # each bracket's first arrival stops (nothing to compare with); every later, better one goes on
    assert all(d[0] is Decision.STOP and set(d[1:]) == {Decision.CONTINUE} for d in by_bracket.values())


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_warmup_trials_refuses_a_bad_value_naming_the_field(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"^scheduler\.warmup_trials: must be a positive integer"):
        LabHyperband(max_epochs=9, grace_epochs=1, eta=3, warmup_trials=bad)  # type: ignore[arg-type]


def test_lookahead_stops_a_trial_that_all_trials_as_bad_missed_the_next_rung_with() -> None:
    policy = LabHyperband(max_epochs=50, grace_epochs=5, eta=5, lookahead=10)
    curves = _lookahead_curves(30)  # arriving best first: each new trial is the worst yet
    log = {t: (e, r) for t, e, r in _run_one_worker(policy, curves)}
    # t012 is the first with 10 trials behind the cut before it: the rung holds 12, the cut
    # keeps 2 (t000, t001), and t002–t011 were all worse at epoch 1 than those 2. A pruned
    # trial still counts at its rung, below the cut, so the cut keeps max(1, ⌊n/5⌋) of all n
    # trials: at n = 15 t002 is back in the cut, 9 are behind it, and t015 runs to the rung
    # (the 10th again); so do t020 and t025. The rung's selectivity is Hyperband's, 1 in η.
    pruned = sorted(t for t, (_, r) in log.items() if r is StopReason.LOOKAHEAD_PRUNED)
    assert pruned == [f"t{i:03d}" for i in range(12, 30) if i % 5]
    assert all(log[t][0] == 1 for t in pruned)  # at epoch 1: 4 epochs of 5 not paid for
    assert log["t015"] == log["t020"] == log["t025"] == (5, StopReason.RUNG_PRUNED)
    rung = policy.rungs[0][5]
    assert len(rung) == 30 and all(rung[t].loss == float("inf") for t in pruned)
    # what a searcher is told instead of its epoch-1 loss: the best rung loss of the trials
    # behind the cut that were no worse at epoch 1 (for t012: t002's, which ended at 0.5 + 2/300)
    assert policy.rung_estimate("t012") == pytest.approx(curves["t002"][4])
    assert policy.rung_estimate("t011") is None and policy.rung_estimate("t015") is None
    # after t000–t028 (n = 29, the cut keeps 5, 10 behind it): one as good as a trial within
    # the cut goes on to its rung; one worse than any seen (a diverged run) does not
    policy = LabHyperband(max_epochs=50, grace_epochs=5, eta=5, lookahead=10)
    _run_one_worker(policy, dict(list(curves.items())[:29]))
    for trial, loss, decision in (
        ("good", curves["t001"][0], Decision.CONTINUE),
        ("bad", 9.9, Decision.STOP),
    ):
        policy.on_add(trial)
        assert policy.on_result(trial, 1, loss, 1.0) is decision


def test_lookahead_does_not_fire_where_early_ranks_say_nothing() -> None:
    """Reversed curves: the worst at epoch 1 end best. A trial as bad as any at epoch 1 is kept,
    because trials that were as bad made the cut; that is read from the sweep's own curves."""
    policy = LabHyperband(max_epochs=50, grace_epochs=5, eta=5, lookahead=5)
    curves = _lookahead_curves(30, informative=False)
    _run_one_worker(policy, curves)
    policy.on_add("late")
    assert policy.on_result("late", 1, curves["t029"][0] + 1, 1.0) is Decision.CONTINUE


def test_lookahead_needs_m_trials_of_evidence() -> None:
    curves = _lookahead_curves(30)
    # the first trial stopped is the n-th, n the first rung size with n − max(1, ⌊n/5⌋) ≥ m;
    # after it, every trial that raises ⌊n/5⌋ (and so the cut) runs to the rung
    for m, pruned in ((40, 0), (20, 5), (10, 15), (3, 22)):
        policy = LabHyperband(max_epochs=50, grace_epochs=5, eta=5, lookahead=m)
        log = _run_one_worker(policy, curves)
        assert sum(r is StopReason.LOOKAHEAD_PRUNED for _, _, r in log) == pruned, m


@settings(max_examples=30, deadline=None)
@given(st.floats(0.01, 100), st.floats(-5, 5), st.sampled_from(["exp", "square", "affine"]))
def test_lookahead_decisions_depend_only_on_the_order_of_losses(scale, shift, shape) -> None:
    """Only comparisons of losses enter the rule (and the rungs): any increasing transform of
    the metric gives the same decisions, so the rule has no units to set."""
    import math

    transform = {
        "exp": lambda x: math.exp(scale * x),
        "square": lambda x: (x + 10) ** 2,
        "affine": lambda x: scale * x + shift,
    }[shape]
    curves = _lookahead_curves(40)
    curves.update({f"u{i}": [1.5 + 0.1 * ((i * 7) % 5)] * 10 for i in range(10)})
    moved = {t: [transform(x) for x in c] for t, c in curves.items()}
    a = _run_one_worker(LabHyperband(max_epochs=50, grace_epochs=5, eta=5, lookahead=5), curves)
    b = _run_one_worker(LabHyperband(max_epochs=50, grace_epochs=5, eta=5, lookahead=5), moved)
    assert a == b and any(r is StopReason.LOOKAHEAD_PRUNED for _, _, r in a)


def test_lookahead_state_survives_a_round_trip() -> None:
    curves = _lookahead_curves(29)
    policy = LabHyperband(max_epochs=50, grace_epochs=5, eta=5, lookahead=10)
    _run_one_worker(policy, curves)
    restored = LabHyperband(max_epochs=50, grace_epochs=5, eta=5, lookahead=10)
    restored.load_state_dict(json.loads(json.dumps(policy.state_dict())))
    assert restored.curves == policy.curves and restored.estimates == policy.estimates
    for p in (policy, restored):
        p.on_add("late")
    assert [p.on_result("late", 1, curves["t021"][0], 1.0) for p in (policy, restored)] == [Decision.STOP] * 2


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "10"])
def test_lookahead_must_be_a_positive_integer(bad) -> None:
    with pytest.raises(ConfigError, match=r"^scheduler\.lookahead: must be a positive integer"):
        LabHyperband(max_epochs=50, lookahead=bad)


def test_state_is_strict_json_with_pruned_and_diverged_trials() -> None:
    """A trial the look-ahead counted below the cut (+inf) and a diverged one (NaN) are saved
    as strings every JSON parser reads, and come back as the same numbers."""
    curves = _lookahead_curves(29)
    policy = LabHyperband(max_epochs=50, grace_epochs=5, eta=5, lookahead=10)
    _run_one_worker(policy, curves)
    policy.on_add("nan")
    for epoch in range(1, 6):
        policy.on_result("nan", epoch, math.nan, 0.1 * epoch)
    text = json.dumps(policy.state_dict(), allow_nan=False)  # raises on Infinity/NaN tokens
    restored = LabHyperband(max_epochs=50, grace_epochs=5, eta=5, lookahead=10)
    restored.load_state_dict(json.loads(text))
    rung = restored.rungs[0][5]
    assert math.isinf(max(e.loss for e in rung.values()))
    assert math.isnan(rung["nan"].loss)
    for p in (policy, restored):  # the same decisions after the round trip
        p.on_add("late")
    seen = [
        [p.on_result("late", e, x, 0.1 * e) for e, x in enumerate(curves["t021"], 1)]
        for p in (policy, restored)
    ]
    assert seen[0] == seen[1] and Decision.STOP in seen[0]

    # a state saved before (Python's Infinity/NaN tokens) still reads the same
    def tokens(x):  # type: ignore[no-untyped-def]
        if isinstance(x, dict):
            return {k: tokens(v) for k, v in x.items()}
        if isinstance(x, list):
            return [tokens(v) for v in x]
        return float(x) if x in ("inf", "-inf", "nan") else x

    old_text = json.dumps(tokens(policy.state_dict()))
    assert "Infinity" in old_text and "NaN" in old_text
    legacy = LabHyperband(max_epochs=50, grace_epochs=5, eta=5, lookahead=10)
    legacy.load_state_dict(json.loads(old_text))
    assert legacy.state_dict() == policy.state_dict()


def _stalling_sweep(policy: LabHyperband, worse: int) -> None:
    """One worker, a dollar an epoch: the first trial improves to epoch 9 (the best, $9 spent),
    then ``worse`` trials, each worse than every one before it, stop at the first rung."""
    _run_one_worker(policy, {"best": [0.5 / e for e in range(1, 10)]})
    _run_one_worker(policy, {f"w{i:02d}": [1.0 + i / 100] * 9 for i in range(worse)})


def test_escalate_opens_every_bracket_once_the_sweep_stalls() -> None:
    # the best last improved at $9 with 1 trial started; 9 trials and $9 later the spend since
    # equals the spend before, with η² = 9 trials since: every bracket that fits opens, and new
    # trials go to them in Hyperband's proportions (9 : 5 : 3 at η = 3), the last one with no
    # rung before epoch 9
    policy = LabHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, escalate=True)
    _stalling_sweep(policy, worse=8)
    assert policy.open_brackets == 1  # $8 and 8 trials since: not yet
    _run_one_worker(policy, {"w08": [1.08] * 9})
    assert policy.open_brackets == 3
    assert Counter(policy.on_add(f"n{i:02d}") for i in range(17)) == {0: 9, 1: 5, 2: 3}
    late = next(t for t in (f"n{i:02d}" for i in range(17)) if policy.trials[t].bracket == 2)
    assert all(policy.on_result(late, e, 2.0, float(e)) is Decision.CONTINUE for e in range(1, 9))
    # without escalate the same sweep keeps one bracket, and a trial that bad stops at epoch 1
    plain = LabHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1)
    _stalling_sweep(plain, worse=30)
    assert {s.bracket for s in plain.trials.values()} == {0}
    assert len(plain.rungs_by_bracket) == 1


def test_escalate_opens_nothing_while_the_sweep_keeps_improving() -> None:
    policy = LabHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, escalate=True)
    _run_one_worker(policy, {f"t{i:02d}": [1.0 - i / 100] * 9 for i in range(60)})  # each a new best
    assert policy.open_brackets == 1 and {s.bracket for s in policy.trials.values()} == {0}


def test_escalated_state_survives_a_round_trip_and_names_itself_in_the_geometry() -> None:
    policy = LabHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, escalate=True)
    _stalling_sweep(policy, worse=9)
    state = json.loads(json.dumps(policy.state_dict()))
    assert state["geometry"]["escalate"] is True and state["geometry"]["brackets"] == 1
    restored = LabHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, escalate=True)
    restored.load_state_dict(state)
    assert restored.open_brackets == 3
    assert [restored.on_add(f"n{i}") for i in range(17)] == [policy.on_add(f"n{i}") for i in range(17)]
    # a scheduler without escalation refuses it, naming what differs
    with pytest.raises(ConfigError, match="escalate True then, None now"):
        LabHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1).load_state_dict(state)


def _trickling_sweep(policy: LabHyperband) -> None:
    """One worker, a dollar an epoch: the first trial falls from 0.94 to 0.5 in 9 epochs, then 20
    trials, each a new best by 0.001: about a ninth of 2% of what the sweep had gained."""
    _run_one_worker(policy, {"best": [1.0 - 0.5 * e / 9 for e in range(1, 10)]})
    _run_one_worker(policy, {f"w{i:02d}": [0.5 - 0.001 * (i + 1)] * 9 for i in range(20)})


def test_a_trickle_of_tiny_gains_opens_the_brackets_with_a_stall_min_gain() -> None:
    # with stall_min_gain 0.02 the gains too small to count leave the stall where the first trial
    # ended it ($9, 1 trial): the brackets open once as much was spent since and η² trials
    # started, as if nothing had improved; counting every gain (the default) they never open
    kwargs = {"max_epochs": 9, "grace_epochs": 1, "eta": 3, "brackets": 1, "escalate": True}
    policy = LabHyperband(**kwargs, stall_min_gain=0.02)
    _trickling_sweep(policy)
    assert policy.open_brackets == 3 and policy.best_loss == pytest.approx(0.48)
    assert policy.mark_trials == 1 and policy.mark_usd == 9.0
    every_gain = LabHyperband(**kwargs)
    _trickling_sweep(every_gain)
    assert every_gain.open_brackets == 1 and every_gain.mark_trials == 21
    # a gain of 2% of the sweep's counts: the mark moves with it
    counted = LabHyperband(**kwargs, stall_min_gain=0.02)
    _run_one_worker(counted, {"best": [1.0 - 0.5 * e / 9 for e in range(1, 10)], "next": [0.49] * 9})
    assert counted.mark_trials == 2
    with pytest.raises(ConfigError, match="stall_min_gain must be in"):
        LabHyperband(max_epochs=9, escalate=True, stall_min_gain=1.5)


def test_the_first_loss_survives_a_round_trip_and_an_older_state_counts_gains_from_its_best() -> None:
    kwargs = {"max_epochs": 9, "grace_epochs": 1, "eta": 3, "brackets": 1, "escalate": True}
    policy = LabHyperband(**kwargs, stall_min_gain=0.02)
    _run_one_worker(policy, {"best": [1.0 - 0.5 * e / 9 for e in range(1, 10)]})
    state = json.loads(json.dumps(policy.state_dict()))
    restored = LabHyperband(**kwargs, stall_min_gain=0.02)
    restored.load_state_dict(state)
    assert restored.first_loss == policy.first_loss == pytest.approx(1.0 - 0.5 / 9)
    # saved before the first loss was kept: the gain counts from the saved best, so the next
    # small gain (0.001 against a gain of 0) ends the stall, as every gain did then
    del state["escalation"]["first"]
    older = LabHyperband(**kwargs, stall_min_gain=0.02)
    older.load_state_dict(state)
    assert older.first_loss == pytest.approx(0.5)
    _run_one_worker(older, {"next": [0.499] * 9})
    assert older.mark_trials == 2


# the hedge: a good first trial, then nine worse ones pruned at the first rung: the sweep has spent
# as much since its best as before, over η² trials, and stalls
STALLING = {"a": [0.9, 0.5, 0.5, 0.5, 0.5, 0.5], **{f"p{i}": [1.0, 1.0] for i in range(9)}}


def test_the_hedge_is_hyperbands_bracket_without_rungs_among_those_a_stall_opens() -> None:
    assert LabHyperband(52, 5, 5, escalate=True, hedge=True).rungs_by_bracket == [[5, 25], [25], []]
    # where the last bracket that fits has no rungs already, it is the hedge
    assert LabHyperband(8, 2, 2, escalate=True, hedge=True).rungs_by_bracket == [[2, 4], [4], []]
    assert LabHyperband(8, 2, 2, escalate=True).rungs_by_bracket == [[2, 4], [4], []]
    with pytest.raises(ConfigError, match=r"^scheduler\.hedge: needs scheduler\.escalate"):
        LabHyperband(52, 5, 5, hedge=True)
    policy = LabHyperband(6, 2, 3, 1, escalate=True, hedge=True)
    _run_one_worker(policy, STALLING)
    assert policy.open_brackets == 2 and not policy.switched
    placed = {t: policy.on_add(t) for t in ("n0", "n1", "n2", "n3", "n4")}
    hedged = [t for t, b in placed.items() if b == 1]
    ruled = [t for t, b in placed.items() if b == 0]
    assert len(hedged) >= 2 and ruled
    # the stopper's pace waits for a later bracket's first rung: never, in the one without rungs
    assert [policy.stopper_waits_until(t) for t in (hedged[0], ruled[0], "a", "unknown")] == [7, 0, 0, 0]
    assert LabHyperband(6, 2, 3, 1, escalate=True).stopper_waits_until("a") == 0
    # a full run the first rung would have kept (0.45 at epoch 2, the best there) that becomes the
    # sweep's best switches nothing: the searcher found a better configuration
    good = [0.9, 0.45, 0.4, 0.4, 0.4, 0.4]
    decisions = [policy.on_result(hedged[0], e, v, float(e)) for e, v in enumerate(good, 1)]
    assert decisions[-1] is Decision.STOP and policy.best_loss == 0.4 and not policy.switched
    assert policy.searcher_min_epochs() is None  # the searcher learns from every trial
    # a full run that stays flat, then drops: no rung judges it; the first rung would have
    # pruned it (1.05 at epoch 2, behind its cut), and once it is the sweep's best every new
    # trial is a full run
    flat_then_drop = [1.05, 1.05, 1.05, 1.05, 0.45, 0.3]
    decisions = [policy.on_result(hedged[1], e, v, float(e)) for e, v in enumerate(flat_then_drop, 1)]
    assert decisions == [Decision.CONTINUE] * 5 + [Decision.STOP]
    assert policy.stop_reason(hedged[1]) is StopReason.COMPLETED and policy.switched
    assert policy.judged_wrong == {hedged[1]} and policy.switched_at == len(policy.trials) == 15
    assert policy.searcher_min_epochs() == 6  # from now on, from the full runs alone
    assert {policy.on_add(f"m{i}") for i in range(6)} == {1}
    # the switch is saved and resumed; a state saved before the hedge existed loads without it
    saved = json.loads(json.dumps(policy.state_dict()))
    assert saved["escalation"]["switched"] and saved["geometry"]["hedge"]
    assert saved["escalation"]["judged_wrong"] == [hedged[1]]
    resumed = LabHyperband(6, 2, 3, 1, escalate=True, hedge=True)
    resumed.load_state_dict(saved)
    assert resumed.switched and resumed.judged_wrong == {hedged[1]} and resumed.on_add("later") == 1
    assert saved["escalation"]["switched_at"] == resumed.switched_at == 15
    del saved["escalation"]["switched_at"]  # saved before it was recorded: switched, when unknown
    older = LabHyperband(6, 2, 3, 1, escalate=True, hedge=True)
    older.load_state_dict(saved)
    assert older.switched and older.switched_at is None
    with pytest.raises(ConfigError, match=r"hedge True then, None now"):
        LabHyperband(6, 2, 3, 1, escalate=True).load_state_dict(saved)


@pytest.mark.parametrize("every", [True, False])
def test_a_later_brackets_trial_the_first_rung_would_have_pruned_switches_once_it_is_the_best(
    every: bool,
) -> None:
    # rungs [[2, 4], [4], []]: a trial of the middle bracket also runs past epoch 2 unjudged, so
    # it tests bracket 0's first rung as a full run does (judge_every_bracket, the default);
    # judged at the hedge alone, it switches nothing
    policy = LabHyperband(8, 2, 2, 1, escalate=True, hedge=True, judge_every_bracket=every)
    _run_one_worker(policy, STALLING)
    assert policy.open_brackets == 3 and not policy.switched
    middle = next(t for t in (f"n{i}" for i in range(20)) if policy.on_add(t) == 1)
    # 1.05 at epoch 2 is behind the first rung's cut (0.5 of "a", then the 1.0s); it then drops
    # below the sweep's best (0.5) before its own rung at epoch 4 judges it
    for e, v in enumerate([1.05, 1.05, 0.45], 1):
        assert policy.on_result(middle, e, v, float(e)) is Decision.CONTINUE
    assert policy.switched is every and (policy.judged_wrong == {middle}) is every
    assert (policy.searcher_min_epochs() == 8) is every
    assert ({policy.on_add(f"m{i}") for i in range(6)} == {2}) is every


def test_without_the_hedge_a_full_run_that_becomes_the_best_switches_nothing() -> None:
    policy = LabHyperband(8, 2, 2, 1, escalate=True)  # its last bracket has no rungs, but no hedge
    _run_one_worker(policy, STALLING)
    assert policy.open_brackets == 3
    full = next(t for t in (f"n{i}" for i in range(20)) if policy.on_add(t) == 2)
    for e in range(1, 9):
        policy.on_result(full, e, 0.1, float(e))
    assert not policy.switched and {policy.on_add(f"m{i}") for i in range(12)} != {2}
    assert policy.stopper_waits_until(full) == 0


# rung checks: a fast starter the first rung promotes, a slow starter it prunes while it still
# falls fast (2.0 → 1.0 over epochs 1 → 2, grace 2), which beats the promoted trial at epoch 4
FAST = [1.0, 0.5, 0.45, 0.44, 0.43, 0.42]
SLOW = [2.0, 1.0, 0.6, 0.40, 0.30, 0.20]


def _checked(rung_checks: int) -> LabHyperband:
    return LabHyperband(6, grace_epochs=2, eta=3, brackets=1, escalate=True, rung_checks=rung_checks)


def test_rung_checks_probe_a_pruned_trial_still_falling_fast_and_open_the_brackets_when_it_wins() -> None:
    log = _run_one_worker(_checked(1), {"fast": FAST, "slow": SLOW})
    assert log == [("fast", 6, StopReason.COMPLETED), ("slow", 6, StopReason.COMPLETED)]
    policy = _checked(1)
    _run_one_worker(policy, {"fast": FAST})
    policy.on_add("slow")
    decisions = [policy.on_result("slow", e, loss, float(e)) for e, loss in enumerate(SLOW[:4], start=1)]
    assert decisions == [Decision.CONTINUE] * 4 and policy.checks.probe == "slow"
    assert policy.checks.failed and policy.open_brackets == len(policy.rungs_by_bracket) == 2
    # a new trial may now start in the bracket that first judges at epoch 6
    assert {policy.on_add(f"n{i}") for i in range(4)} == {0, 1}
    # without the checks, the first rung stops the slow starter and the brackets stay as set
    assert _run_one_worker(_checked(0), {"fast": FAST, "slow": SLOW})[1] == (
        "slow",
        2,
        StopReason.RUNG_PRUNED,
    )


def test_rung_checks_end_once_the_rung_passed_them_all() -> None:
    # the probe flattens at epoch 3: at epoch 4 its fall since epoch 2 no longer promises the
    # sweep's best, it stops and the rung passed the check; with none left, the next falling
    # trial is pruned as before
    flattening = [2.0, 1.0, 0.99, 0.98, 0.97, 0.96]
    policy = _checked(1)
    log = _run_one_worker(policy, {"fast": FAST, "p1": flattening, "p2": SLOW})
    assert log[1:] == [("p1", 4, StopReason.RUNG_PRUNED), ("p2", 2, StopReason.RUNG_PRUNED)]
    assert (policy.checks.probes, policy.checks.passed, policy.checks.failed) == (1, 1, False)
    assert policy.open_brackets == 1
    # two checks: the second probe is the slow starter, which fails the rung
    policy = _checked(2)
    log = _run_one_worker(policy, {"fast": FAST, "p1": flattening, "p2": SLOW})
    assert log[2] == ("p2", 6, StopReason.COMPLETED) and policy.checks.failed
    # a flat trial behind the cut is no probe; nor is one during the warm-up
    policy = LabHyperband(6, 2, 3, 1, warmup_trials=3, escalate=True, rung_checks=1)
    assert _run_one_worker(policy, {"fast": FAST, "slow": SLOW})[1] == ("slow", 2, StopReason.RUNG_PRUNED)
    policy = _checked(1)
    assert _run_one_worker(policy, {"fast": FAST, "flat": [1.2] * 6})[1] == (
        "flat",
        2,
        StopReason.RUNG_PRUNED,
    )
    assert policy.checks.probes == 0


def test_a_probe_ended_outside_the_policy_counts_as_a_passed_check() -> None:
    # the stopper (or a crash) ends the probe: Ray's scheduler and the simulator tell on_end
    policy = _checked(1)
    _run_one_worker(policy, {"fast": FAST})
    policy.on_add("slow")
    for e, loss in enumerate(SLOW[:3], start=1):
        policy.on_result("slow", e, loss, float(e))
    policy.on_end("slow", StopReason.STOPPED)
    assert policy.checks.probe is None and policy.checks.passed == 1
    policy.on_add("next")
    assert [policy.on_result("next", e, loss, float(e)) for e, loss in enumerate(SLOW[:2], 1)][
        -1
    ] is Decision.STOP


def test_rung_checks_survive_a_saved_state_mid_probe() -> None:
    policy = _checked(1)
    _run_one_worker(policy, {"fast": FAST})
    policy.on_add("slow")
    for e, loss in enumerate(SLOW[:3], start=1):
        policy.on_result("slow", e, loss, float(e))
    saved = json.loads(json.dumps(policy.state_dict()))  # strict JSON: the infinities encoded
    assert saved["checks"]["probe"] == "slow"
    resumed = _checked(1)
    resumed.load_state_dict(saved)
    assert resumed.on_result("slow", 4, SLOW[3], 4.0) is Decision.CONTINUE
    assert resumed.checks.failed and resumed.open_brackets == 2
    # the geometry names the checks: a state saved with them off (or before they existed) is
    # refused by a policy with them on, and the other way round
    off = _checked(0)
    _run_one_worker(off, {"fast": FAST})
    assert "rung_checks" not in off.state_dict()["geometry"]
    with pytest.raises(ConfigError, match=r"rung_checks None then, 1 now"):
        _checked(1).load_state_dict(json.loads(json.dumps(off.state_dict())))
    with pytest.raises(ConfigError, match=r"rung_checks 1 then, None now"):
        _checked(0).load_state_dict(saved)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_rung_checks_refuse_what_is_not_a_count(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"^scheduler\.rung_checks: must be a whole number >= 0; got "):
        LabHyperband(6, 2, 3, rung_checks=bad)  # type: ignore[arg-type]


def _crossing_sweep(policy: LabHyperband, n: int, reversed_order: bool) -> None:
    """One worker, a dollar an epoch, η = 3, rungs at 1 and 3 epochs (of 9): trial i falls from
    1 − i/100 at epoch 1; the ones the first rung keeps (each a new best there: a rung promotes
    a new best) then keep (``reversed_order`` False) or reverse (True) their order at epoch 3,
    every one a little worse than the trial before at epoch 3 when reversed."""
    for i in range(n):
        start = 1.0 - i / 100
        at_3 = 0.5 + i / 1000 if reversed_order else 0.5 - i / 1000
        _run_one_worker(policy, {f"t{i:02d}": [start, (start + at_3) / 2, at_3, at_3, at_3, at_3]})


@pytest.mark.parametrize("hedge", [False, True])
def test_a_first_rung_whose_kept_trials_reverse_their_order_opens_every_bracket(hedge: bool) -> None:
    from lab.hyperband import MISRANK_MIN

    kwargs = {"max_epochs": 9, "grace_epochs": 1, "eta": 3, "brackets": 1, "escalate": True, "hedge": hedge}
    policy = LabHyperband(**kwargs)
    _crossing_sweep(policy, MISRANK_MIN - 1, reversed_order=True)
    # five kept trials (each a new best at the first rung), all pairs reversed at the second
    assert policy.discordant == 10 and policy.concordant == 0 and policy.open_brackets == 1
    _crossing_sweep(policy, MISRANK_MIN, reversed_order=True)  # t00–t04 are known: t05 is the sixth
    assert policy.open_brackets == len(policy.rungs_by_bracket) == 3  # [1, 3], [3], [] (hedge or not)
    assert (policy.opened_by, policy.opened_at) == ("misranked", MISRANK_MIN)
    assert len(policy.trials) - policy.mark_trials < 3**2  # too few trials since the best for a stall
    # the same sweep whose kept trials keep their order opens nothing, and counts its pairs
    kept = LabHyperband(**kwargs)
    _crossing_sweep(kept, 30, reversed_order=False)
    assert kept.open_brackets == 1 and kept.opened_by is None
    assert kept.discordant == 0 and kept.concordant == len(kept.ranked) * (len(kept.ranked) - 1) // 2
    # with the check off (misrank_min None) only a stall opens them, later
    off = LabHyperband(**kwargs, misrank_min=None)
    _crossing_sweep(off, MISRANK_MIN, reversed_order=True)
    assert off.ranked == [] and off.open_brackets == 1
    # without escalation nothing is booked
    plain = LabHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1)
    _crossing_sweep(plain, 30, reversed_order=True)
    assert plain.ranked == [] and len(plain.rungs_by_bracket) == 1


def test_the_order_check_survives_a_round_trip() -> None:
    from lab.hyperband import MISRANK_MIN

    kwargs = {"max_epochs": 9, "grace_epochs": 1, "eta": 3, "brackets": 1, "escalate": True}
    policy = LabHyperband(**kwargs)
    _crossing_sweep(policy, MISRANK_MIN - 1, reversed_order=True)
    restored = LabHyperband(**kwargs)
    restored.load_state_dict(json.loads(json.dumps(policy.state_dict())))
    assert (restored.ranked, restored.concordant, restored.discordant) == (
        policy.ranked,
        policy.concordant,
        policy.discordant,
    )
    for p in (policy, restored):
        _run_one_worker(p, {"t05": [0.95, 0.72, 0.505, 0.505]})
        assert p.open_brackets == 3 and p.opened_by == "misranked"
    saved = json.loads(json.dumps(policy.state_dict()))
    assert (saved["escalation"]["opened_by"], saved["escalation"]["opened_at"]) == ("misranked", MISRANK_MIN)
    again = LabHyperband(**kwargs)
    again.load_state_dict(saved)
    assert (again.opened_by, again.opened_at, again.open_brackets) == ("misranked", MISRANK_MIN, 3)


def test_where_the_first_rungs_order_barely_holds_the_searcher_fits_the_longest_runs() -> None:
    """``weak_rank_tau`` θ: once ``misrank_min`` trials the first rung kept reached the second
    with a Kendall τ between their two rungs' losses below θ, ``searcher_min_epochs`` is the
    epochs of the ``misrank_min``-th longest ended trial (the searcher then fits those); where
    the order holds, ``None``. It survives a round trip; it needs the order check."""
    kwargs = {"max_epochs": 9, "grace_epochs": 1, "eta": 3, "brackets": 1, "escalate": True, "misrank_min": 6}

    def sweep(policy: LabHyperband, reversed_order: bool) -> None:
        for i in range(6):
            _crossing_sweep(policy, i + 1, reversed_order)
            policy.on_end(f"t{i:02d}")  # each kept trial ran 6 epochs, then its loop ended
            if i < 5:  # five ranked trials are too few to judge the order by
                assert not policy.ranks_weak() and policy.searcher_min_epochs() is None

    weak = LabHyperband(**kwargs, weak_rank_tau=0.5)
    sweep(weak, reversed_order=True)
    # the first ran 6 epochs; each later one, worse at the second rung than all before, was pruned there
    assert [weak.trials[f"t{i:02d}"].epochs for i in range(6)] == [6, 3, 3, 3, 3, 3]
    assert weak.ranks_weak() and weak.searcher_min_epochs() == 3
    weak.on_add("t06")
    weak.on_result("t06", 1, 2.0, 1.0)
    weak.on_end("t06")  # one more ended trial, shorter: the 6th longest is still the one at 3
    assert weak.searcher_min_epochs() == 3
    restored = LabHyperband(**kwargs, weak_rank_tau=0.5)
    restored.load_state_dict(json.loads(json.dumps(weak.state_dict())))
    assert restored.ranks_weak() and restored.searcher_min_epochs() == 3
    holding = LabHyperband(**kwargs, weak_rank_tau=0.5)
    sweep(holding, reversed_order=False)
    assert holding.concordant == 15 and not holding.ranks_weak() and holding.searcher_min_epochs() is None
    # τ = 1 is not below θ = 1; without θ nothing changes for the searcher
    strict = LabHyperband(**kwargs, weak_rank_tau=1.0)
    sweep(strict, reversed_order=False)
    assert not strict.ranks_weak()
    off = LabHyperband(**kwargs)
    sweep(off, reversed_order=True)
    assert not off.ranks_weak() and off.searcher_min_epochs() is None
    # weak_rank_fit n in place of misrank_min: the longest alone; more than have ended, every trial
    longest = LabHyperband(**kwargs, weak_rank_tau=0.5, weak_rank_fit=1)
    sweep(longest, reversed_order=True)
    assert longest.searcher_min_epochs() == 6
    many = LabHyperband(**kwargs, weak_rank_tau=0.5, weak_rank_fit=7)
    sweep(many, reversed_order=True)
    assert many.ranks_weak() and many.searcher_min_epochs() is None
    for fit in (0, 2.5, True):
        with pytest.raises(ConfigError, match=r"^scheduler\.weak_rank_fit: a whole number >= 1"):
            LabHyperband(**kwargs, weak_rank_tau=0.5, weak_rank_fit=fit)  # type: ignore[arg-type]
    for bad in ({"escalate": False}, {"misrank_min": None}, {"weak_rank_tau": 1.5}):
        with pytest.raises(ConfigError, match=r"^scheduler\.weak_rank_tau: a Kendall τ in \[-1, 1\]"):
            LabHyperband(**{**kwargs, "weak_rank_tau": 0.5, **bad})


def test_the_order_is_still_read_once_every_bracket_is_open_when_the_searcher_needs_it() -> None:
    """The order check stops counting once every bracket is open (nothing left for it to
    open); with ``weak_rank_tau`` it counts on, so the searcher's floor follows the evidence."""
    kwargs = {"max_epochs": 9, "grace_epochs": 1, "eta": 3, "brackets": 1, "escalate": True}
    counting, plain = LabHyperband(**kwargs, weak_rank_tau=0.2), LabHyperband(**kwargs)
    for policy in (counting, plain):
        policy._open_every_bracket("stall")
        for i in range(40):  # some land in bracket 0 and reach its second rung
            _run_one_worker(policy, {f"t{i:02d}": [1.0 - i / 100, 0.8, 0.5 - i / 1000, 0.5, 0.5]})
    assert plain.ranked == [] and len(counting.ranked) > 0
    assert counting.discordant == 0 and counting.concordant > 0


def test_brackets_open_below_a_set_rank_agreement_of_the_kept_trials() -> None:
    """``misrank_tau`` θ: the brackets open once ``misrank_min`` kept trials reached the second
    rung with Kendall's τ ≤ θ; θ = 0 (the default) is the rule of no more pairs in order than
    reversed. Kept trials mostly in order (τ = 1/3) open them at θ = 0.5, not at 0."""
    kwargs = {"max_epochs": 9, "grace_epochs": 1, "eta": 3, "brackets": 1, "escalate": True}
    at_3 = [0.50, 0.48, 0.49, 0.46, 0.47, 0.485]
    policies = {theta: LabHyperband(**kwargs, misrank_tau=theta) for theta in (0.0, 0.5)}
    for policy in policies.values():
        for i, loss in enumerate(at_3):  # each a new best at the first rung, kept
            start = 1.0 - i / 100
            _run_one_worker(policy, {f"t{i}": [start, (start + loss) / 2, loss, loss]})
    for policy in policies.values():
        assert (policy.concordant, policy.discordant) == (10, 5)  # τ = 1/3
    assert policies[0.0].open_brackets == 1 and policies[0.0].opened_by is None
    assert policies[0.5].open_brackets == 3 and policies[0.5].opened_by == "misranked"
    with pytest.raises(ConfigError, match=r"^scheduler\.misrank_tau: a Kendall τ in \[-1, 1\)"):
        LabHyperband(**kwargs, misrank_tau=1.0)
