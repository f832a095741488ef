"""Direction: the one place the sign of a metric is decided."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costtune.core.direction import Direction
from costtune.errors import ConfigError

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9)


@given(a=finite, b=finite, direction=st.sampled_from(list(Direction)))
def test_better_best_worst_loss_and_improvement_agree(a, b, direction) -> None:
    assert (
        direction.better(a, b) == (direction.improvement(b, a) > 0) == (direction.loss(a) < direction.loss(b))
    )
    assert direction.best([a, b]) == (a if direction.better(a, b) else b)
    assert direction.worst([a, b]) == (b if direction.better(a, b) else a)
    assert sorted([a, b], key=direction.loss)[0] == direction.best([a, b])


def test_the_two_directions() -> None:
    assert Direction.MIN.better(0.1, 0.2) and Direction.MAX.better(0.9, 0.8)
    assert Direction.MIN.improvement(0.4, 0.25) == pytest.approx(0.15)
    assert Direction.MAX.improvement(0.90, 0.95) == pytest.approx(0.05)
    assert Direction.MIN == "min" and Direction.of("max") is Direction.MAX  # configs carry it as is
    assert Direction.MIN.optuna == "minimize" and Direction.MAX.ascending is False


def test_nan_never_wins_and_anything_beats_it() -> None:
    for d in Direction:
        assert not d.better(math.nan, 1.0) and d.better(1.0, math.nan) and not d.better(math.nan, math.nan)
        assert d.best([math.nan, 3.0, math.nan]) == 3.0 and math.isnan(d.best([math.nan]))
        assert math.isnan(d.loss("not a number")) and math.isnan(d.loss(None))


def test_a_bad_mode_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError, match=r"^mode: must be 'min' or 'max', got 'minimise'$"):
        Direction.of("minimise")
