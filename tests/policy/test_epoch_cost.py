from __future__ import annotations

import math

from costtune.core.policy.epoch_cost import EpochCostModel
from costtune.core.policy.pbt import Mutation

SPACE = {
    "batch_size": Mutation("logint", 16, 512),
    "units": Mutation("logint", 64, 1024),
    "optimizer": Mutation("choice", values=("sgd", "adam")),
}


def _seconds(config: dict) -> float:
    """An epoch costs more for small batches (more steps) and wide layers."""
    return 10.0 * (512 / config["batch_size"]) ** 0.8 * (config["units"] / 64) ** 0.5


def _grid() -> list[dict]:
    return [
        {"batch_size": b, "units": u, "optimizer": o}
        for b in (16, 32, 64, 128, 256, 512)
        for u in (64, 256, 1024)
        for o in ("sgd", "adam")
    ]


def test_it_declines_to_predict_until_it_has_seen_enough() -> None:
    model = EpochCostModel(SPACE, min_observations=3)
    configs = [
        {"batch_size": 512, "units": 64, "optimizer": "sgd"},
        {"batch_size": 16, "units": 1024, "optimizer": "sgd"},
    ]
    model.observe(configs[0], 10.0)
    model.observe(configs[1], 100.0)
    assert not model.ready() and math.isnan(model.predict(configs[0]))
    assert model.cheapest(configs[::-1]) == 0  # no opinion yet: the searcher's first choice
    model.observe(configs[0], 0.0)  # not a measurement: ignored
    assert not model.ready()


def test_it_ranks_unseen_configurations_by_their_cost_per_epoch() -> None:
    model = EpochCostModel(SPACE)
    for config in _grid():
        model.observe(config, _seconds(config))
    cheap = {"batch_size": 400, "units": 80, "optimizer": "adam"}
    dear = {"batch_size": 20, "units": 900, "optimizer": "sgd"}
    middle = {"batch_size": 100, "units": 200, "optimizer": "adam"}
    assert model.predict(cheap) < model.predict(middle) < model.predict(dear)
    assert model.cheapest([dear, middle, cheap]) == 2
    # within a factor of two of the truth on configurations it never saw
    for config in (cheap, middle, dear):
        assert 0.5 < model.predict(config) / _seconds(config) < 2.0
    # ties go to the first candidate (the searcher's own order): deterministic
    assert model.cheapest([cheap, dict(cheap)]) == 0
