from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import optuna
import pytest

from costtune.config import ParamSpec, SearcherConfig
from costtune.search import build_search_space, gp_sampler, make_searcher

SPACE = {
    "lr": ParamSpec(type="loguniform", low=1e-4, high=1e-1),
    "depth": ParamSpec(type="int", low=1, high=3),
    "act": ParamSpec(type="choice", values=["relu", "gelu"]),
}


def _suggestions(kind: str, seed: int, n: int = 4) -> list[dict]:
    searcher = make_searcher(SearcherConfig(type=kind), "val_loss", "min", seed)
    assert searcher.set_search_properties("val_loss", "min", build_search_space(SPACE))
    return [searcher.suggest(f"t{i}") for i in range(n)]


@pytest.mark.parametrize("kind", ["optuna", "hyperopt"])
def test_searchers_are_seeded_and_respect_the_space(kind) -> None:
    first = _suggestions(kind, seed=3)
    assert first == _suggestions(kind, seed=3)
    assert first != _suggestions(kind, seed=4)
    for config in first:
        assert 1e-4 <= config["lr"] <= 1e-1
        assert config["depth"] in (1, 2, 3)  # int bounds are inclusive
        assert config["act"] in ("relu", "gelu")


def test_the_sweeps_tpe_is_the_one_the_benchmark_figures_were_measured_with() -> None:
    """benchmarks/lcbench.py's costtune rows ask Optuna's TPESampler (univariate, 10 random
    start-up trials, Optuna 5's constant liar); the shipped searcher must propose what that one
    does, or the figures say nothing: it is QuickTPESampler at those settings, whose proposals
    are Optuna's (``test_the_quick_tpe_proposes_what_optunas_univariate_tpe_does``)."""
    from costtune.config import SearcherConfig
    from costtune.search import make_searcher
    from costtune.tpe import QuickTPESampler

    searcher = make_searcher(SearcherConfig(type="optuna"), "loss", "min", seed=3)
    sampler = searcher._sampler
    assert type(sampler) is QuickTPESampler
    plain = optuna.samplers.TPESampler(seed=3, multivariate=False)
    assert sampler._multivariate is False and sampler._n_startup_trials == 10
    assert (
        sampler._constant_liar is plain._constant_liar and sampler._n_ei_candidates == plain._n_ei_candidates
    )


def test_the_sweeps_gp_is_the_one_the_benchmark_default_was_measured_with() -> None:
    """The gp searcher (an option) has 5 random start-up trials and clipped values: the
    settings of benchmarks/lcbench.py's default row (``costtune-hb-rel-tpe:r0.3sGCW10i5JVj%0.4``), or
    its figures say nothing about what a sweep runs. A config's own count still wins."""
    import sys
    from pathlib import Path

    from costtune.gp import CpuGPSampler
    from costtune.search import GP_STARTUP_TRIALS

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from lcbench import parse_variant

    sampler = make_searcher(SearcherConfig(type="gp"), "loss", "min", seed=3)._sampler
    assert isinstance(sampler, CpuGPSampler) and sampler._value_transform == "clip"
    _, variant = parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JVj%0.4")
    assert sampler._n_startup_trials == GP_STARTUP_TRIALS == variant["n_startup"] == 5
    assert variant["gp"] and variant["value_transform"] == "clip"
    assert sampler._model_check == variant["model_check"] == 0.4  # stop 46
    none = make_searcher(SearcherConfig(type="gp", model_check=None), "loss", "min", seed=3)._sampler
    assert none._model_check is None and none._fallback is None
    told = make_searcher(SearcherConfig(type="gp", n_startup_trials=12), "loss", "min", seed=3)._sampler
    assert told._n_startup_trials == 12


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


def test_gp_sampler_suggests_what_optunas_own_gp_sampler_does() -> None:
    """costtune's GP sampler skips Optuna's per-ask ``torch.device("cpu")`` mode where the
    default device is the CPU already (a third to a half of the benchmark's run time); its
    suggestions, floats, log-ints and categories alike, are Optuna's, trial for trial."""

    def objective(trial: optuna.Trial) -> float:
        lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
        layers = trial.suggest_int("layers", 1, 5)
        units = trial.suggest_int("units", 16, 512, log=True)
        act = trial.suggest_categorical("act", ["relu", "gelu"])
        return (lr - 0.01) ** 2 + 0.1 * (layers - 3) ** 2 + abs(units - 100) / 500 + 0.05 * (act == "relu")

    import torch

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    threads = torch.get_num_threads()
    made = {}
    for name, sampler in (("ours", gp_sampler(5)), ("optuna", optuna.samplers.GPSampler(seed=5))):
        study = optuna.create_study(sampler=sampler)
        study.optimize(objective, n_trials=24)
        made[name] = [t.params for t in study.trials]
        # past the 10 random start-up trials the model proposed (and shared them as Optuna does)
        assert any(key.startswith("gp:relative_params") for key in study.trials[-1].system_attrs)
    assert made["ours"] == made["optuna"]  # asked on one torch thread, the same answers
    assert torch.get_num_threads() == threads  # and the caller's thread count is restored
    assert isinstance(gp_sampler(5), optuna.samplers.GPSampler)


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


def test_gp_sampler_past_many_trials_refits_its_kernel_only_as_the_trials_grow() -> None:
    """Past REFIT_EVERY_ASK_UNTIL completed trials an ask keeps the last fit's kernel
    hyperparameters until the trials have grown by REFIT_GROWTH: the O(n³) optimisation that
    made an ask take seconds at 1,000 trials."""
    import random

    import optuna._gp.gp as gp_internals

    from costtune import gp

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {
        "x": optuna.distributions.FloatDistribution(0.0, 1.0),
        "y": optuna.distributions.FloatDistribution(0.0, 1.0),
    }
    study = optuna.create_study(sampler=gp_sampler(3))
    rng = random.Random(0)

    def add(n: int) -> None:
        for _ in range(n):
            p = {"x": rng.random(), "y": rng.random()}
            study.add_trial(
                optuna.trial.create_trial(params=p, distributions=dists, value=(p["x"] - 0.3) ** 2 + p["y"])
            )

    fits = []
    original = gp_internals.GPRegressor._fit_kernel_params

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        fits.append(len(self._y_train))
        return original(self, *args, **kwargs)

    asked: list[float] = []

    def ask() -> None:
        trial = study.ask(dists)
        assert any(key.startswith("gp:relative_params") for key in study.trials[-1].system_attrs)
        asked.append((trial.params["x"] - 0.3) ** 2 + trial.params["y"])
        study.tell(trial, asked[-1])

    gp_internals.GPRegressor._fit_kernel_params = counting  # type: ignore[method-assign]
    try:
        add(gp.REFIT_EVERY_ASK_UNTIL - 1)
        ask()  # at the threshold: every ask refits, as Optuna's
        ask()
        assert len(fits) == 2
        kept = study.sampler._gprs_cache_list[0].inverse_squared_lengthscales.clone()
        for _ in range(5):  # 201..205 completed trials: within 10% of the last fit's 200
            ask()
        assert len(fits) == 2
        assert bool((study.sampler._gprs_cache_list[0].inverse_squared_lengthscales == kept).all())
        # past the threshold the process sees a subset (the fast path), refitted on the same rule
        assert len(study.sampler._gprs_cache_list[0]._y_train) == gp.FAST_SUBSET
        add(20)  # 226 completed: grown by more than 10% since 200
        ask()
        assert len(fits) == 3
        ask()
        assert len(fits) == 3
    finally:
        gp_internals.GPRegressor._fit_kernel_params = original  # type: ignore[method-assign]
    # the kept fit still drives: the model's proposals sit near the optimum, random ones do not
    randoms = sorted(t.value for t in study.trials if "gp:relative_params:0" not in t.system_attrs)
    assert sorted(asked)[len(asked) // 2] < 0.1 < randoms[len(randoms) // 2]


def test_gp_sampler_per_unit_of_cost_proposes_where_epochs_are_cheap() -> None:
    """``cost_exponent`` α > 0: expected improvement per unit of cost^α, the cost a second GP
    fitted to each trial's COST_ATTR. On a loss that does not tell x apart, where x > 0.5 costs
    100 times more per epoch, the cost-aware sampler proposes cheap x; the plain one does not
    care."""
    import random

    from costtune.gp import COST_ATTR

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {
        "x": optuna.distributions.FloatDistribution(0.0, 1.0),
        "y": optuna.distributions.FloatDistribution(0.0, 1.0),
    }
    proposed: dict[float, list[float]] = {}
    for alpha in (0.0, 1.0):
        study = optuna.create_study(sampler=gp_sampler(1, n_startup_trials=10, cost_exponent=alpha))
        rng = random.Random(2)
        for _ in range(20):
            p = {"x": rng.random(), "y": rng.random()}
            cost = 100.0 if p["x"] > 0.5 else 1.0
            trial = optuna.trial.create_trial(
                params=p, distributions=dists, value=(p["y"] - 0.5) ** 2, user_attrs={COST_ATTR: cost}
            )
            study.add_trial(trial)
        xs = []
        for _ in range(6):
            trial = study.ask(dists)
            xs.append(trial.params["x"])
            cost = 100.0 if trial.params["x"] > 0.5 else 1.0
            trial.set_user_attr(COST_ATTR, cost)
            study.tell(trial, (trial.params["y"] - 0.5) ** 2)
        proposed[alpha] = xs
    assert all(x < 0.5 for x in proposed[1.0])
    assert any(x > 0.5 for x in proposed[0.0])


def test_gp_sampler_on_ranks_suggests_the_same_for_any_increasing_transform_of_the_loss() -> None:
    """``value_transform="rank"``: the process is fitted to a Gaussian copula of the values,
    so only their order counts; ``"clip"``: a bad tail is raised to the Tukey fence, so one
    diverged trial (a loss 1000 times the others') cannot flatten the rest."""
    import random

    from costtune.gp import warp

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {
        "x": optuna.distributions.FloatDistribution(0.0, 1.0),
        "y": optuna.distributions.FloatDistribution(0.0, 1.0),
    }

    def loss(p: dict[str, float]) -> float:
        return 0.1 + (p["x"] - 0.3) ** 2 + (p["y"] - 0.6) ** 2

    def proposals(transform, warp_loss) -> list[dict[str, float]]:
        study = optuna.create_study(sampler=gp_sampler(3, n_startup_trials=10, value_transform=transform))
        rng = random.Random(4)
        for _ in range(12):
            p = {"x": rng.random(), "y": rng.random()}
            study.add_trial(
                optuna.trial.create_trial(params=p, distributions=dists, value=warp_loss(loss(p)))
            )
        out = []
        for _ in range(4):
            trial = study.ask(dists)
            out.append(trial.params)
            study.tell(trial, warp_loss(loss(trial.params)))
        return out

    plain = proposals("rank", lambda v: v)
    assert proposals("rank", lambda v: 5.0 + 40.0 * v**3) == plain  # any increasing transform
    assert proposals(None, lambda v: 5.0 + 40.0 * v**3) != proposals(None, lambda v: v)  # Optuna's scale
    # the proposals close in on the optimum (0.3, 0.6)
    assert min(loss(p) for p in plain) < 0.1 + 0.02

    values = np.array([[-0.40], [-0.50], [-0.45], [-0.42], [-0.47], [-400.0]])  # larger is better
    clipped = warp(values, "clip")
    assert clipped[:5].tolist() == values[:5].tolist() and -1.0 < clipped[5, 0] < -0.5
    ranked = warp(values, "rank")
    assert np.argsort(ranked[:, 0]).tolist() == np.argsort(values[:, 0]).tolist()
    assert (
        ranked.mean() == pytest.approx(0.0)
        and warp(values[[0, 0, 1]], "rank")[0, 0] == warp(values[[0, 0, 1]], "rank")[1, 0]
    )
    with pytest.raises(ValueError, match="^value_transform: must be one of rank, clip"):
        gp_sampler(0, value_transform="log")


@pytest.mark.parametrize(("setting", "transform"), [({}, "clip"), ({"value_transform": "none"}, None)])
def test_a_sweeps_gp_searcher_clips_the_bad_tail_unless_told_not_to(setting, transform) -> None:
    searcher = make_searcher(SearcherConfig(type="gp", **setting), "val_loss", "min", seed=0)
    assert searcher._sampler._value_transform == transform


def _study_with_told_trials(n: int, seed: int = 0, **sampler_kwargs) -> tuple[optuna.Study, dict, object]:
    """A GP study with n random trials told: a log float, a log int, an int, a categorical."""
    import random

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {
        "lr": optuna.distributions.FloatDistribution(1e-4, 1.0, log=True),
        "units": optuna.distributions.IntDistribution(16, 512, log=True),
        "layers": optuna.distributions.IntDistribution(1, 5),
        "act": optuna.distributions.CategoricalDistribution(["relu", "gelu", "tanh"]),
    }

    def loss(p: dict) -> float:
        return (
            (np.log10(p["lr"]) + 2) ** 2
            + 0.1 * abs(p["layers"] - 3)
            + abs(np.log2(p["units"] / 128)) / 4
            + (0.5 if p["act"] == "tanh" else 0.0)
        )

    study = optuna.create_study(sampler=gp_sampler(seed, **sampler_kwargs))
    rng = random.Random(seed)
    for _ in range(n):
        params = {
            "lr": 10 ** rng.uniform(-4, 0),
            "units": round(2 ** rng.uniform(4, 9)),
            "layers": rng.randint(1, 5),
            "act": rng.choice(["relu", "gelu", "tanh"]),
        }
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=loss(params)))
    return study, dists, loss


def test_the_lean_log_ei_is_optunas_log_ei() -> None:
    """The fast path's NumPy acquisition (one triangular solve, distances as a matrix product)
    gives Optuna's LogEI values on a fitted process, categorical dimension included."""
    from costtune import gp

    study, dists, _ = _study_with_told_trials(60)
    captured = {}
    original = gp.fast_optimize

    def capture(acqf, best_params, rng, **kwargs):  # type: ignore[no-untyped-def]
        captured["acqf"] = acqf
        return original(acqf, best_params, rng, **kwargs)

    gp.fast_optimize = capture  # type: ignore[assignment]
    try:
        study.sampler._fast_from = 0
        study.ask(dists)
    finally:
        gp.fast_optimize = original  # type: ignore[assignment]
    acqf = captured["acqf"]
    lean = gp._lean_logei(acqf)
    assert lean is not None
    X = np.random.RandomState(1).random_sample((300, 4))
    X[:, 3] = np.floor(X[:, 3] * 3)  # the categorical's indices
    X[:5] = acqf._gpr._X_train.numpy()[:5]  # at trained points too, where the distance is 0
    ours, theirs = lean(X), acqf.eval_acqf_no_grad(X)
    assert np.allclose(ours, theirs, rtol=1e-6, atol=1e-6)
    assert np.argmax(ours) == np.argmax(theirs)


def _asked_fast(study, dists, n: int) -> tuple[list, list]:  # type: ignore[no-untyped-def]
    """``n`` asks of ``study`` from the first model-driven one on the fast path, none told:
    the trials, and the acquisition each searched."""
    from costtune import gp

    study.sampler._fast_from = 0
    captured: list = []
    original = gp.fast_optimize

    def capture(acqf, best_params, rng, **kwargs):  # type: ignore[no-untyped-def]
        captured.append(acqf)
        return original(acqf, best_params, rng, **kwargs)

    gp.fast_optimize = capture  # type: ignore[assignment]
    try:
        trials = [study.ask(dists) for _ in range(n)]
    finally:
        gp.fast_optimize = original  # type: ignore[assignment]
    return trials, captured


def _priced_study(n: int) -> tuple[optuna.Study, dict]:
    """A GP study per unit of cost (α = 1) with n random trials told: the loss set by
    |y − 0.5| alone, x > 0.5 100 times dearer per epoch (:data:`costtune.gp.COST_ATTR`)."""
    import random

    from costtune.gp import COST_ATTR

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {
        "x": optuna.distributions.FloatDistribution(0.0, 1.0),
        "y": optuna.distributions.FloatDistribution(0.0, 1.0),
    }
    study = optuna.create_study(sampler=gp_sampler(0, n_startup_trials=5, cost_exponent=1.0))
    rng = random.Random(4)
    for _ in range(n):
        p = {"x": rng.random(), "y": rng.random()}
        attrs = {COST_ATTR: 100.0 if p["x"] > 0.5 else 1.0}
        study.add_trial(
            optuna.trial.create_trial(
                params=p, distributions=dists, value=(p["y"] - 0.5) ** 2, user_attrs=attrs
            )
        )
    return study, dists


def test_the_gp_per_unit_of_cost_with_trials_running_weighs_the_believers_log_ei() -> None:
    """With trials running on the fast ask, ``cost_exponent`` weighs the kriging believer's
    LogEI by the predicted cost, as the plain fast ask searches the believer's, not the q-batch
    LogEI (128 joint samples a candidate). The asks spread out and stay cheap."""
    from costtune import gp

    study, dists = _priced_study(40)
    trials, captured = _asked_fast(study, dists, 4)  # none told: 0, 1, 2 and 3 running
    assert all(isinstance(a, gp._PerCost) for a in captured)
    assert [type(a._inner) for a in captured[1:]] == [gp._acqf.LogEI] * 3
    xs = [t.params["x"] for t in trials]
    assert all(x < 0.5 for x in xs) and len(set(xs)) == 4


def test_the_lean_log_ei_applies_the_inverse_factor_the_check_and_the_believer_kept() -> None:
    """Where the model check ran, the factor's inverse it made is kept on the process, the
    believer extends it over the running trials ([[L, 0], [B, C]]⁻¹ = [[L⁻¹, 0], [−C⁻¹BL⁻¹,
    C⁻¹]]), and the lean LogEI applies it: the extended inverse is the believing factor's,
    and the values are those of a fresh inverse and of Optuna's LogEI."""
    from costtune import gp

    study, dists, _ = _study_with_told_trials(60, model_check=-1.0)  # the check runs, never fails
    _, captured = _asked_fast(study, dists, 4)
    told, believer = captured[0], captured[-1]  # asked with none running, then with 3
    X = np.random.RandomState(2).random_sample((100, 4))
    X[:, 3] = np.floor(X[:, 3] * 3)
    for acqf, n in ((told, 60), (believer, 63)):
        gpr = acqf._gpr
        chol, kept = gpr._costtune_chol_inverse
        assert chol is gpr._cov_Y_Y_chol and kept.shape == (n, n)
        assert np.allclose(kept @ chol.numpy(), np.eye(n), atol=1e-9)
        lean = gp._lean_logei(acqf)
        assert lean is not None
        ours = lean(X)
        del gpr._costtune_chol_inverse  # a fresh inverse (LAPACK's dtrtri)
        fresh = gp._lean_logei(acqf)
        assert fresh is not None
        assert np.allclose(ours, fresh(X), rtol=1e-9, atol=1e-9)
        assert np.allclose(ours, acqf.eval_acqf_no_grad(X), rtol=1e-6, atol=1e-6)


def test_the_believer_never_builds_the_q_batch_posterior_it_replaces(monkeypatch) -> None:
    """With trials running, the fast ask's q-batch LogEI is only a stand-in
    (``_DeferredQLogEI``): the believer takes its place from its arguments, so Optuna's joint
    posterior over the running trials is never built, and the proposals are those the built
    one gave; per unit of cost too, the believer's LogEI then weighed by the cost."""
    import optuna._gp.gp as optuna_gp

    from costtune import gp

    built = []
    init = optuna_gp.ConditionalGPRegressor.__init__

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(optuna_gp.ConditionalGPRegressor, "__init__", spy)

    def asks(**kwargs) -> list[dict]:  # type: ignore[no-untyped-def]
        told, dists, _ = _study_with_told_trials(60)
        study = optuna.create_study(sampler=gp_sampler(0, fast_from=0, **kwargs))
        for trial in told.trials:  # the same trials, each with a cost per epoch
            cost = {gp.COST_ATTR: 1.0 + trial.params["layers"]}
            study.add_trial(
                optuna.trial.create_trial(
                    params=trial.params, distributions=dists, value=trial.value, user_attrs=cost
                )
            )
        return [study.ask(dists).params for _ in range(5)]

    deferred = asks()
    assert built == []
    costed = asks(cost_exponent=0.5)
    assert built == []
    monkeypatch.setattr(gp, "_DeferredQLogEI", gp._QLOGEI)  # Optuna's own, built at once
    assert asks() == deferred and asks(cost_exponent=0.5) == costed


def _told_only(base):  # type: ignore[no-untyped-def]
    """A new ``GPRegressor`` on ``base``'s told trials with its kernel's hyperparameters, its
    matrices not yet factorised."""
    import optuna._gp.gp as optuna_gp

    return optuna_gp.GPRegressor(
        is_categorical=base._is_categorical,
        X_train=base._X_train,
        y_train=base._y_train.squeeze(-1),
        inverse_squared_lengthscales=base.inverse_squared_lengthscales,
        kernel_scale=base.kernel_scale,
        noise_var=base.noise_var,
    )


def test_the_believers_process_is_optunas_with_the_running_trials_appended(monkeypatch) -> None:
    """The believer's NumPy process (the Cholesky factor extended by the running points, the
    told trials' weights with a 0 per running one) is Optuna's ``append_running_data`` at the
    posterior means: the same factor, weights and posterior, categorical dimension included."""
    import optuna._gp.acqf as acqf_module
    import torch

    from costtune import gp

    study, dists, _ = _study_with_told_trials(60)
    study.sampler._fast_from = 0
    captured: list = []  # the acquisition the fast ask searches
    search = gp.fast_optimize
    monkeypatch.setattr(
        gp, "fast_optimize", lambda acqf, *a, **kw: captured.append(acqf) or search(acqf, *a, **kw)
    )
    study.ask(dists)
    base = captured[0]._gpr
    running = np.random.RandomState(5).random_sample((6, 4))
    running[:, 3] = np.floor(running[:, 3] * 3)
    running[5] = base._X_train.numpy()[int(base._y_train.argmax())]  # at the best told trial's point
    threshold = float(base._y_train.median())  # a bar the believed best clears: it is raised
    q = acqf_module.qLogEI(base, captured[0].search_space, threshold, 128, 0, running)
    ours = gp._believer(q)
    assert type(ours) is acqf_module.LogEI

    theirs = _told_only(base)  # Optuna's own: posterior means appended as observations
    theirs._cov_Y_Y_chol, theirs._cov_Y_Y_inv_Y = base._cov_Y_Y_chol, base._cov_Y_Y_inv_Y
    with torch.no_grad():
        believed, _ = theirs.posterior(torch.from_numpy(running))
        theirs.append_running_data(torch.from_numpy(running), believed)
    mine = ours._gpr
    assert torch.allclose(mine._cov_Y_Y_chol, theirs._cov_Y_Y_chol, rtol=1e-8, atol=1e-10)
    assert torch.allclose(mine._cov_Y_Y_inv_Y, theirs._cov_Y_Y_inv_Y, rtol=1e-6, atol=1e-6)
    assert torch.allclose(mine._y_all, theirs._y_all) and torch.equal(mine._X_all, theirs._X_all)
    assert float(believed.max()) > threshold and ours._threshold == pytest.approx(float(believed.max()))
    X = torch.from_numpy(np.random.RandomState(6).random_sample((50, 4)))
    X[:, 3] = torch.floor(X[:, 3] * 3)
    with torch.no_grad():
        for a, b in zip(mine.posterior(X), theirs.posterior(X), strict=True):
            assert torch.allclose(a, b, rtol=1e-8, atol=1e-10)
    assert base._X_all.shape[0] == 60  # the process it believes on is left as it was


def test_the_fast_ask_with_running_trials_believes_them_and_spreads_out() -> None:
    """With trials running (asynchronous workers), the fast ask replaces Optuna's q-batch LogEI
    by a LogEI on a process that believes each running trial comes out at its posterior mean:
    the lean NumPy acquisition is that LogEI's, a running trial's point is worth less than it
    would be without it, and eight asks in a row, none told, propose eight distinct points."""
    import optuna._gp.acqf as acqf_module

    from costtune import gp

    study, dists, _ = _study_with_told_trials(60)
    running, captured = _asked_fast(study, dists, 8)
    points = [tuple(sorted(t.params.items())) for t in running]
    assert len(set(points)) == 8
    assert type(captured[0]) is acqf_module.LogEI and captured[0]._gpr._X_all.shape[0] == 60
    believer = captured[-1]  # asked with 7 running
    assert type(believer) is acqf_module.LogEI and believer._gpr._X_all.shape[0] == 67
    lean = gp._lean_logei(believer)
    assert lean is not None
    X = np.random.RandomState(3).random_sample((200, 4))
    X[:, 3] = np.floor(X[:, 3] * 3)
    at_running = believer._gpr._X_all.numpy()[60:]
    X[:7] = at_running
    assert np.allclose(lean(X), believer.eval_acqf_no_grad(X), rtol=1e-6, atol=1e-6)
    # the same process and hyperparameters without the running trials, the bar at the best told
    base = believer._gpr
    fresh = _told_only(base)
    fresh._cache_matrix()
    without = acqf_module.LogEI(fresh, believer.search_space, float(base._y_train.max()))
    lean_without = gp._lean_logei(without)
    assert lean_without is not None
    assert (lean(at_running) < lean_without(at_running) - 1e-3).all()

    study, dists, _ = _study_with_told_trials(60, believer=False)  # the benchmarks' B: Optuna's q-batch
    _, captured = _asked_fast(study, dists, 3)
    assert [type(a) for a in captured] == [acqf_module.LogEI, acqf_module.qLogEI, acqf_module.qLogEI]


def test_past_many_trials_the_gp_asks_fast_on_a_subset_and_still_proposes_well() -> None:
    """Past FAST_ASK_FROM completed trials the process sees FAST_SUBSET of them (the best
    half, the incumbent first among them, and a seeded draw of the rest) and the acquisition is
    searched over a few hundred candidates. Its proposals are valid values of every
    distribution, the same for the same seed, and far better than random ones."""
    from costtune import gp

    def proposals(seed: int) -> tuple[list[dict], list[float]]:
        study, dists, loss = _study_with_told_trials(gp.FAST_ASK_FROM + 50, seed=seed)
        asked, values, seen = [], [], set()
        for _ in range(12):
            trial = study.ask(dists)
            asked.append(trial.params)
            values.append(loss(trial.params))
            study.tell(trial, values[-1])
            seen.add(len(study.sampler._gprs_cache_list[0]._y_train))
        assert seen == {gp.FAST_SUBSET}
        return asked, values

    asked, values = proposals(0)
    assert asked == proposals(0)[0]  # seeded: the same proposals
    assert asked != proposals(1)[0]
    for p in asked:
        assert 1e-4 <= p["lr"] <= 1.0 and 16 <= p["units"] <= 512 and 1 <= p["layers"] <= 5
        assert isinstance(p["units"], int) and isinstance(p["layers"], int)
        assert p["act"] in ("relu", "gelu", "tanh")
    study, _, _ = _study_with_told_trials(gp.FAST_ASK_FROM + 50, seed=0)
    randoms = sorted(t.value for t in study.trials)
    assert sorted(values)[len(values) // 2] < randoms[len(randoms) // 10]  # better than 90% of random


def test_the_fast_paths_subset_keeps_the_best_trials() -> None:
    from costtune import gp

    study, _, _ = _study_with_told_trials(gp.FAST_SUBSET * 3, seed=2)
    completed = study.trials
    kept = study.sampler._subset(study, completed)
    assert len(kept) == gp.FAST_SUBSET
    assert [t.number for t in kept] == sorted(t.number for t in kept)  # in trial order
    by_value = sorted(completed, key=lambda t: t.value)
    assert {t.number for t in by_value[: gp.FAST_SUBSET // 2]} <= {t.number for t in kept}
    assert study.sampler._subset(study, completed[:50]) == completed[:50]  # few: all of them


def test_the_lean_standard_log_ei_is_optunas_in_both_branches() -> None:
    import optuna._gp.acqf as acqf
    import torch

    from costtune.gp import _standard_logei

    z = np.concatenate([np.linspace(-60.0, -25.5, 40), np.linspace(-25.0, 8.0, 200)])
    assert np.allclose(_standard_logei(z.copy()), acqf.standard_logei(torch.from_numpy(z)).numpy(), rtol=1e-9)


def test_a_sweeps_gp_searcher_takes_the_fast_ask_from_where_the_config_says() -> None:
    from costtune import gp

    default = make_searcher(SearcherConfig(type="gp"), "val_loss", "min", seed=0)
    assert default._sampler._fast_from == gp.FAST_ASK_FROM
    early = make_searcher(SearcherConfig(type="gp", fast_ask_from=0), "val_loss", "min", seed=0)
    assert early._sampler._fast_from == 0


POINTS = [{"lr": 0.001, "depth": 2, "act": "gelu"}, {"lr": 0.05, "depth": 1, "act": "relu"}]


@pytest.mark.parametrize("kind", ["gp", "optuna", "hyperopt"])
def test_each_searcher_tries_the_given_points_first_then_samples(kind) -> None:
    searcher = make_searcher(SearcherConfig(type=kind, points_to_evaluate=POINTS), "val_loss", "min", seed=3)
    assert searcher.set_search_properties("val_loss", "min", build_search_space(SPACE))
    asked = [searcher.suggest(f"t{i}") for i in range(4)]
    assert asked[:2] == POINTS
    assert all(a not in POINTS for a in asked[2:])  # then its own proposals


def _config(**searcher):
    from costtune.config import parse_config

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
    from costtune.config import parse_config
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


@contextlib.contextmanager
def _counting_fits() -> Iterator[list[int]]:
    """The number of trials of every kernel fit made while the block runs."""
    import optuna._gp.gp as gp_internals

    fits: list[int] = []
    original = gp_internals.GPRegressor._fit_kernel_params

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        fits.append(len(self._y_train))
        return original(self, *args, **kwargs)

    gp_internals.GPRegressor._fit_kernel_params = counting  # type: ignore[method-assign]
    try:
        yield fits
    finally:
        gp_internals.GPRegressor._fit_kernel_params = original  # type: ignore[method-assign]


def _study_misled(sampler, tag_stopped: bool = True) -> tuple[optuna.Study, dict]:
    """Full runs (8 epochs) at x = 0, 0.1, …, 0.6 whose loss falls towards x = 0.6, and trials
    a first rung stopped at epoch 2 at x ≥ 0.72 with a high, flat loss: what the GP is told on a
    sweep whose late droppers start flat."""
    from costtune.gp import EPOCHS_ATTR

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    study = optuna.create_study(sampler=sampler)
    told = [(i / 10, 1.0 - i / 10, 8) for i in range(7)] + [(0.72 + i * 0.04, 2.0, 2) for i in range(8)]
    for x, value, epochs in told:
        tags = {EPOCHS_ATTR: epochs} if tag_stopped or epochs == 8 else {}
        study.add_trial(
            optuna.trial.create_trial(params={"x": x}, distributions=dists, value=value, user_attrs=tags)
        )
    return study, dists


def test_the_gp_told_to_forget_the_rungs_losses_models_the_full_runs_alone() -> None:
    """``CpuGPSampler.forget_below(8)``: the process fitted to every trial stays below the flat
    losses the rung stopped (x < 0.72); told to forget trials of fewer than 8 epochs, it follows
    the full runs' fall into the region the rung judged (x > 0.72), for every seed. A trial
    without the epochs attribute counts as a full run."""
    from costtune.gp import EPOCHS_ATTR

    for seed in range(3):
        plain_sampler, forgetting = gp_sampler(seed, n_startup_trials=5), gp_sampler(seed, n_startup_trials=5)
        plain, dists = _study_misled(plain_sampler)
        forgot, _ = _study_misled(forgetting)
        forgetting.forget_below(8)
        assert plain.ask(dists).params["x"] < 0.72 < forgot.ask(dists).params["x"]
        forgetting.forget_below(None)  # the rungs trusted again (weak_rank_tau): every trial is fitted
        assert forgot.ask(dists).params["x"] < 0.72
    # untagged trials (points told from outside the sweep) are kept: the flat ones, untagged, still count
    untagged, dists = _study_misled(gp_sampler(0, n_startup_trials=5), tag_stopped=False)
    untagged.sampler.forget_below(8)
    assert EPOCHS_ATTR not in untagged.trials[-1].user_attrs
    assert untagged.ask(dists).params["x"] < 0.72


def test_the_gp_on_its_longest_runs_fits_the_trials_that_ran_as_long_as_the_nth_longest() -> None:
    """``longest_min=n``: the process fits the completed trials that ran at least the epochs of
    the n-th longest (BOHB's largest budget with n observations). With 7 full runs of 8 epochs
    and 8 trials stopped at 2, n = 7 forgets the stopped ones, proposal for proposal as
    ``forget_below(8)``; n = 8 reaches into the stopped ones and fits every trial, as the plain
    process. n below the start-up trials would leave the process nothing to model: refused."""
    for seed in range(3):
        forgetting = gp_sampler(seed, n_startup_trials=5)
        forgot, dists = _study_misled(forgetting)
        forgetting.forget_below(8)
        longest, _ = _study_misled(gp_sampler(seed, n_startup_trials=5, longest_min=7))
        expected = forgot.ask(dists).params["x"]
        assert longest.ask(dists).params["x"] == pytest.approx(expected) and expected > 0.72
        plain, _ = _study_misled(gp_sampler(seed, n_startup_trials=5))
        every, _ = _study_misled(gp_sampler(seed, n_startup_trials=5, longest_min=8))
        expected = plain.ask(dists).params["x"]
        assert every.ask(dists).params["x"] == pytest.approx(expected) and expected < 0.72
    with pytest.raises(ValueError, match="longest_min: must be at least n_startup_trials"):
        gp_sampler(0, n_startup_trials=5, longest_min=4)


def test_the_gp_on_its_longest_runs_refits_when_its_floor_rises_past_many_trials() -> None:
    """Past REFIT_EVERY_ASK_UNTIL trials an ask reuses the last fit while the trials grow by
    less than REFIT_GROWTH; once the n-th longest run rises (other trials fitted), it refits on
    the trials now fitted, though their number alone would have kept the old fit."""
    import random

    from costtune.gp import EPOCHS_ATTR

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    study = optuna.create_study(sampler=gp_sampler(3, n_startup_trials=5, fast_from=10**6, longest_min=5))
    rng = random.Random(0)

    def add(n: int, epochs: int) -> None:
        for _ in range(n):
            x = rng.random()
            study.add_trial(
                optuna.trial.create_trial(
                    params={"x": x},
                    distributions=dists,
                    value=(x - 0.3) ** 2,
                    user_attrs={EPOCHS_ATTR: epochs},
                )
            )

    with _counting_fits() as fits:
        add(210, 2)
        study.ask(dists)
        assert fits == [210]
        add(4, 8)  # four long runs: the 5th longest is still a 2-epoch trial, 214 < 231 fitted
        study.ask(dists)
        assert fits == [210]
        add(205, 8)  # the 5th longest now ran 8: 209 trials fitted, a fit of its own
        study.ask(dists)
        assert fits == [210, 209]


def test_a_sweeps_searcher_tags_epochs_and_forgets_the_rungs_once_the_hedge_switched() -> None:
    """The searcher a sweep runs (RungEstimates around Ray's OptunaSearch with the default GP,
    beside a real CostAwareHyperBand): each ended trial's Optuna trial carries the epochs it ran
    (Tune's ``training_iteration``); once the policy has switched to full runs, the sampler fits
    only the trials that ran ``max_epochs``, and that survives Tune's pickling of the searcher."""
    import pickle

    from costtune.gp import EPOCHS_ATTR
    from costtune.schedulers import CostAwareHyperBand
    from costtune.search import RungEstimates

    scheduler = CostAwareHyperBand(max_epochs=8, grace_epochs=2, eta=2, escalate=True, hedge=True)
    inner = make_searcher(SearcherConfig(type="gp", n_startup_trials=2), "val_loss", "min", 3)
    searcher = RungEstimates(inner, scheduler)
    assert searcher.set_search_properties("val_loss", "min", build_search_space(SPACE))
    for i, epochs in enumerate([2, 8, 2, 4]):
        searcher.suggest(f"t{i}")
        searcher.on_trial_complete(f"t{i}", result={"val_loss": 1.0 / (i + 1), "training_iteration": epochs})
    study = inner._ot_study
    assert [t.user_attrs[EPOCHS_ATTR] for t in study.trials] == [2, 8, 2, 4]
    assert study.sampler._min_epochs is None  # not switched: every trial is modelled
    scheduler.policy.switched = True  # what a full run the first rung would have pruned, as the best, sets
    searcher.suggest("t4")
    searcher.on_trial_complete("t4", result={"val_loss": 0.1, "training_iteration": 8})
    assert study.sampler._min_epochs == 8
    copy = pickle.loads(pickle.dumps(inner))
    assert copy._ot_study.sampler._min_epochs == 8
    assert copy.suggest("t5") == inner.suggest("t5")


def _proposals(fidelity_epochs: int | None, epochs_of, asks: int = 14) -> list[tuple[float, int, str]]:
    """``asks`` proposals of a seeded GP on a three-parameter loss, each trial tagged with the
    epochs it ran (``epochs_of(i)``)."""
    import math

    from costtune.gp import EPOCHS_ATTR

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    sampler = gp_sampler(3, n_startup_trials=5, value_transform="clip", fidelity_epochs=fidelity_epochs)
    study = optuna.create_study(sampler=sampler)
    out = []
    for i in range(asks):
        trial = study.ask()
        x = trial.suggest_float("x", 1e-4, 1e-1, log=True)
        w = trial.suggest_int("w", 1, 8)
        c = trial.suggest_categorical("c", ["a", "b"])
        trial.set_user_attr(EPOCHS_ATTR, epochs_of(i))
        study.tell(trial, (math.log10(x) + 2.5) ** 2 + 0.1 * w + 0.3 * (c == "a"))
        assert set(trial.params) == {"x", "w", "c"}  # the epochs input never reaches a trial
        out.append((x, w, c))
    return out


def test_a_gp_over_epochs_where_every_trial_ran_them_all_proposes_what_the_plain_gp_does() -> None:
    """``fidelity_epochs``: the epochs a trial ran are one more input of the process, and the
    acquisition is read at the last epoch. Where every trial ran every epoch that input is the
    same for all and the proposals are the plain process's (up to the kernel fit's tolerance);
    where half the trials stopped at epoch 5 they are not."""
    plain = _proposals(None, lambda i: 60)
    over_epochs = _proposals(60, lambda i: 60)
    for (x, w, c), (x2, w2, c2) in zip(plain, over_epochs, strict=True):
        assert (w, c) == (w2, c2) and abs(np.log10(x) - np.log10(x2)) < 1e-2
    halves = _proposals(60, lambda i: 5 if i % 2 else 60)
    assert halves[:5] == plain[:5]  # the random start-up
    assert halves[5:] != plain[5:]
    assert _proposals(60, lambda i: 5 if i % 2 else 60) == halves  # seeded
    with pytest.raises(ValueError, match="fidelity_epochs"):
        gp_sampler(0, fidelity_epochs=1)


def test_a_gp_over_epochs_looks_past_configurations_that_start_fast_and_end_badly() -> None:
    """Full runs end best near x = 0.8, where the curves start slowly (epoch-5 losses 1.5);
    near x = 0.2 they start fast (0.6) and end worse. Told each trial's last loss, the plain
    process proposes far from both; over (x, epochs) it models the end of a run and proposes
    near the best full run."""
    from optuna.distributions import FloatDistribution

    from costtune.gp import EPOCHS_ATTR

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = {"x": FloatDistribution(0.0, 1.0)}
    full = [(0.2, 0.30), (0.5, 0.20), (0.8, 0.10), (0.05, 0.35), (0.95, 0.2)]
    fast = [(x, 0.6) for x in (0.12, 0.15, 0.18, 0.22, 0.25, 0.28)]
    slow = [(x, 1.5) for x in (0.72, 0.75, 0.78, 0.82, 0.85, 0.88)]
    proposed = {}
    for fidelity in (None, 60):
        study = optuna.create_study(
            sampler=gp_sampler(0, n_startup_trials=5, value_transform="clip", fidelity_epochs=fidelity)
        )
        for epochs, runs in ((60, full), (5, fast + slow)):
            for x, loss in runs:
                study.add_trial(
                    optuna.trial.create_trial(
                        params={"x": x}, distributions=space, value=loss, user_attrs={EPOCHS_ATTR: epochs}
                    )
                )
        proposed[fidelity] = study.ask(space).params["x"]
    assert 0.6 < proposed[60] < 0.95
    assert not 0.6 < proposed[None] < 0.95


@pytest.mark.parametrize("fast_from", [None, 0])
def test_a_gp_over_epochs_asks_with_trials_running_and_on_the_fast_path(fast_from) -> None:
    """Running trials (asked, not yet told) count at the last epoch, on Optuna's search and on
    the fast ask's; the proposals stay in the space and differ from the running ones."""
    from costtune.gp import EPOCHS_ATTR

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    sampler = gp_sampler(1, n_startup_trials=4, fidelity_epochs=52, fast_from=fast_from)
    study = optuna.create_study(sampler=sampler)
    for i in range(8):
        trial = study.ask()
        x = trial.suggest_float("x", -3.0, 3.0)
        trial.set_user_attr(EPOCHS_ATTR, 52 if i % 3 == 0 else 5)
        study.tell(trial, (x - 1.0) ** 2 + (0.0 if i % 3 == 0 else 1.0))
    running = [study.ask() for _ in range(3)]
    xs = [t.suggest_float("x", -3.0, 3.0) for t in running]
    assert all(-3.0 <= x <= 3.0 for x in xs) and len(set(xs)) == 3
    assert all(set(t.params) == {"x"} for t in running)


def test_a_sweeps_gp_over_epochs_models_the_epochs_its_trials_ran() -> None:
    """``searcher.over_epochs``: the sweep's GP (RungEstimates around Ray's OptunaSearch) gets the
    sweep's max_epochs as its last epoch, the epochs each trial ran tag its Optuna trial, and
    the process is fitted over one more input than the space has; off by default, and refused
    with any other searcher in one line."""
    from costtune.schedulers import CostAwareHyperBand
    from costtune.search import RungEstimates

    assert SearcherConfig().over_epochs is False
    plain = make_searcher(SearcherConfig(type="gp"), "val_loss", "min", 3, max_epochs=8)
    assert plain.set_search_properties("val_loss", "min", build_search_space(SPACE))
    assert plain._ot_study.sampler._fidelity_epochs is None
    scheduler = CostAwareHyperBand(max_epochs=8, grace_epochs=2, eta=2)
    config = SearcherConfig(type="gp", n_startup_trials=2, over_epochs=True)
    inner = make_searcher(config, "val_loss", "min", 3, max_epochs=8)
    searcher = RungEstimates(inner, scheduler)
    assert searcher.set_search_properties("val_loss", "min", build_search_space(SPACE))
    sampler = inner._ot_study.sampler
    assert sampler._fidelity_epochs == 8
    for i, epochs in enumerate([2, 8, 2, 4, 8]):
        config = searcher.suggest(f"t{i}")
        assert set(config) == set(SPACE)
        searcher.on_trial_complete(f"t{i}", result={"val_loss": 1.0 / (i + 1), "training_iteration": epochs})
    assert len(sampler._gprs_cache_list[0].inverse_squared_lengthscales) == len(SPACE) + 1
    with pytest.raises(ValueError, match="searcher.over_epochs: only the gp searcher"):
        SearcherConfig(type="optuna", over_epochs=True)


def test_a_sweeps_gp_per_unit_of_cost_weighs_its_proposals_by_the_metered_seconds_per_epoch() -> None:
    """``searcher.cost_exponent``: the sweep's GP (RungEstimates around Ray's OptunaSearch) tags
    each ended trial with its seconds per epoch (the result's seconds field over its epochs) and
    proposes per unit of cost: on a loss that does not tell x apart, where x > 0.5 takes 100
    times longer per epoch, α = 1 proposes cheap x and α = 0 does not care. Off by default;
    refused with another searcher in one line."""
    from costtune.gp import COST_ATTR
    from costtune.search import RungEstimates

    assert SearcherConfig().cost_exponent == 0.0
    space = {
        "x": ParamSpec(type="uniform", low=0.0, high=1.0),
        "y": ParamSpec(type="uniform", low=0.0, high=1.0),
    }
    proposed: dict[float, list[float]] = {}
    for alpha in (0.0, 1.0):
        inner = make_searcher(
            SearcherConfig(type="gp", n_startup_trials=10, cost_exponent=alpha), "val_loss", "min", 2
        )
        searcher = RungEstimates(inner, seconds_field="replayed_seconds")
        assert searcher.set_search_properties("val_loss", "min", build_search_space(space))
        assert inner._ot_study.sampler._cost_exponent == alpha
        xs = []
        for i in range(16):
            config = searcher.suggest(f"t{i}")
            epochs = 2 + i % 3
            per_epoch = 100.0 if config["x"] > 0.5 else 1.0
            result = {
                "val_loss": (config["y"] - 0.5) ** 2,
                "training_iteration": epochs,
                "replayed_seconds": per_epoch * epochs,
                "time_total_s": 1.0,  # not the sweep's seconds field: never read
            }
            searcher.on_trial_complete(f"t{i}", result=result)
            xs.append(config["x"])
        tags = [t.user_attrs[COST_ATTR] for t in inner._ot_study.trials]
        assert tags == [100.0 if x > 0.5 else 1.0 for x in xs]
        proposed[alpha] = xs[10:]
    assert all(x < 0.5 for x in proposed[1.0])
    assert any(x > 0.5 for x in proposed[0.0])
    with pytest.raises(ValueError, match="searcher.cost_exponent: only the gp searcher"):
        SearcherConfig(type="optuna", cost_exponent=0.5)
    with pytest.raises(ValueError, match="cost_exponent"):
        SearcherConfig(cost_exponent=-0.5)


def test_the_gp_per_unit_of_cost_keeps_its_cost_kernel_while_it_keeps_its_loss_kernel() -> None:
    """Past REFIT_EVERY_ASK_UNTIL trials an ask that keeps the loss process's fit keeps the cost
    process's kernel too, conditioned on the trials it sees: one fit each at the first ask,
    none at the next; the proposals still go where epochs are cheap."""
    from costtune.gp import COST_ATTR, REFIT_EVERY_ASK_UNTIL

    study, dists = _priced_study(REFIT_EVERY_ASK_UNTIL + 10)
    with _counting_fits() as fits:
        xs = []
        for ask in range(3):
            trial = study.ask(dists)
            xs.append(trial.params["x"])
            trial.set_user_attr(COST_ATTR, 100.0 if trial.params["x"] > 0.5 else 1.0)
            study.tell(trial, (trial.params["y"] - 0.5) ** 2)
            assert len(fits) == 2, (ask, fits)  # the loss and the cost process, at the first ask only
    assert all(x < 0.5 for x in xs)
    assert study.sampler._cost_gpr is not None


def _study_on(objective, sampler, n: int = 24) -> optuna.Study:
    dists = {
        "x": optuna.distributions.FloatDistribution(0, 1),
        "y": optuna.distributions.FloatDistribution(0, 1),
    }
    study = optuna.create_study(sampler=sampler)
    for _ in range(n):
        trial = study.ask(dists)
        study.tell(trial, objective(trial.params["x"], trial.params["y"], trial.number))
    return study


def _smooth(x: float, y: float, number: int) -> float:
    return (x - 0.3) ** 2 + (y - 0.6) ** 2


def _noise(x: float, y: float, number: int) -> float:
    """A value no hyperparameter explains: each trial's own, drawn from its number."""
    return float(np.random.default_rng(number).normal())


def test_the_model_checks_ranks_are_scipys_average_ranks() -> None:
    """The check's own ranking (``gp._rankdata``) gives SciPy's ``rankdata`` to the bit, ties
    averaged, on values with many ties and none."""
    from scipy.stats import rankdata

    from costtune.gp import _rankdata

    draw = np.random.default_rng(0)
    for n, decimals in ((1, 0), (7, 0), (128, 1), (128, 8), (300, 0)):
        values = np.round(draw.normal(size=n), decimals)
        assert np.array_equal(_rankdata(values), rankdata(values))


def test_the_gps_leave_one_out_check_reads_whether_it_ranks_trials_it_was_not_shown() -> None:
    """``loo_spearman``, judged once the process holds ``MODEL_CHECK_MIN_TRIALS`` (20) trials: on a
    smooth objective its leave-one-out predictions rank the trials it fitted (none below 0.6; as it
    closes in on the optimum, the trials it packs there are harder to rank); on values no
    hyperparameter explains, they do not (median of the last 10 checks, at 30–39 trials, below
    0.3). ``model_check=-1`` records the checks and never falls back."""
    from costtune.gp import MODEL_CHECK_MIN_TRIALS

    for seed in range(3):
        smooth = gp_sampler(seed, n_startup_trials=5, model_check=-1.0)
        _study_on(_smooth, smooth, n=40)
        noise = gp_sampler(seed, n_startup_trials=5, model_check=-1.0)
        _study_on(_noise, noise, n=40)
        assert len(smooth.checks) == len(noise.checks) == 40 - MODEL_CHECK_MIN_TRIALS  # from trial 20 on
        assert min(smooth.checks) >= 0.6
        assert float(np.median(noise.checks[-10:])) < 0.3
        assert not smooth._fell_back and not noise._fell_back


def test_the_leave_one_out_predictions_are_those_of_a_process_refitted_without_each_trial() -> None:
    """The check's closed form (μ₋ᵢ = yᵢ − [K⁻¹y]ᵢ / [K⁻¹]ᵢᵢ, from L⁻¹) gives what conditioning
    the same kernel on the other n − 1 trials predicts at each trial, brute force."""
    import optuna._gp.gp as optuna_gp
    import torch

    from costtune.gp import _spearman, loo_spearman

    draw = np.random.default_rng(4)
    X = draw.random((30, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2 + 0.3 * draw.normal(size=30)

    def process(keep: np.ndarray):  # type: ignore[no-untyped-def]
        gpr = optuna_gp.GPRegressor(
            is_categorical=torch.zeros(3, dtype=torch.bool),
            X_train=torch.from_numpy(X[keep]),
            y_train=torch.from_numpy(y[keep]),
            inverse_squared_lengthscales=torch.tensor([4.0, 2.0, 1.0], dtype=torch.float64),
            kernel_scale=torch.tensor(1.5, dtype=torch.float64),
            noise_var=torch.tensor(0.05, dtype=torch.float64),
        )
        gpr._cache_matrix()
        return gpr

    everyone = np.arange(30)
    brute = np.empty(30)
    with torch.no_grad():
        for i in everyone:
            mean, _ = process(everyone != i).posterior(torch.from_numpy(X[i]))
            brute[i] = float(mean)
    rho = loo_spearman(process(everyone == everyone))
    assert rho is not None and rho == pytest.approx(_spearman(y, brute), abs=1e-12)
    assert 0.3 < rho < 1.0  # a correlation the noise keeps from 1


def test_the_gp_reads_again_only_the_trials_past_its_settled_head() -> None:
    """``CpuGPSampler._told_and_running`` keeps the leading trials that have all finished and
    reads only those past them: through trials enqueued (waiting), asked and left running, then
    completed, pruned or failed out of order, it gives what reading every trial gives (the
    completed ones, their values, the running ones), and a pickled sampler reads afresh."""
    import pickle
    import random

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    sampler = gp_sampler(0)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    draw = random.Random(3)
    open_trials: list = []
    for _ in range(160):
        action = draw.random()
        if action < 0.1:
            study.enqueue_trial({"x": draw.random()})
        elif action < 0.55 or not open_trials:
            open_trials.append(study.ask(dists))
        else:
            trial = open_trials.pop(draw.randrange(len(open_trials)))
            kind = draw.random()
            if kind < 0.7:
                study.tell(trial, trial.params["x"] ** 2 + draw.random())
            else:
                state = optuna.trial.TrialState.PRUNED if kind < 0.85 else optuna.trial.TrialState.FAIL
                study.tell(trial, state=state)
        completed, values, running = sampler._told_and_running(study)
        states = optuna.trial.TrialState
        assert [t.number for t in completed] == [t.number for t in study.trials if t.state is states.COMPLETE]
        assert values.tolist() == [t.value for t in completed]
        assert [t.number for t in running] == [t.number for t in study.trials if t.state is states.RUNNING]
    assert 0 < sampler._head.settled < len(study.trials)  # some running: the head stopped short
    assert pickle.loads(pickle.dumps(sampler))._head is None


def test_where_the_gp_cannot_rank_its_own_trials_tpe_proposes() -> None:
    """``model_check=θ``: an ask whose leave-one-out check falls below θ discards the process's
    proposal and takes univariate TPE's (Optuna's ``TPESampler`` over the same trials). A check
    that never fails (θ = −1) leaves the proposals the plain process's, trial for trial; on
    noise, TPE proposes some, seeded: the same seed gives the same trials."""
    for seed in range(2):
        plain = _study_on(_smooth, gp_sampler(seed, n_startup_trials=5))
        checked_sampler = gp_sampler(seed, n_startup_trials=5, model_check=-1.0)
        checked = _study_on(_smooth, checked_sampler)
        assert not checked_sampler._fell_back and len(checked_sampler.checks) == 4  # trials 20-23
        assert [t.params for t in plain.trials] == [t.params for t in checked.trials]
    runs = []
    for _ in range(2):
        sampler = gp_sampler(0, n_startup_trials=5, model_check=0.4)
        study = _study_on(_noise, sampler, n=40)
        runs.append([t.params for t in study.trials])
        assert sampler._fell_back and min(sampler._fell_back) >= 20  # never below 20 trials
        key = optuna.samplers._gp.sampler._RELATIVE_PARAMS_KEY
        for t in study.trials:  # a discarded proposal is not shared with other processes
            assert any(k.startswith(key) for k in t.system_attrs) == (
                t.number >= 5 and t.number not in sampler._fell_back
            )
    assert runs[0] == runs[1]
    plain_noise = _study_on(_noise, gp_sampler(0, n_startup_trials=5), n=40)
    assert [t.params for t in plain_noise.trials] != runs[0]


@pytest.mark.parametrize("bad", [1.5, -2.0])
def test_the_gps_model_check_is_a_correlation(bad) -> None:
    with pytest.raises(ValueError, match=r"model_check: a Spearman correlation in \[-1, 1\], got"):
        gp_sampler(0, model_check=bad)


def test_a_sweeps_gp_searcher_hands_an_ask_to_tpe_where_it_cannot_rank_its_trials() -> None:
    """Through Ray Tune's OptunaSearch, as a sweep runs it (``searcher.model_check``, 0.4 by
    default): on losses no hyperparameter explains, past 20 trials some asks go to TPE, and the
    same seed gives the same proposals; the searcher still pickles (Tune checkpoints it)."""
    import pickle

    def run(seed: int) -> tuple[list[dict], set[int]]:
        searcher = make_searcher(SearcherConfig(type="gp"), "val_loss", "min", seed)
        assert searcher.set_search_properties("val_loss", "min", build_search_space(SPACE))
        seen = []
        for i in range(40):
            config = searcher.suggest(f"t{i}")
            searcher.on_trial_complete(f"t{i}", result={"val_loss": _noise(0, 0, i)})
            seen.append(config)
        pickle.loads(pickle.dumps(searcher))
        return seen, set(searcher._sampler._fell_back)

    first, fell_back = run(5)
    assert fell_back and min(fell_back) >= 20
    assert run(5) == (first, fell_back)


_TPE_SPACE = {
    "lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
    "momentum": optuna.distributions.FloatDistribution(0.1, 0.99),
    "wd": optuna.distributions.FloatDistribution(0.0, 0.1, step=0.01),
    "batch": optuna.distributions.IntDistribution(16, 512, log=True),
    "layers": optuna.distributions.IntDistribution(1, 5),
    "opt": optuna.distributions.CategoricalDistribution(["sgd", "adam", "rms"]),
    "width": optuna.distributions.CategoricalDistribution([32, 64, 128]),  # numbers, read as choices
}


def _tpe_loss(p: dict) -> float:
    return (
        (np.log10(p["lr"]) + 2) ** 2
        + (p["momentum"] - 0.9) ** 2
        + 0.3 * (p["opt"] == "adam")
        + p["wd"]
        + 0.001 * p["width"]
    )


def _tpe_study(sampler, n: int) -> optuna.Study:
    """``n`` random trials, every fifth pruned with an intermediate value (TPE ranks those
    after the completed ones), then told to ``sampler``'s study."""
    study = optuna.create_study(sampler=sampler)
    draw = np.random.default_rng(n)
    for i in range(n):
        params = {}
        for name, d in _TPE_SPACE.items():
            if isinstance(d, optuna.distributions.CategoricalDistribution):
                params[name] = d.choices[int(draw.integers(len(d.choices)))]
            elif isinstance(d, optuna.distributions.IntDistribution):
                params[name] = int(draw.integers(d.low, d.high + 1))
            else:
                params[name] = (
                    float(d.low + (d.high - d.low) * draw.random())
                    if not d.log
                    else float(np.exp(draw.uniform(np.log(d.low), np.log(d.high))))
                )
        params["wd"] = round(params["wd"], 2)
        if i % 5 == 4:
            pruned = optuna.trial.TrialState.PRUNED
            study.add_trial(
                optuna.trial.create_trial(
                    params=params,
                    distributions=_TPE_SPACE,
                    state=pruned,
                    intermediate_values={3: _tpe_loss(params)},
                )
            )
        else:
            study.add_trial(
                optuna.trial.create_trial(params=params, distributions=_TPE_SPACE, value=_tpe_loss(params))
            )
    return study


def _same_proposal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] if isinstance(a[k], str) else np.isclose(a[k], b[k], rtol=1e-9, atol=0) for k in a
    )


@pytest.mark.parametrize("n", [12, 40, 300])
def test_the_quick_tpe_proposes_what_optunas_univariate_tpe_does(n) -> None:
    """The model check's fallback, :class:`~costtune.tpe.QuickTPESampler`, is Optuna's univariate
    TPE at its defaults (constant liar included) computed in fewer passes: from the same trials
    and seed it proposes the same configurations to rounding, over float, log, stepped, int and
    categorical parameters, pruned trials, asks left running and asks told, below and past the
    25 trials where Optuna's weights start to ramp."""
    from costtune.tpe import QuickTPESampler

    studies = [
        _tpe_study(optuna.samplers.TPESampler(seed=7, multivariate=False), n),
        _tpe_study(QuickTPESampler(seed=7), n),
    ]
    proposals: list[list[dict]] = [[], []]
    for k in range(8):
        for study, seen in zip(studies, proposals, strict=True):
            trial = study.ask(_TPE_SPACE)
            seen.append(trial.params)
            if k % 2:  # every other ask stays running: the constant liar counts it among the rest
                study.tell(trial, _tpe_loss(trial.params))
    assert all(_same_proposal(a, b) for a, b in zip(*proposals, strict=True)), (
        proposals[0][:2],
        proposals[1][:2],
    )
    assert len({p["lr"] for p in proposals[1]}) == 8
    quick = studies[1].sampler
    from optuna.samplers._tpe import _truncnorm
    from scipy.special import log_ndtr, ndtr

    assert _truncnorm._log_ndtr is not log_ndtr and _truncnorm._ndtr is not ndtr  # Optuna's own, put back
    assert (
        quick._split is not None and quick._store.size == n + 3
    )  # its own path ran: the trials told before its last ask


def _ragged_tpe_study(sampler, n: int, seed: int, direction: str, pruned: float) -> optuna.Study:
    """``n`` trials that each draw some of ``_TPE_SPACE`` (a conditional space), with tied
    values; a share ``pruned`` pruned (at a step, with a NaN there, or before any step), some
    failed."""
    study = optuna.create_study(sampler=sampler, direction=direction)
    draw = np.random.default_rng(seed)
    for _ in range(n):
        params = {}
        for name, d in _TPE_SPACE.items():
            if name not in ("lr", "momentum") and draw.random() < 0.2:
                continue
            if isinstance(d, optuna.distributions.CategoricalDistribution):
                params[name] = d.choices[int(draw.integers(len(d.choices)))]
            elif isinstance(d, optuna.distributions.IntDistribution):
                params[name] = int(draw.integers(d.low, d.high + 1))
            elif d.step:
                params[name] = round(float(draw.integers(0, 11)) * 0.01, 2)
            else:
                params[name] = float(
                    np.exp(draw.uniform(np.log(d.low), np.log(d.high)))
                    if d.log
                    else draw.uniform(d.low, d.high)
                )
        distributions = {name: _TPE_SPACE[name] for name in params}
        kind = draw.random()
        if kind < pruned:
            steps = {} if draw.random() < 0.3 else {int(draw.integers(1, 5)): float(draw.normal())}
            if steps and draw.random() < 0.2:
                steps = {step: float("nan") for step in steps}
            trial = optuna.trial.create_trial(
                params=params,
                distributions=distributions,
                state=optuna.trial.TrialState.PRUNED,
                intermediate_values=steps,
            )
        elif kind < pruned + 0.05:
            trial = optuna.trial.create_trial(
                params=params, distributions=distributions, state=optuna.trial.TrialState.FAIL
            )
        else:
            value = round(float(draw.normal()), 1)  # ties
            trial = optuna.trial.create_trial(params=params, distributions=distributions, value=value)
        study.add_trial(trial)
    return study


@pytest.mark.parametrize("seed", range(10))
def test_the_quick_tpe_proposes_what_optunas_does_on_conditional_tied_and_pruned_trials(seed) -> None:
    """The split and the Parzen estimators as Optuna makes them where trials lack parameters,
    values tie, pruned trials carry a step, a NaN or nothing (most of the good trials where
    most are pruned), and the study maximises; the parameters asked in either order."""
    from costtune.tpe import QuickTPESampler

    n, direction = (11, 30, 80, 200, 12)[seed % 5], ("minimize", "maximize")[seed % 2]
    pruned = 0.15 if seed < 5 else 0.85
    studies = [
        _ragged_tpe_study(
            optuna.samplers.TPESampler(seed=seed, multivariate=False), n, seed, direction, pruned
        ),
        _ragged_tpe_study(QuickTPESampler(seed=seed), n, seed, direction, pruned),
    ]
    proposals: list[list[dict]] = [[], []]
    for k in range(6):
        order = list(_TPE_SPACE) if k % 2 else list(reversed(_TPE_SPACE))
        for study, seen in zip(studies, proposals, strict=True):
            trial = study.ask()
            params = {name: trial._suggest(name, _TPE_SPACE[name]) for name in order}
            seen.append(params)
            if k % 3 != 2:
                study.tell(trial, _tpe_loss(params))
    assert all(_same_proposal(a, b) for a, b in zip(*proposals, strict=True)), proposals


@pytest.mark.parametrize("shuffled", [False, True, "fewer"])
def test_the_quick_tpe_proposes_an_asks_numeric_parameters_at_once_as_optuna_does_one_by_one(
    shuffled,
) -> None:
    """Over numeric parameters an ask's proposals are made together at its first parameter, in
    the order the latest trial asked them; they are Optuna's, one parameter after another, and
    where an ask takes another order, the rest of it is too, or where it asks fewer, the next."""
    from costtune.tpe import QuickTPESampler

    space = {
        k: d for k, d in _TPE_SPACE.items() if not isinstance(d, optuna.distributions.CategoricalDistribution)
    }
    studies = [
        _ragged_tpe_study(optuna.samplers.TPESampler(seed=3, multivariate=False), 120, 3, "minimize", 0.15),
        _ragged_tpe_study(QuickTPESampler(seed=3), 120, 3, "minimize", 0.15),
    ]
    for study in studies:  # the latest trial asked every numeric parameter, in the space's order
        params = {k: d.low if not d.log else d.low * 2 for k, d in space.items()}
        study.add_trial(optuna.trial.create_trial(params=params, distributions=space, value=9.0))
    order = np.random.default_rng(0)
    proposals: list[list[dict]] = [[], []]
    served = 0
    for k in range(8):
        names = list(space)
        if shuffled is True and k % 2:
            order.shuffle(names)
        elif shuffled == "fewer" and k % 2:
            names = names[:2]  # a conditional space: the rest are not asked this time
        for study, seen in zip(studies, proposals, strict=True):
            trial = study.ask()
            params = {name: trial._suggest(name, space[name]) for name in names}
            seen.append(params)
            study.tell(
                trial,
                (np.log10(params["lr"]) + 2) ** 2 + params.get("wd", 0.05) + 0.01 * params.get("layers", 3),
            )
        batch = studies[1].sampler._batch
        served += batch.served[0] if batch is not None else 0
    assert all(_same_proposal(a, b) for a, b in zip(*proposals, strict=True)), proposals
    if shuffled:  # some asks took the predicted order; the others went one by one, or asked fewer
        assert 0 < served < 8 * len(space)
    else:
        assert served == 8 * len(space)


_D = optuna.distributions


@pytest.mark.parametrize(
    "dist",
    [
        _D.FloatDistribution(1e-4, 1e-1, log=True),
        _D.FloatDistribution(0.1, 0.99),
        _D.FloatDistribution(0.0, 0.5, step=0.01),
        _D.IntDistribution(1, 5),
        _D.IntDistribution(16, 512, log=True),
        _D.IntDistribution(0, 100_000),
    ],
    ids=str,
)
def test_the_quick_tpes_density_is_optunas_parzen_estimators(dist) -> None:
    """:meth:`costtune.tpe._Kernels.log_pdf`, which skips the kernels that add nothing (those
    more than 40 nats below the prior's at a candidate, sought in a window around it) and takes
    each term's exp against one shift, gives Optuna's mixture density to 1e-12: from 5 to
    3,000 observations, spread, clustered (so that a few kernels are wide) and tied, at
    candidates the estimator draws and at the ends of the range."""
    from optuna.samplers._tpe import parzen_estimator as pe
    from optuna.samplers._tpe.sampler import default_weights

    from costtune.tpe import _Kernels

    parameters = pe._ParzenEstimatorParameters(
        prior_weight=1.0,
        consider_magic_clip=True,
        consider_endpoints=False,
        weights=default_weights,
        multivariate=False,
    )
    draw = np.random.default_rng(0)
    stepped = isinstance(dist, _D.IntDistribution) or dist.step is not None
    worst = 0.0
    for n in (5, 60, 400, 3_000):
        for shape in ("spread", "clustered", "tied"):
            u = draw.random(n) if shape != "clustered" else draw.beta(0.3, 4.0, n)
            if shape == "tied":
                u[: n // 2] = u[0]
            low, high = (np.log(dist.low), np.log(dist.high)) if dist.log else (dist.low, dist.high)
            obs = low + u * (high - low)
            obs = np.exp(obs) if dist.log else obs
            if stepped:
                step = dist.step or 1
                obs = np.clip(dist.low + np.round((obs - dist.low) / step) * step, dist.low, dist.high)
            estimator = pe._ParzenEstimator({"p": obs}, {"p": dist}, parameters)
            x = estimator._mixture_distribution.sample(draw, 24)[:, 0]
            x = np.append(x, [dist.low, dist.high])
            ours = _Kernels.build(obs, dist, parameters).log_pdf(x, dist.log)
            theirs = estimator.log_pdf({"p": x})
            assert np.all(np.isfinite(ours))
            worst = max(worst, float(np.max(np.abs(ours - theirs))))
    # Φ(b) - Φ(a) over a step 1e-5 of a kernel's width loses digits, in Optuna's formula too
    assert worst < (1e-10 if stepped and (dist.high - dist.low) / (dist.step or 1) > 1e4 else 1e-12), worst


def test_the_quick_tpe_pickles_and_resumes_with_the_same_proposals() -> None:
    """Ray Tune checkpoints the searcher: a pickled QuickTPESampler (its per-ask memory left
    behind) proposes from the restored study what the original proposes."""
    import pickle

    from costtune.tpe import QuickTPESampler

    study = _tpe_study(QuickTPESampler(seed=2), 60)
    study.ask(_TPE_SPACE)  # fills the per-ask memory
    copy = pickle.loads(pickle.dumps(study))
    assert copy.sampler._split is None and copy.sampler._store is None
    first, second = study.ask(_TPE_SPACE).params, copy.ask(_TPE_SPACE).params
    assert _same_proposal(first, second)


def test_past_the_refit_rhythm_a_failed_model_check_holds_until_the_trials_grow() -> None:
    """Past ``REFIT_EVERY_ASK_UNTIL`` completed trials, where the kernel is refitted as the trials
    grow by ``REFIT_GROWTH``, a failed check holds on that rhythm: the asks after it go to TPE
    without the process being fitted and checked again, until the trials have grown by that
    share; then it is checked again. Below it, every ask is checked (the test above)."""
    from costtune.gp import REFIT_EVERY_ASK_UNTIL, REFIT_GROWTH

    dists = {
        "x": optuna.distributions.FloatDistribution(0, 1),
        "y": optuna.distributions.FloatDistribution(0, 1),
    }
    sampler = gp_sampler(0, model_check=0.4)
    study = optuna.create_study(sampler=sampler)
    draw = np.random.default_rng(0)
    start = REFIT_EVERY_ASK_UNTIL + 30
    for number in range(start):
        params = {"x": float(draw.random()), "y": float(draw.random())}
        study.add_trial(
            optuna.trial.create_trial(params=params, distributions=dists, value=_noise(0, 0, number))
        )
    checked_at = []
    for _ in range(30):
        before = len(sampler.checks)
        trial = study.ask(dists)
        if len(sampler.checks) > before:
            checked_at.append(trial.number)
        study.tell(trial, _noise(0, 0, trial.number))
    assert all(sampler.checks[i] < 0.4 for i in range(len(sampler.checks)))  # noise: it fails
    again = start + int(np.ceil(start * REFIT_GROWTH))
    assert (
        checked_at[0] == start and checked_at[1] in (again, again + 1) and len(checked_at) == 2
    )  # 230 × 1.1 rounds up
    assert set(range(start, start + 30)) <= sampler._fell_back  # TPE proposed each one


def test_a_failed_model_check_skips_the_gps_acquisition_search(monkeypatch) -> None:
    """Where the check hands the ask to TPE, the GP's proposal would be discarded, so it is not
    searched for: on noise, the fast ask's search runs once per ask the check passes."""
    import costtune.gp as gp_module
    from costtune.gp import MODEL_CHECK_MIN_TRIALS

    searched = []
    search = gp_module.fast_optimize
    monkeypatch.setattr(gp_module, "fast_optimize", lambda *a, **k: searched.append(1) or search(*a, **k))
    sampler = gp_sampler(0, n_startup_trials=5, fast_from=0, model_check=0.4)
    _study_on(_noise, sampler, n=40)
    assert sampler._fell_back and len(sampler.checks) == 40 - MODEL_CHECK_MIN_TRIALS
    assert len(searched) == 40 - 5 - len(sampler._fell_back)
