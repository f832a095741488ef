from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costtune.core.cost import CostModel
from costtune.core.ledger import Ledger, LedgerSpec
from costtune.core.policy import Member, Mutation, choose_donor, explore, quantiles

MUTATIONS = {
    "lr": Mutation("loguniform", 1e-4, 1e-1),
    "layers": Mutation("int", 1, 5),
    "batch": Mutation("choice", values=(32, 64, 128)),
}


def _members(losses, costs=None):
    costs = costs or [1.0] * len(losses)
    return [Member(f"t{i}", loss, c) for i, (loss, c) in enumerate(zip(losses, costs, strict=True))]


def test_quantiles_take_ceil_fraction_at_most_half() -> None:
    bottom, top = quantiles(_members([0.5, 0.1, 0.9, 0.3, 0.7]), 0.2)
    assert (bottom, top) == (["t2"], ["t1"])
    assert quantiles(_members([0.5, 0.1, 0.9]), 0.5) == (["t2"], ["t1"])  # ⌈1.5⌉ = 2 > 3/2: 1
    assert quantiles(_members([0.5]), 0.2) == ([], [])


def test_pareto_key_lets_a_cheap_near_best_trial_into_the_top() -> None:
    members = _members([0.10, 0.11, 0.50, 0.60], costs=[9.0, 1.0, 5.0, 6.0])
    assert quantiles(members, 0.5, key="loss")[1] == ["t0", "t1"]
    assert quantiles(members, 0.25, key="pareto")[1] == ["t0"]
    bottom, _ = quantiles(members, 0.25, key="pareto")
    assert bottom == ["t3"]


def test_cheaper_donors_are_copied_more_often() -> None:
    rng = random.Random(0)
    top = [Member("dear", 0.1, 4.0), Member("cheap", 0.1, 1.0)]
    picks = [choose_donor(top, rng) for _ in range(2000)]
    assert 0.75 < picks.count("cheap") / len(picks) < 0.85  # weights 1 : 1/4 → 80%


def test_same_seed_same_decisions() -> None:
    config = {"lr": 0.01, "layers": 3, "batch": 64, "fixed": "x"}
    a = [explore(config, MUTATIONS, random.Random(7)) for _ in range(3)]
    b = [explore(config, MUTATIONS, random.Random(7)) for _ in range(3)]
    assert a == b
    assert explore(config, MUTATIONS, random.Random(8)) != a[0]


@given(st.floats(1e-4, 1e-1), st.integers(1, 5), st.sampled_from([32, 64, 128]), st.integers(0, 10_000))
def test_explore_stays_inside_the_space(lr, layers, batch, seed) -> None:
    new, ops = explore(
        {"lr": lr, "layers": layers, "batch": batch, "fixed": 1}, MUTATIONS, random.Random(seed)
    )
    assert 1e-4 <= new["lr"] <= 1e-1
    assert isinstance(new["layers"], int) and 1 <= new["layers"] <= 5
    assert new["batch"] in (32, 64, 128)
    assert new["fixed"] == 1 and set(ops) == set(MUTATIONS)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(0.1, 10.0), min_size=2, max_size=6),
    st.integers(4, 20),
    st.integers(1, 5),
    st.randoms(use_true_random=False),
)
def test_pbt_conserves_metered_cost(epoch_seconds, epochs, interval, rnd) -> None:
    """Exploits jump a clone's cumulative time to the donor's; the ledger charges each
    epoch actually run exactly once, to the trial that ran it."""
    ledger = Ledger(LedgerSpec(metric="loss", mode="min", cost_model=CostModel()))
    n = len(epoch_seconds)
    total = [0.0] * n  # each trial's cumulative time field (what Ray restores on exploit)
    ran = 0.0
    for epoch in range(1, epochs + 1):
        for t in range(n):
            total[t] += epoch_seconds[t]
            ran += epoch_seconds[t]
            ledger.record_result(
                f"t{t}",
                epoch=epoch,
                seconds=total[t],
                metrics={"loss": rnd.random()},
                increment_seconds=epoch_seconds[t],
            )
        if epoch % interval == 0:
            donor, clone = rnd.sample(range(n), 2)
            total[clone] = total[donor]  # restored from the donor's checkpoint
    assert sum(r.seconds for r in ledger.trials.values()) == pytest.approx(ran)
    for t in range(n):
        assert ledger.trials[f"t{t}"].seconds == pytest.approx(epoch_seconds[t] * epochs)
