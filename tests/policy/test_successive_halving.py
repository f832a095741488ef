from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costtune.core.policy import (
    Rung,
    RungEntry,
    is_promotable,
    max_bracket_index,
    pareto_fronts,
    rung_epochs,
)
from costtune.core.policy.successive_halving import validate_geometry
from costtune.errors import ConfigError


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


def _promoted(rung, eta) -> str:
    return "".join(t for t in rung if is_promotable(t, rung, eta))


def test_a_rung_keeps_floor_n_over_eta_by_loss_and_never_none() -> None:
    rung = _rung([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [1] * 6)
    assert _promoted(rung, 5) == "a"  # ⌊6/5⌋
    assert _promoted(_rung([0.4, 0.1, 0.3, 0.2, 0.5, 0.6, 0.7, 0.8], [1] * 8), 4) == "bd"  # ⌊8/4⌋
    few = _rung([0.1, 0.2, 0.3], [1] * 3)
    assert _promoted(few, 5) == "a"  # max(1, ⌊3/5⌋): never none


def test_first_trial_at_a_rung_goes_on_and_nan_never_does() -> None:
    assert is_promotable("a", _rung([0.3], [1.0]), 5)
    assert not is_promotable("a", _rung([math.nan], [1.0]), 5)


rungs = st.lists(
    st.tuples(st.floats(0, 10, allow_nan=False), st.floats(0.001, 100, allow_nan=False)),
    min_size=1,
    max_size=30,
    unique_by=lambda p: p[0],
)


@given(rungs, st.integers(2, 8))
def test_floor_keep_promotes_exactly_optunas_count(points, eta) -> None:
    """keep=floor promotes max(1, ⌊n/η⌋) of a rung, as Optuna's SuccessiveHalvingPruner."""
    rung = {f"t{i}": RungEntry(loss, cost) for i, (loss, cost) in enumerate(points)}
    fast = Rung(rung.items())
    for r in (rung, fast):
        promoted = [t for t in r if is_promotable(t, r, eta)]
        assert len(promoted) == max(1, len(rung) // eta)
        assert set(promoted) == set(sorted(rung, key=lambda t: (rung[t].loss, t))[: len(promoted)])


@given(
    st.lists(
        st.tuples(
            st.one_of(st.integers(0, 30).map(float), st.just(math.nan)),  # ties and NaNs on purpose
            st.integers(0, 50).map(float),
        ),
        min_size=1,
        max_size=700,  # past two block splits
    ),
    st.integers(2, 6),
)
def test_rung_answers_like_the_plain_dict_at_every_arrival(points, eta) -> None:
    """The block-sorted Rung gives the one-pass answer for each trial as it arrives."""
    fast, plain = Rung(), {}
    for i, (loss, cost) in enumerate(points):
        trial, entry = f"t{i:04d}", RungEntry(loss, cost)
        fast.record(trial, entry)
        plain[trial] = entry
        assert is_promotable(trial, fast, eta) == is_promotable(trial, plain, eta)
    assert dict(fast) == plain
    ranked = sorted(math.inf if math.isnan(e.loss) else e.loss for e in plain.values())
    assert [fast.nth_loss(k) for k in range(len(fast))] == ranked  # across block splits
    with pytest.raises(IndexError):
        fast.nth_loss(len(fast))


def test_rung_records_a_trial_once() -> None:
    rung = Rung([("a", RungEntry(0.1, 1.0))])
    with pytest.raises(ValueError, match="already recorded"):
        rung.record("a", RungEntry(0.2, 1.0))


def test_rung_past_many_block_splits_matches_the_plain_dict() -> None:
    rng = random.Random(7)
    fast, plain = Rung(), {}
    for i in range(3000):  # seven block splits
        trial, entry = f"t{i}", RungEntry(float(rng.randint(0, 500)), float(rng.randint(0, 9)))
        fast.record(trial, entry)
        plain[trial] = entry
        if i % 37 == 0:
            assert is_promotable(trial, fast, 5) == is_promotable(trial, plain, 5)
    assert len(fast._keys) >= 8
    for probe in rng.sample(sorted(plain), 50):
        assert fast.ahead(probe) == sum((e.loss, t) < (plain[probe].loss, probe) for t, e in plain.items())


def _fronts_by_definition(points):
    """The former O(n²)-per-front peeling, kept as the reference."""

    def dominates(a, b):
        return a[0] <= b[0] and a[1] <= b[1] and (a[0] < b[0] or a[1] < b[1])

    fronts, remaining, level = [-1] * len(points), set(range(len(points))), 0
    while remaining:
        current = {
            i for i in remaining if not any(dominates(points[j], points[i]) for j in remaining if j != i)
        }
        for i in current:
            fronts[i] = level
        remaining -= current
        level += 1
    return fronts


@given(
    st.lists(
        st.tuples(
            st.one_of(st.integers(0, 6).map(float), st.just(math.inf)),  # ties on purpose
            st.integers(0, 6).map(float),
        ),
        max_size=60,
    )
)
def test_sort_and_scan_fronts_equal_the_definition(points) -> None:
    assert pareto_fronts(points) == _fronts_by_definition(points)
