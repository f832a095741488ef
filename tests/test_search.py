from __future__ import annotations

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState, create_trial

from costtune.core.config import ParamSpec, SearcherConfig
from costtune.search import build_search_space, make_searcher
from costtune.search.gp import ClippedGPSampler, clipped

SPACE = {
    "lr": ParamSpec(type="loguniform", low=1e-4, high=1e-1),
    "depth": ParamSpec(type="int", low=1, high=3),
    "act": ParamSpec(type="choice", values=["relu", "gelu"]),
}


def _suggestions(kind: str, seed: int, n: int = 4) -> list[dict]:
    searcher = make_searcher(SearcherConfig(type=kind), "val_loss", "min", seed)
    assert searcher.set_search_properties("val_loss", "min", build_search_space(SPACE))
    return [searcher.suggest(f"t{i}") for i in range(n)]


@pytest.mark.parametrize("kind", ["optuna", "gp", "hyperopt"])
def test_searchers_are_seeded_and_respect_the_space(kind) -> None:
    first = _suggestions(kind, seed=3)
    assert first == _suggestions(kind, seed=3)
    assert first != _suggestions(kind, seed=4)
    for config in first:
        assert 1e-4 <= config["lr"] <= 1e-1
        assert config["depth"] in (1, 2, 3)  # int bounds are inclusive
        assert config["act"] in ("relu", "gelu")


def _optimize(sampler, n_trials: int = 24) -> list[dict]:
    def objective(trial: optuna.Trial) -> float:
        lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
        layers = trial.suggest_int("layers", 1, 5)
        units = trial.suggest_int("units", 16, 512, log=True)
        act = trial.suggest_categorical("act", ["relu", "gelu"])
        return (lr - 0.01) ** 2 + 0.1 * (layers - 3) ** 2 + abs(units - 100) / 500 + 0.05 * (act == "relu")

    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=n_trials)
    return [t.params for t in study.trials]


@pytest.mark.parametrize(
    ("kind", "stock"),
    [
        ("optuna", lambda: optuna.samplers.TPESampler(seed=5, n_startup_trials=10, multivariate=False)),
        ("gp", lambda: ClippedGPSampler(seed=5, n_startup_trials=5)),
    ],
)
def test_the_optuna_searchers_are_optunas_own_samplers(kind, stock) -> None:
    """``searcher.type: optuna`` is Optuna's univariate ``TPESampler`` (10 start-up trials),
    ``gp`` its ``GPSampler`` (5) with outliers clipped, built through their public
    constructors: of exactly those classes, and proposing what a plain instance with those
    arguments proposes, trial for trial (floats, log-ints and categories)."""
    from costtune.search import optuna_sampler

    ours = optuna_sampler(kind, seed=5)
    assert type(ours) is type(stock())
    assert _optimize(ours) == _optimize(stock())
    searcher = make_searcher(SearcherConfig(type=kind), "loss", "min", seed=5)
    assert type(searcher._sampler) is type(stock())  # inside Ray Tune's OptunaSearch
    assert optuna_sampler(kind, seed=5, n_startup_trials=12)._n_startup_trials == 12


def test_no_module_of_the_package_reaches_into_optunas_private_modules() -> None:
    """costtune runs Optuna through its public API: no ``optuna._*`` or ``optuna.samplers._*``
    anywhere in the package's source."""
    import re
    from pathlib import Path

    import costtune

    private = re.compile(r"optuna\.(samplers\.)?_\w")
    hits = [
        f"{path.name}:{n}"
        for path in Path(costtune.__file__).parent.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert hits == []


def test_clipping_moves_only_the_outliers_on_the_bad_side_to_the_fence() -> None:
    values = np.array([0.40, 0.42, 0.45, 0.50, 0.41, 24.0, 0.01])
    q1, q3 = np.quantile(values, [0.25, 0.75])
    low = clipped(values, optuna.study.StudyDirection.MINIMIZE)
    assert low[5] == pytest.approx(q3 + 1.5 * (q3 - q1)) and low[5] < 1.0  # the diverged loss, fenced
    assert np.array_equal(np.delete(low, 5), np.delete(values, 5))  # the rest, the low outlier too
    assert list(np.argsort(low, kind="stable")) == list(np.argsort(values, kind="stable"))  # order kept
    high = clipped(-values, optuna.study.StudyDirection.MAXIMIZE)
    assert np.allclose(high, -low)
    assert np.array_equal(clipped(values[:3], optuna.study.StudyDirection.MINIMIZE), values[:3])  # too few
    # an infinite loss (a diverged run reported as inf) is fenced too, from the finite values
    infinite = np.array([0.4, np.inf, 0.5, np.inf, 0.3, 0.45, np.inf])
    fenced = clipped(infinite, optuna.study.StudyDirection.MINIMIZE)
    assert np.isfinite(fenced).all() and (fenced[[1, 3, 6]] == fenced.max()).all()
    assert np.array_equal(clipped(infinite[:4], optuna.study.StudyDirection.MINIMIZE), infinite[:4])


def test_the_gp_searcher_proposes_what_optunas_proposes_on_the_clipped_values() -> None:
    """ClippedGPSampler is GPSampler on the study's trials with their values clipped, running
    trials included: the same proposal as a plain GPSampler (same seed) given those values."""
    dists = {
        "lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
        "depth": optuna.distributions.IntDistribution(1, 3),
    }
    rng = np.random.default_rng(2)
    params = [{"lr": float(10 ** rng.uniform(-4, -1)), "depth": int(rng.integers(1, 4))} for _ in range(12)]
    values = np.array([(np.log10(p["lr"]) + 2) ** 2 + 0.1 * p["depth"] for p in params])
    values[[3, 8]] = [50.0, 80.0]  # two diverged trials
    fenced = clipped(values, optuna.study.StudyDirection.MINIMIZE)
    assert (fenced != values).sum() == 2

    def propose(sampler, told) -> dict:
        study = optuna.create_study(sampler=sampler)
        study.add_trials(
            [
                create_trial(params=p, distributions=dists, value=float(v))
                for p, v in zip(params, told, strict=True)
            ]
        )
        study.add_trial(
            create_trial(state=TrialState.RUNNING, params={"lr": 0.01, "depth": 2}, distributions=dists)
        )
        return study.ask(dists).params

    ours = propose(ClippedGPSampler(seed=3, n_startup_trials=5), values)
    assert ours == propose(optuna.samplers.GPSampler(seed=3, n_startup_trials=5), fenced)
    assert ours != propose(optuna.samplers.GPSampler(seed=3, n_startup_trials=5), values)


def test_gp_searcher_is_seeded_and_its_model_drives_after_the_start_up() -> None:
    """``searcher.type: gp``: Optuna's Gaussian process, through Ray's OptunaSearch. After its
    random start-up trials it proposes from the model: here it finds a better point of a smooth
    objective than the start-up trials did, and the same seed gives the same proposals."""

    def objective(config: dict) -> float:
        import math

        return (
            (math.log10(config["lr"]) + 2.0) ** 2 + 0.1 * config["depth"] + 0.05 * (config["act"] == "gelu")
        )

    def run(seed: int) -> list[tuple[dict, float]]:
        searcher = make_searcher(SearcherConfig(type="gp", n_startup_trials=4), "val_loss", "min", seed)
        assert isinstance(searcher._sampler, optuna.samplers.GPSampler)
        assert searcher.set_search_properties("val_loss", "min", build_search_space(SPACE))
        seen = []
        for i in range(10):
            config = searcher.suggest(f"t{i}")
            value = objective(config)
            searcher.on_trial_complete(f"t{i}", result={"val_loss": value})
            seen.append((config, value))
        return seen

    first = run(3)
    assert first == run(3) and first != run(4)
    assert min(v for _, v in first[4:]) < min(v for _, v in first[:4])


def test_the_gp_searcher_survives_tunes_pickling() -> None:
    """Ray Tune pickles the searcher at every checkpoint: the sampler must go through
    cloudpickle and plain pickle, and answer the same afterwards."""
    import pickle

    from ray import cloudpickle

    searcher = make_searcher(SearcherConfig(type="gp", n_startup_trials=2), "val_loss", "min", 7)
    assert searcher.set_search_properties("val_loss", "min", build_search_space(SPACE))
    for i in range(4):
        config = searcher.suggest(f"t{i}")
        searcher.on_trial_complete(f"t{i}", result={"val_loss": config["lr"] + config["depth"]})
    for dumps in (pickle.dumps, cloudpickle.dumps):
        copy = pickle.loads(dumps(searcher))
        assert isinstance(copy._sampler, optuna.samplers.GPSampler)
        assert copy.suggest("next") == searcher.suggest("next")
        searcher.on_trial_complete("next", result={"val_loss": 1.0})
        copy.on_trial_complete("next", result={"val_loss": 1.0})


POINTS = [{"lr": 0.001, "depth": 2, "act": "gelu"}, {"lr": 0.05, "depth": 1, "act": "relu"}]


@pytest.mark.parametrize("kind", ["gp", "optuna", "hyperopt"])
def test_each_searcher_tries_the_given_points_first_then_samples(kind) -> None:
    searcher = make_searcher(SearcherConfig(type=kind, points_to_evaluate=POINTS), "val_loss", "min", seed=3)
    assert searcher.set_search_properties("val_loss", "min", build_search_space(SPACE))
    asked = [searcher.suggest(f"t{i}") for i in range(4)]
    assert asked[:2] == POINTS
    assert all(a not in POINTS for a in asked[2:])  # then its own proposals


def _config(**searcher):
    from costtune.core.config import parse_config

    return parse_config(
        {
            "name": "p",
            "trainable": {"name": "tests.user_trainables:quadratic"},
            "max_epochs": 3,
            "num_samples": 3,
            "search_space": {k: v.model_dump(exclude_none=True) for k, v in SPACE.items()},
            "searcher": searcher,
        }
    )


@pytest.mark.parametrize(
    ("points", "searcher_type", "error"),
    [
        ([{"lr": 0.001, "depth": 2}], "gp", r"points_to_evaluate\[0\]: gives no 'act'"),
        ([{**POINTS[0], "width": 3}], "gp", r"points_to_evaluate\[0\]\.width: not in search_space"),
        (
            [POINTS[0], {**POINTS[1], "lr": 0.5}],
            "gp",
            r"points_to_evaluate\[1\]\.lr: must be a number in \[0.0001, 0.1\], got 0.5",
        ),
        (
            [{**POINTS[0], "lr": "1e-3"}],
            "optuna",
            r"points_to_evaluate\[0\]\.lr: .* got '1e-3' \(YAML 1.1 reads",
        ),
        ([{**POINTS[0], "depth": 1.5}], "gp", r"points_to_evaluate\[0\]\.depth: must be an integer, got 1.5"),
        (
            [{**POINTS[0], "act": "tanh"}],
            "hyperopt",
            r"points_to_evaluate\[0\]\.act: must be one of \['relu', 'gelu'\], got 'tanh'",
        ),
        ([POINTS[0]] * 4, "gp", r"points_to_evaluate: 4 points, but num_samples is 3"),
    ],
)
def test_bad_points_are_named_in_one_line(points, searcher_type, error) -> None:
    from costtune.errors import ConfigError

    with pytest.raises(ConfigError, match=error):
        _config(type=searcher_type, points_to_evaluate=points)


def test_points_fit_any_sampling_searcher_and_not_a_grid() -> None:
    from costtune.core.config import parse_config
    from costtune.errors import ConfigError

    assert _config(type="random", points_to_evaluate=POINTS).searcher.points_to_evaluate == POINTS
    with pytest.raises(ConfigError, match="points_to_evaluate: a grid search runs its grid"):
        parse_config(
            {
                "name": "g",
                "trainable": {"name": "tests.user_trainables:quadratic"},
                "max_epochs": 3,
                "num_samples": 1,
                "search_space": {"act": {"type": "choice", "values": ["relu", "gelu"]}},
                "searcher": {"type": "grid", "points_to_evaluate": [{"act": "relu"}]},
            }
        )
