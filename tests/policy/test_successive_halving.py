from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costtune.errors import ConfigError
from costtune.policy import (
    PromotionRule,
    RungEntry,
    is_promotable,
    max_bracket_index,
    pareto_fronts,
    rung_epochs,
)
from costtune.policy.successive_halving import validate_geometry


@pytest.mark.parametrize(
    ("grace", "eta", "max_epochs", "bracket", "expected"),
    [
        (5, 5, 50, 0, [5, 25]),
        (5, 5, 50, 1, [25]),
        (5, 5, 125, 0, [5, 25]),
        (1, 3, 27, 0, [1, 3, 9]),
        (1, 3, 27, 2, [9]),
        (1, 3, 27, 3, []),
    ],
)
def test_rung_epochs_grace_times_eta_powers(grace, eta, max_epochs, bracket, expected) -> None:
    assert rung_epochs(grace, eta, max_epochs, bracket) == expected


@pytest.mark.parametrize(
    ("grace", "eta", "max_epochs", "s_max"), [(5, 5, 50, 1), (1, 3, 27, 3), (5, 5, 5, 0)]
)
def test_max_bracket_index(grace, eta, max_epochs, s_max) -> None:
    assert max_bracket_index(grace, eta, max_epochs) == s_max


@pytest.mark.parametrize(
    ("args", "field"),
    [((5, 1, 50), "scheduler.eta"), ((0, 5, 50), "scheduler.grace_epochs"), ((10, 5, 5), "max_epochs")],
)
def test_validate_geometry_names_the_field(args, field) -> None:
    with pytest.raises(ConfigError, match=f"^{field}:"):
        validate_geometry(*args)


def _rung(losses, costs) -> dict[str, RungEntry]:
    return {name: RungEntry(loss, cost) for name, loss, cost in zip("abcdefgh", losses, costs, strict=False)}


def _promoted(rung, eta, rule) -> str:
    return "".join(t for t in rung if is_promotable(t, rung, eta, rule))


def test_loss_rule_promotes_ceil_n_over_eta() -> None:
    rung = _rung([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [1] * 6)
    assert _promoted(rung, 5, PromotionRule.LOSS) == "ab"  # ⌈6/5⌉ = 2


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
    assert _promoted(rung, 2, PromotionRule.PARETO) == "abd"


def test_first_trial_at_a_rung_goes_on_and_nan_never_does() -> None:
    assert is_promotable("a", _rung([0.3], [1.0]), 5, PromotionRule.COST_SHARE)
    assert not is_promotable("a", _rung([math.nan], [1.0]), 5, PromotionRule.LOSS)


rungs = st.lists(
    st.tuples(st.floats(0, 10, allow_nan=False), st.floats(0.001, 100, allow_nan=False)),
    min_size=1,
    max_size=30,
    unique_by=lambda p: p[0],
)


@given(rungs, st.integers(2, 8))
def test_loss_rule_promotes_exactly_ceil_n_over_eta(points, eta) -> None:
    rung = {f"t{i}": RungEntry(loss, cost) for i, (loss, cost) in enumerate(points)}
    promoted = [t for t in rung if is_promotable(t, rung, eta, PromotionRule.LOSS)]
    assert len(promoted) == math.ceil(len(rung) / eta)


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
