"""The benchmarks' promotion rules (``benchmarks/lab/promotion.py``): ASHA's ⌈n/η⌉, a share of
the rung's dollars, (loss, dollars) Pareto fronts. costtune does not ship them; ``families.py``
ablates them against its own (the top max(1, ⌊n/η⌋) by loss)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costtune.core.policy import Decision, Rung, RungEntry, pareto_fronts
from costtune.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from lab.hyperband import LabHyperband
from lab.promotion import Keep, PromotionRule, is_promotable


def _rung(losses, costs) -> dict[str, RungEntry]:
    return {name: RungEntry(loss, cost) for name, loss, cost in zip("abcdefgh", losses, costs, strict=False)}


def _promoted(rung, eta, rule, keep=Keep.FLOOR) -> str:
    return "".join(t for t in rung if is_promotable(t, rung, eta, rule, keep))


def test_loss_rule_promotes_floor_n_over_eta_by_default_and_ceil_on_request() -> None:
    rung = _rung([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [1] * 6)
    assert _promoted(rung, 5, PromotionRule.LOSS) == "a"  # ⌊6/5⌋
    assert _promoted(rung, 5, PromotionRule.LOSS, Keep.CEIL) == "ab"  # ⌈6/5⌉ = 2


rungs = st.lists(
    st.tuples(st.floats(0, 10, allow_nan=False), st.floats(0.001, 100, allow_nan=False)),
    min_size=1,
    max_size=30,
    unique_by=lambda p: p[0],
)


@pytest.mark.parametrize(
    ("costs", "expected"),
    [
        ([1, 1, 1, 1, 6], "ab"),  # the share is $2: a and b start below it
        ([6, 1, 1, 1, 1], "a"),  # the best trial is expensive: it alone holds the share
        ([0.5, 0.5, 0.5, 0.5, 8], "abcd"),  # cheap leaders let more through
    ],
)
def test_cost_share_rule_promotes_best_by_loss_until_a_fifth_of_the_dollars(costs, expected) -> None:
    rung = _rung([0.1, 0.2, 0.3, 0.4, 0.5], costs)
    assert _promoted(rung, 5, PromotionRule.COST_SHARE) == expected


def test_pareto_rule_prefers_the_cheap_non_dominated_trial() -> None:
    # (loss, $): a (.1, 5) b (.2, 1) c (.3, 2) d (.4, .5) e (.5, 3); c is dominated by b
    rung = _rung([0.1, 0.2, 0.3, 0.4, 0.5], [5, 1, 2, 0.5, 3])
    assert pareto_fronts([(e.loss, e.cost_usd) for e in rung.values()]) == [0, 0, 1, 0, 2]
    assert _promoted(rung, 2, PromotionRule.PARETO, Keep.CEIL) == "abd"  # ⌈5/2⌉, front 0 first
    assert _promoted(rung, 2, PromotionRule.PARETO) == "ab"  # ⌊5/2⌋


@given(rungs, st.integers(2, 8))
def test_loss_rule_promotes_exactly_ceil_n_over_eta(points, eta) -> None:
    rung = {f"t{i}": RungEntry(loss, cost) for i, (loss, cost) in enumerate(points)}
    promoted = [t for t in rung if is_promotable(t, rung, eta, PromotionRule.LOSS, Keep.CEIL)]
    assert len(promoted) == math.ceil(len(rung) / eta)


def test_keep_floor_is_stricter_than_ceil_from_the_second_trial() -> None:
    rung = Rung((f"t{i}", RungEntry(float(i), 1.0)) for i in range(9))  # t0 best … t8 worst
    assert is_promotable("t1", rung, 5, PromotionRule.LOSS, Keep.CEIL)  # ⌈9/5⌉ = 2
    assert not is_promotable("t1", rung, 5, PromotionRule.LOSS, Keep.FLOOR)  # max(1, ⌊9/5⌋) = 1
    alone = Rung([("first", RungEntry(3.0, 1.0))])
    assert is_promotable("first", alone, 5, PromotionRule.LOSS, Keep.FLOOR)  # at least one goes on


@given(rungs, st.integers(2, 8), st.sampled_from([PromotionRule.LOSS, PromotionRule.COST_SHARE]))
def test_cost_never_outranks_quality(points, eta, rule) -> None:
    """The promoted trials are a best-by-loss prefix holding less than 1/η of the weight before the last."""
    rung = {f"t{i}": RungEntry(loss, cost) for i, (loss, cost) in enumerate(points)}
    by_loss = sorted(rung, key=lambda t: rung[t].loss)
    promoted = {t for t in rung if is_promotable(t, rung, eta, rule)}
    assert promoted == set(by_loss[: len(promoted)])
    assert promoted  # the best trial always goes on
    weight = (lambda t: rung[t].cost_usd) if rule is PromotionRule.COST_SHARE else (lambda t: 1.0)
    before_last = sum(weight(t) for t in by_loss[: len(promoted) - 1])
    assert before_last < sum(weight(t) for t in rung) / eta


@given(rungs, st.integers(2, 8))
def test_the_lab_loss_rule_at_floor_is_costtunes(points, eta) -> None:
    from costtune.core.policy import is_promotable as costtunes

    rung = {f"t{i}": RungEntry(loss, cost) for i, (loss, cost) in enumerate(points)}
    fast = Rung(rung.items())
    assert [is_promotable(t, rung, eta) for t in rung] == [costtunes(t, fast, eta) for t in rung]


def test_cost_share_lets_cheap_trials_through_where_loss_would_not() -> None:
    costs = {"a": 10.0, "b": 0.1, "c": 0.1, "d": 0.1}
    decisions = {}
    for rule in ("loss", "cost_share"):
        policy = LabHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, promotion=rule)
        for trial in "abcd":
            policy.on_add(trial)
        # a is the best and expensive; it arrives first, then b, c, d in loss order
        decisions[rule] = [
            policy.on_result(t, 1, loss, costs[t])
            for t, loss in zip("abcd", [0.1, 0.2, 0.3, 0.4], strict=True)
        ]
    C, S = Decision.CONTINUE, Decision.STOP
    assert decisions["loss"] == [C, S, S, S]  # b: 1 ahead of 2/3; c: 2 ahead of 1; d: 3 ahead of 4/3
    assert decisions["cost_share"] == [C, S, S, S]  # a holds $10 of $10.x: nobody else fits
    policy = LabHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, promotion="cost_share")
    cheap_first = [policy.on_result(t, 1, loss, costs[t]) for t, loss in [("b", 0.1), ("c", 0.2), ("d", 0.3)]]
    assert cheap_first == [C, S, S]  # equal costs: plain ⌈n/η⌉ behaviour
    # a is worst but holds almost all of the rung's $10.3: the cheap trials ahead of it use
    # $0.3 of the $3.43 share, so by the rule's letter it goes on (documented edge case)
    assert policy.on_result("a", 1, 0.4, costs["a"]) is C


def test_a_bad_promotion_rule_names_the_field() -> None:
    with pytest.raises(ConfigError, match="^scheduler.promotion:"):
        LabHyperband(max_epochs=50, promotion="roi")


def test_a_lab_rule_is_in_the_saved_geometry_and_refused_by_the_plain_rungs() -> None:
    from costtune.core.policy import AsyncHyperband

    ran = LabHyperband(max_epochs=27, grace_epochs=1, eta=3, keep="ceil")
    ran.on_result("a", 1, 0.5, 0.1)
    with pytest.raises(ConfigError, match=r"keep 'ceil' then, None now"):
        AsyncHyperband(max_epochs=27, grace_epochs=1, eta=3).load_state_dict(ran.state_dict())
    assert (
        LabHyperband(max_epochs=27, grace_epochs=1, eta=3).geometry()
        == AsyncHyperband(max_epochs=27, grace_epochs=1, eta=3).geometry()
    )
