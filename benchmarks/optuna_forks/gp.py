"""Optuna's Gaussian-process sampler without per-ask costs that buy nothing on CPU."""

from __future__ import annotations

import contextvars
import copy
import json
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import optuna
import optuna._gp.acqf as _acqf
import optuna._gp.gp as _gp
import optuna._gp.prior as _prior
import torch
from lab.hyperband import nth_longest
from optuna.samplers._gp import sampler as _gp_module
from optuna.trial import TrialState
from optuna_forks.tpe import QuickTPESampler
from scipy.linalg import solve_triangular as _solve_triangular  # type: ignore[import-untyped]
from scipy.linalg.lapack import dtrtri as _dtrtri  # type: ignore[import-untyped]
from scipy.special import erfc as _erfc  # type: ignore[import-untyped]
from scipy.special import erfcx as _erfcx

_SQRT_HALF, _INV_SQRT_2PI = math.sqrt(0.5), 1 / math.sqrt(2 * math.pi)
_SQRT_HALF_PI, _LOG_SQRT_2PI = math.sqrt(0.5 * math.pi), math.log(math.sqrt(2 * math.pi))

#: the Optuna internals the shortcuts read; without them the plain sampler runs
_INTERNALS = (
    hasattr(optuna.samplers.GPSampler, "_sample_relative_impl")
    and all(
        hasattr(_gp_module, name)
        for name in ("_get_params", "_RELATIVE_PARAMS_KEY", "_SYSTEM_ATTR_MAX_LENGTH")
    )
    and hasattr(_gp, "fit_kernel_params")
    and hasattr(getattr(_gp, "GPRegressor", None), "_cache_matrix")
)

#: up to this many completed trials the kernel is refitted at every ask, as Optuna does
REFIT_EVERY_ASK_UNTIL = 200
#: past it, the kernel's hyperparameters are refitted once the completed trials have grown by
#: this share since the last fit; in between, the last fit's lengthscales, scale and noise are
#: kept and only conditioned on every trial (one Cholesky factorisation, no optimisation)
REFIT_GROWTH = 0.1

#: past this many completed trials an ask takes the fast path: the process is conditioned on a
#: subset of the trials (:data:`FAST_SUBSET`) and its acquisition is searched over a few
#: hundred candidates (:func:`fast_optimize`) instead of Optuna's L-BFGS from many starts
FAST_ASK_FROM = REFIT_EVERY_ASK_UNTIL
#: the fast path's process sees at most this many completed trials: the best half of that, and
#: an even random draw of the others (a picture of the whole space, bad regions included)
FAST_SUBSET = 128

#: a completed trial's user attribute: what one epoch of it cost (any unit, the same for all)
COST_ATTR = "costtune:cost_per_epoch"
#: a completed trial's user attribute: the epochs it ran (:meth:`CpuGPSampler.forget_below` reads it)
EPOCHS_ATTR = "costtune:epochs"

_FAST: contextvars.ContextVar[bool] = contextvars.ContextVar("costtune_gp_fast", default=False)
_REUSE_FIT: contextvars.ContextVar[bool] = contextvars.ContextVar("costtune_gp_reuse_fit", default=False)
_fit_kernel_params = _gp.fit_kernel_params


def _fit_or_reuse(**kwargs: Any) -> Any:
    """``optuna._gp.gp.fit_kernel_params``, or, inside an ask that keeps the last fit, the same
    regressor conditioned on the new trials with the cached hyperparameters."""
    cache = kwargs.get("gpr_cache")
    if not _REUSE_FIT.get() or cache is None:
        return _fit_kernel_params(**kwargs)
    gpr = _gp.GPRegressor(
        is_categorical=torch.from_numpy(kwargs["is_categorical"]),
        X_train=torch.from_numpy(kwargs["X"]),
        y_train=torch.from_numpy(kwargs["Y"]),
        inverse_squared_lengthscales=cache.inverse_squared_lengthscales,
        kernel_scale=cache.kernel_scale,
        noise_var=cache.noise_var,
    )
    gpr._cache_matrix()
    return gpr


if _INTERNALS:  # the flag is per context (thread): an ask elsewhere sees Optuna's function
    _gp.fit_kernel_params = _fit_or_reuse

#: how the objective values are warped before Optuna standardises them (per ask, per context)
_TRANSFORM: contextvars.ContextVar[str | None] = contextvars.ContextVar("costtune_gp_transform", default=None)
_standardize_values = getattr(_gp_module, "_standardize_values", None)
#: the value transforms :class:`CpuGPSampler` offers (``value_transform``)
VALUE_TRANSFORMS = ("rank", "clip")


def warp(values: np.ndarray, how: str) -> np.ndarray:
    """Objective values (one column, larger is better, as Optuna's GP sees them) warped so that
    a few very bad trials (a diverged run's loss of 24 beside 0.4) cannot flatten the rest.

    - ``rank``: a Gaussian copula, Φ⁻¹((rank − ½) / n), ties sharing their mean rank: only the
      order of the values is kept, so any increasing transform of the metric gives the same
      suggestions.
    - ``clip``: values below the lower Tukey fence (Q1 − 1.5 · IQR) are raised to it; the rest
      keep their magnitudes.
    """
    v = _gp.warn_and_convert_inf(np.asarray(values, dtype=float))  # as Optuna's own standardising
    if how == "clip":
        q1, q3 = np.quantile(v, [0.25, 0.75], axis=0)
        return np.maximum(v, q1 - 1.5 * (q3 - q1))
    if how == "rank":
        out = np.empty_like(v)
        n = v.shape[0]
        for j in range(v.shape[1]):
            ordinal = np.empty(n)
            ordinal[np.argsort(v[:, j], kind="stable")] = np.arange(1, n + 1)
            _, group = np.unique(v[:, j], return_inverse=True)  # ties share their mean rank
            ranks = (np.bincount(group, weights=ordinal) / np.bincount(group))[group]
            p = torch.from_numpy((ranks - 0.5) / n)
            out[:, j] = (np.sqrt(2.0) * torch.special.erfinv(2 * p - 1)).numpy()
        return out
    raise _unknown_transform(how)


def _unknown_transform(how: object) -> ValueError:
    return ValueError(f"value_transform: must be one of {', '.join(VALUE_TRANSFORMS)}, got {how!r}")


def _standardize_warped(values: np.ndarray) -> Any:
    how = _TRANSFORM.get()
    return _standardize_values(warp(values, how) if how is not None else values)  # type: ignore[misc]


if _INTERNALS and _standardize_values is not None:
    _gp_module._standardize_values = _standardize_warped


def fast_optimize(
    acqf: Any,
    best_params: np.ndarray | None,
    rng: np.random.RandomState,
    n_random: int = 128,
    n_local: int = 64,
    rounds: int = 2,
    keep: int = 4,
    per_kept: int = 16,
) -> np.ndarray:
    """The acquisition's best of a few hundred candidates, in one batched evaluation per round.

    Round 0: ``n_random`` uniform random points of the whole space and ``n_local`` Gaussian
    steps around the best trial (a tenth of each dimension's lengthscale, capped at the unit
    range). Each later round steps around the ``keep`` best candidates so far at half the last
    width. Discrete values are snapped to the nearest value of their grid (in the normalized space the
    process sees); a categorical value is redrawn with
    probability 1/5. In place of Optuna's ``optimize_acqf_mixed`` (2,048 preliminary points and
    L-BFGS from ten starts, about 0.9 s at 1,000 trials), for asks that must take milliseconds.
    """
    space = acqf.search_space
    scale = np.minimum(np.asarray(acqf.length_scales, dtype=float), 1.0)
    categorical = np.asarray(space.is_categorical, dtype=bool)
    # each discrete dimension's values, normalized (a categorical's are its indices)
    discrete = (int(i) for i in space.discrete_indices)
    grids = dict(zip(discrete, space.get_choices_of_discrete_params(), strict=True))

    def snap(X: np.ndarray) -> np.ndarray:
        for i, grid in grids.items():  # to the nearest allowed value
            at = np.clip(np.searchsorted(grid, X[:, i]), 1, len(grid) - 1)
            X[:, i] = np.where(X[:, i] - grid[at - 1] < grid[at] - X[:, i], grid[at - 1], grid[at])
        return X

    def around(centers: np.ndarray, count: int, width: float) -> np.ndarray:
        out = np.repeat(centers, count, axis=0)
        step = rng.normal(size=out.shape) * width * scale
        out[:, ~categorical] = np.clip(out[:, ~categorical] + step[:, ~categorical], 0.0, 1.0)
        for i in np.flatnonzero(categorical):
            redraw = rng.random_sample(len(out)) < 0.2
            out[redraw, i] = rng.randint(0, len(grids[int(i)]), int(redraw.sum()))
        return snap(out)

    uniform = rng.random_sample((n_random, space.dim))  # not Sobol: its engine takes ms to build
    for i in np.flatnonzero(categorical):
        uniform[:, i] = np.floor(uniform[:, i] * len(grids[int(i)]))
    batches = [snap(uniform)]
    if best_params is not None:
        batches.append(around(np.asarray(best_params, dtype=float), n_local, 0.1))
    evaluate = _lean_logei(acqf) or acqf.eval_acqf_no_grad
    X = np.vstack(batches)
    values = evaluate(X)
    width = 0.05
    for _ in range(rounds):
        top = X[np.argsort(values)[-keep:]]
        more = around(top, per_kept, width)
        X, values = np.vstack([X, more]), np.concatenate([values, evaluate(more)])
        width /= 2
    return X[int(np.argmax(values))]


def _standard_logei(z: np.ndarray) -> np.ndarray:
    """log E[max(0, x + z)], x ~ N(0, 1): Optuna's ``standard_logei`` in NumPy (Ament et al.
    2023, eq. 9; its second branch below z = −25, where the first underflows)."""
    with np.errstate(divide="ignore"):
        out = np.log(0.5 * z * _erfc(-_SQRT_HALF * z) + np.exp(-0.5 * z * z) * _INV_SQRT_2PI)
    small = z < -25
    if small.any():
        zs = z[small]
        out[small] = -0.5 * zs**2 - _LOG_SQRT_2PI + np.log1p(_SQRT_HALF_PI * zs * _erfcx(-_SQRT_HALF * zs))
    return out


def _chol_inverse(gpr: Any) -> np.ndarray | None:
    """L⁻¹ of the process's Cholesky factor: the one :func:`loo_spearman` or :func:`_believer`
    kept on it for this very factor, else LAPACK's ``dtrtri`` (None where it fails)."""
    chol = gpr._cov_Y_Y_chol
    kept = getattr(gpr, "_costtune_chol_inverse", None)
    if kept is not None and kept[0] is chol:
        return np.asarray(kept[1])
    inverse, info = _dtrtri(chol.numpy(), lower=1)
    return None if info != 0 else np.asarray(inverse)


def _lean_logei(acqf: Any) -> Callable[[np.ndarray], np.ndarray] | None:
    """Optuna's ``LogEI`` of a fitted process as a NumPy function of a batch of normalized
    points, the same values to rounding (``tests/test_search.py``) at a fraction of the cost:
    the factor's inverse L⁻¹ applied as one matrix product where Optuna's posterior takes two
    triangular solves (L⁻¹ made once an ask, or kept from the model check and the believer),
    and the scaled distances as one matrix product. None where the acquisition is another
    (running trials' q-batch, per unit of cost)."""
    gpr = getattr(acqf, "_gpr", None)
    if type(acqf) is not _acqf.LogEI or np.isneginf(acqf._threshold) or gpr is None:
        return None
    if gpr._cov_Y_Y_chol is None or gpr._cov_Y_Y_chol.shape[0] != gpr._X_all.shape[0]:
        return None
    inverse = _chol_inverse(gpr)
    if inverse is None:
        return None
    weights = gpr._cov_Y_Y_inv_Y.numpy()
    inverse_sq = gpr.inverse_squared_lengthscales.numpy()
    categorical = gpr._is_categorical.numpy().astype(bool)
    scale, floor, threshold = float(gpr.kernel_scale), float(acqf._stabilizing_noise), float(acqf._threshold)
    train = gpr._X_all.numpy()  # the trials, and any running ones a believer appended
    root = np.sqrt(inverse_sq[~categorical])
    scaled = train[:, ~categorical] * root
    norms = (scaled**2).sum(axis=1)

    def evaluate(x: np.ndarray) -> np.ndarray:
        xs = x[:, ~categorical] * root
        sq = np.maximum((xs**2).sum(axis=1)[:, None] + norms[None, :] - 2.0 * xs @ scaled.T, 0.0)
        if categorical.any():
            sq += (x[:, None, categorical] != train[None, :, categorical]) @ inverse_sq[categorical]
        r = np.sqrt(5.0 * sq)
        k = scale * np.exp(-r) * ((5.0 / 3.0) * sq + r + 1.0)
        v = inverse @ k.T  # L⁻¹k: one matrix product, where a triangular solve took 2.5 times as long
        var = np.maximum(scale - (v**2).sum(axis=0), 0.0) + floor
        sigma = np.sqrt(var)
        return _standard_logei((k @ weights - threshold) / sigma) + np.log(sigma)

    return evaluate


_QLOGEI = _acqf.qLogEI


class _DeferredQLogEI(_QLOGEI):  # type: ignore[misc, valid-type]
    """Optuna's ``qLogEI``, its joint posterior over the running trials (128 Sobol samples, a
    Cholesky of their covariance) built only once it is evaluated: on the fast ask the kriging
    believer (:func:`_believer`) takes its place from the arguments alone. Stands in for
    ``qLogEI`` while the fast ask's process is built (the QMC seed is drawn before, as ever)."""

    def __init__(
        self,
        gpr: Any,
        search_space: Any,
        threshold: float,
        n_qmc_samples: int,
        qmc_seed: int,
        normalized_params_of_running_trials: np.ndarray,
        stabilizing_noise: float = 1e-12,
    ) -> None:
        self._threshold = threshold
        self._deferred = (
            gpr,
            search_space,
            threshold,
            n_qmc_samples,
            qmc_seed,
            normalized_params_of_running_trials,
        )
        self._stabilizing_noise = stabilizing_noise
        self._built: Any = None
        n_running = len(normalized_params_of_running_trials)
        self._per_sample_log_util_shape = (n_qmc_samples, n_running + 1)
        _acqf.BaseAcquisitionFunc.__init__(self, gpr.length_scales, search_space)

    @property
    def _cond_gpr(self) -> Any:
        if self._built is None:
            gpr, space, threshold, n, seed, running = self._deferred
            self._built = _QLOGEI(gpr, space, threshold, n, seed, running, self._stabilizing_noise)._cond_gpr
        return self._built


def _matern(X1: np.ndarray, X2: np.ndarray, gpr: Any) -> np.ndarray:
    """``gpr.kernel(X1, X2)`` in NumPy: Optuna's Matérn-5/2 over its scaled squared
    differences, a categorical dimension's difference 1 where the values differ."""
    sqd = np.square(X1[:, None, :] - X2[None, :, :])
    categorical = gpr._is_categorical.numpy().astype(bool)
    if categorical.any():
        sqd[..., categorical] = sqd[..., categorical] > 0.0
    d = sqd @ gpr.inverse_squared_lengthscales.numpy()
    r = np.sqrt(5.0 * d)
    return float(gpr.kernel_scale) * (np.exp(-r) * ((5.0 / 3.0) * d + r + 1.0))


def _believer(acqf: Any) -> Any:
    """Optuna's q-batch LogEI over the running trials (``qLogEI``: 128 joint posterior samples
    per candidate: 24 ms an ask at 1,000 trials with 7 running, against 7.6 ms with none, on a
    loaded machine; benchmarks/ARCHIVE.md) as a plain LogEI on a
    process that believes each running trial will come out at its posterior mean (the kriging
    believer, Ginsbourger et al. 2010): the mean stays, the variance near a running trial
    collapses and the best believed outcome raises the bar, so parallel asks still spread out,
    and the lean NumPy LogEI applies. For the fast ask only; None where the acquisition is
    another.

    The believing process is Optuna's ``append_running_data`` done in NumPy: its Cholesky
    factor extended by the running points (one triangular solve against the factor the
    process holds, an r × r Cholesky), and its weights K⁻¹y those of the told trials with a 0
    for each running one: a value at the posterior mean leaves the mean where it was
    (``tests/test_search.py`` checks both against Optuna's)."""
    if type(acqf) not in (_QLOGEI, _DeferredQLogEI) or np.isneginf(acqf._threshold):
        return None
    deferred = getattr(acqf, "_deferred", None)
    if deferred is not None:  # its arguments, not the joint posterior it defers
        base, running, noise = deferred[0], np.asarray(deferred[5], dtype=float), acqf._stabilizing_noise
    else:
        cond = acqf._cond_gpr
        base, running, noise = cond._gpr, cond._X_running.numpy(), cond._stabilizing_noise
    if base._cov_Y_Y_chol is None or base._X_all.shape[0] != base._X_train.shape[0]:
        return None
    train, chol = base._X_train.numpy(), base._cov_Y_Y_chol.numpy()
    weights = base._cov_Y_Y_inv_Y.numpy()
    n, r = chol.shape[0], running.shape[0]
    cross = _matern(running, train, base)  # r × n
    believed = cross @ weights  # the posterior means at the running points
    inner = _matern(running, running, base)
    inner[np.diag_indices(r)] += float(base.noise_var)
    lower = _solve_triangular(chol, cross.T, lower=True, check_finite=False)  # n × r
    extended = np.zeros((n + r, n + r))
    extended[:n, :n], extended[n:, :n] = chol, lower.T
    extended[n:, n:] = np.linalg.cholesky(inner - lower.T @ lower)
    gpr = copy.copy(base)  # the told trials' tensors shared, the running ones appended
    gpr._X_all = torch.from_numpy(np.vstack([train, running]))
    gpr._y_all = torch.cat([base._y_train, torch.from_numpy(believed).unsqueeze(-1)], dim=0)
    gpr._cov_Y_Y_chol = torch.from_numpy(extended)
    gpr._cov_Y_Y_inv_Y = torch.from_numpy(np.concatenate([weights, np.zeros(r)]))
    kept = getattr(base, "_costtune_chol_inverse", None)
    if kept is not None and kept[0] is base._cov_Y_Y_chol:
        corner, info = _dtrtri(extended[n:, n:], lower=1)
        if info == 0:  # [[L, 0], [B, C]]⁻¹ = [[L⁻¹, 0], [−C⁻¹BL⁻¹, C⁻¹]]: the told one's extended
            inverse = np.zeros((n + r, n + r))
            inverse[:n, :n], inverse[n:, n:] = kept[1], corner
            inverse[n:, :n] = -corner @ (lower.T @ kept[1])
            gpr._costtune_chol_inverse = (gpr._cov_Y_Y_chol, inverse)
    # the believed outcomes count as observed: the best of them raises the bar to improve on
    threshold = max(float(acqf._threshold), float(believed.max()))
    return _acqf.LogEI(gpr, acqf.search_space, threshold, noise)


class _PerCost(_acqf.BaseAcquisitionFunc):
    """log EI(x) − α · log c(x): expected improvement per unit of cost to the power α
    (EI per unit cost, Snoek et al. 2012, with α as in Lee et al.'s cost-cooling), c(x) the
    posterior mean of a second Gaussian process fitted to the trials' log cost per epoch."""

    def __init__(self, inner: _acqf.BaseAcquisitionFunc, cost_gpr: Any, scale: float, alpha: float) -> None:
        super().__init__(inner.length_scales, inner.search_space)
        self._inner, self._cost_gpr, self._scale, self._alpha = inner, cost_gpr, scale, alpha

    def eval_acqf(self, x: torch.Tensor) -> torch.Tensor:
        log_cost, _ = self._cost_gpr.posterior(x)
        return self._inner.eval_acqf(x) - self._alpha * self._scale * log_cost


#: (``fidelity_epochs``) the process's extra input: the share of the sweep's epochs a trial
#: ran, on a log scale (log e / log max_epochs: epoch 1 at 0, the last epoch at 1)
FIDELITY_PARAM = "costtune:fidelity"
_PIN_LAST: contextvars.ContextVar[bool] = contextvars.ContextVar("costtune_gp_pin_last", default=False)


def _with_fidelity(trial: Any, space: dict[str, Any], longest: int) -> Any:
    """A copy of ``trial`` over ``space`` with :data:`FIDELITY_PARAM`: how far it ran (its
    :data:`EPOCHS_ATTR`; a trial without one, or one still running, at the last epoch)."""
    running = not trial.state.is_finished()
    epochs = longest if running else min(max(int(trial.user_attrs.get(EPOCHS_ATTR, longest)), 1), longest)
    params = {k: v for k, v in _gp_module._get_params(trial).items() if k in space}
    params[FIDELITY_PARAM] = math.log(epochs) / math.log(longest)
    return optuna.trial.FrozenTrial(
        number=trial.number,
        state=trial.state,
        value=None,
        values=trial.values,
        datetime_start=trial.datetime_start,
        datetime_complete=trial.datetime_complete,
        params=params,
        distributions={k: space[k] for k in params},
        user_attrs=trial.user_attrs,
        system_attrs={},  # (the running trials' proposals are in params now)
        intermediate_values=trial.intermediate_values,
        trial_id=trial._trial_id,
    )


class _AtLastEpoch(_acqf.BaseAcquisitionFunc):
    """An acquisition over (configuration, fidelity) read at the fidelity of a full run: the
    last input pinned at 1, so the search over the configurations asks what each would reach
    at ``max_epochs`` (the multi-fidelity process of MOBSTER, Klein et al. 2020, asked at the
    top of the ladder)."""

    def __init__(self, inner: _acqf.BaseAcquisitionFunc) -> None:
        super().__init__(inner.length_scales, inner.search_space)
        self._inner = inner

    def eval_acqf(self, x: torch.Tensor) -> torch.Tensor:
        x = x.clone()
        x[..., -1] = 1.0
        return self._inner.eval_acqf(x)


def _at_last_epoch(acqf: Any, best_params: Any) -> tuple[Any, Any]:
    if not _PIN_LAST.get():
        return acqf, best_params
    if best_params is not None:
        best_params = np.array(best_params, dtype=float, copy=True)
        best_params[..., -1] = 1.0
    return _AtLastEpoch(acqf), best_params


_BLAS: list[Any] = []


def _blas() -> Any:
    """threadpoolctl's controller of the loaded BLAS libraries, made once (it scans them)."""
    if not _BLAS:
        from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

        _BLAS.append(ThreadpoolController())
    return _BLAS[0]


#: the leave-one-out check (``model_check``) judges a process fitted to at least this many trials:
#: below ~25 a process fitted to values no hyperparameter explains still ranks them 0.4–0.7
#: (tests/test_search.py); judged from 5 trials on, it handed LCBench's dev asks to TPE at 7%
#: more dollars (p = 0.013; benchmarks/ARCHIVE.md), from 20 on it never did before the target
MODEL_CHECK_MIN_TRIALS = 20


def loo_spearman(gpr: Any) -> float | None:
    """Spearman's correlation between the values a fitted process was conditioned on and its
    leave-one-out predictions of them (Rasmussen & Williams 2006, §5.4.2: μ₋ᵢ = yᵢ − [K⁻¹y]ᵢ /
    [K⁻¹]ᵢᵢ, from the Cholesky factor the process already holds): how well the process ranks
    trials it was not shown. ``None`` below :data:`MODEL_CHECK_MIN_TRIALS` trials or without a
    factor; 0 where either side is constant."""
    chol = getattr(gpr, "_cov_Y_Y_chol", None)
    y_train = getattr(gpr, "_y_train", None)
    if chol is None or y_train is None:
        return None
    n = int(y_train.shape[0])
    if n < MODEL_CHECK_MIN_TRIALS:
        return None
    # L⁻¹ of the told trials' factor: K⁻¹ = L⁻ᵀL⁻¹, so [K⁻¹]ᵢᵢ is the squared norm of its column i
    inverse, info = _dtrtri(chol[:n, :n].numpy(), lower=1)
    if info != 0:
        return None
    if chol.shape[0] == n:  # kept for the acquisition's search (_lean_logei)
        gpr._costtune_chol_inverse = (chol, inverse)
    y = y_train.numpy().reshape(-1)
    loo = y - (inverse.T @ (inverse @ y)) / np.einsum("ij,ij->j", inverse, inverse)
    return _spearman(y, loo)


def _rankdata(a: np.ndarray) -> np.ndarray:
    """``scipy.stats.rankdata(a)`` (average ranks for ties; its algorithm), without the
    wrapper that took most of the model check's time."""
    sorter = np.argsort(a, kind="mergesort")
    inverse = np.empty(sorter.size, dtype=np.intp)
    inverse[sorter] = np.arange(sorter.size)
    ordered = a[sorter]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    dense = first.cumsum()[inverse]
    count = np.r_[np.nonzero(first)[0], len(first)]
    return 0.5 * (count[dense] + count[dense - 1] + 1)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = _rankdata(a), _rankdata(b)  # average ranks for ties
    ra -= ra.mean()
    rb -= rb.mean()
    scale = math.sqrt(float(ra @ ra) * float(rb @ rb))
    return float(ra @ rb) / scale if scale > 0 else 0.0


def _first_value(trial: Any) -> float:
    """A completed trial's first objective's value, without the ``value`` property's checks
    (``FrozenTrial._values``; a third of :meth:`CpuGPSampler._subset` at 1,000 trials)."""
    values = trial._values
    return float(values[0]) if values else math.nan


class _Head:
    """A study's leading trials (by number) that have all finished, which never change: how many
    (``settled``), the completed ones among them, and their first objective's values."""

    def __init__(self, storage: Any, study_id: int) -> None:
        self.storage, self.study_id = weakref.ref(storage), study_id
        self.settled = 0
        self.completed: list[Any] = []
        self.values = np.empty(64)

    def add(self, index: int, trial: Any) -> None:
        """Trial ``index``, the one after the head, has completed: it joins the head."""
        n = len(self.completed)
        if n == len(self.values):
            self.values = np.concatenate([self.values, np.empty(n)])
        self.values[n] = _first_value(trial)
        self.completed.append(trial)
        self.settled = index + 1


class CpuGPSampler(optuna.samplers.GPSampler):
    """``GPSampler``, minus the costs of each ask that buy nothing here.

    - The ``torch.device("cpu")`` context Optuna 5 enters at every ask (for users who set CUDA
      as torch's default device), where the default device is the CPU. That context is a
      torch function mode: its Python hook runs on each of the ~10^6 small tensor operations
      of one acquisition search, a third of a benchmark run's time.
    - Past :data:`REFIT_EVERY_ASK_UNTIL` completed trials, the refit of the kernel's
      hyperparameters at every ask: an L-BFGS over the marginal likelihood, O(n³) per step. It
      is refitted once the trials have grown by :data:`REFIT_GROWTH` since the last fit
      (warm-started there, as Optuna does).
    - Past ``fast_from`` completed trials (:data:`FAST_ASK_FROM` by default), the fast ask: the
      process is conditioned on :data:`FAST_SUBSET` of the trials (:meth:`_subset`), and the
      acquisition is searched over a few hundred candidates (:func:`fast_optimize`, with
      Optuna's LogEI computed in NumPy by :func:`_lean_logei`) instead of Optuna's L-BFGS from
      many starts. With trials running, Optuna's q-batch LogEI gives way to the kriging
      believer (:func:`_believer`), so that asynchronous workers ask as fast; Optuna's joint
      posterior over the running trials, which the believer replaces, is never built
      (:class:`_DeferredQLogEI`), and the believing process is built in NumPy. An ask at 1,000
      trials takes ~3.7 ms median (~4.4 ms with 7 running) instead of 0.7 s on a quiet 2-core
      machine; a loaded one reads ~50% more
      (``benchmarks/overhead.py --searchers``, ``benchmarks/ask_ab.py``; benchmarks/ARCHIVE.md).
      ``fast_from=0`` takes it from the first model-driven ask (lcbench variant ``K``).

    With ``model_check`` θ (a sweep's ``searcher.model_check``, 0.4 by default), once the process
    holds :data:`MODEL_CHECK_MIN_TRIALS` trials, each ask checks it (:func:`loo_spearman`): where
    its leave-one-out predictions rank its own trials with a Spearman correlation below θ, it has
    found nothing it can predict (losses set by each trial's own pace, not by its
    hyperparameters), and the ask takes univariate TPE's proposal over the same trials instead
    (:class:`QuickTPESampler`; the process's own acquisition search is skipped). Past
    :data:`REFIT_EVERY_ASK_UNTIL` completed trials, where the kernel is refitted only as the
    trials grow by :data:`REFIT_GROWTH`, a failed check holds on the same rhythm: the asks
    after it go to TPE without fitting and checking the process again, until the trials have
    grown by that share. On the held-out
    crossing curves that cost ×0.53 the dollars to target (60 fresh runs); on LCBench and the
    other held-out kinds it did not fire before the target (benchmarks/ARCHIVE.md).

    Up to those thresholds the suggestions are Optuna's, trial for trial
    (``tests/test_search.py`` checks them against Optuna's own sampler), so every benchmark
    figure of the default searcher holds. A module-level class, so that Ray Tune can pickle
    the searcher.

    It also runs each ask on one torch thread and one BLAS thread. The matrices are small (one
    row per trial), and where the trials keep every core busy, torch's default of a thread per
    core made one ask at 100 trials take 10 s instead of 0.4 s on the 2-core machine
    (``benchmarks/overhead.py --searchers``; benchmarks/ARCHIVE.md); OpenBLAS's threads made the
    fast ask's search about 7x slower (15.8 against 2.2 ms).
    """

    def __init__(
        self,
        *args: Any,
        cost_exponent: float = 0.0,
        value_transform: str | None = None,
        fast_from: int = FAST_ASK_FROM,
        fast_search: dict[str, int] | None = None,
        believer: bool = True,
        fidelity_epochs: int | None = None,
        longest_min: int | None = None,
        model_check: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if model_check is not None and not -1.0 <= model_check <= 1.0:
            raise ValueError(f"model_check: a Spearman correlation in [-1, 1], got {model_check!r}")
        self._model_check = model_check
        self._fallback: optuna.samplers.TPESampler | None = None
        if model_check is not None:
            self._fallback = QuickTPESampler(seed=kwargs.get("seed"))
        self._fell_back: set[int] = set()  # the trials (by number) the fallback proposes
        self.checks: list[float] = []  # each model-driven ask's leave-one-out correlation
        if fidelity_epochs is not None and fidelity_epochs < 2:
            raise ValueError(f"fidelity_epochs: must be at least 2, got {fidelity_epochs}")
        if longest_min is not None and longest_min < max(self._n_startup_trials, 1):
            startup = self._n_startup_trials
            raise ValueError(f"longest_min: must be at least n_startup_trials ({startup}), got {longest_min}")
        self._longest_min = longest_min
        self._fidelity_epochs = fidelity_epochs
        self._fast_from = fast_from
        self._believer = believer  # False: the fast ask searches Optuna's q-batch LogEI (benchmarks)
        self._fast_search = dict(fast_search or {})  # fast_optimize's counts, for benchmarks
        if value_transform is not None and value_transform not in VALUE_TRANSFORMS:
            raise _unknown_transform(value_transform)
        self._cost_exponent = cost_exponent
        self._value_transform = value_transform
        self._costed: list[Any] = []
        self._cost_gpr: Any = None  # the cost process of the last ask (cost_exponent), kept as the loss's
        self._failed_at: int | None = None  # completed trials at the last failed model check
        self._min_epochs: int | None = None

    def forget_below(self, epochs: int | None) -> None:
        """From now on, fit only the completed trials that ran at least ``epochs`` (their
        :data:`EPOCHS_ATTR`; a trial without one counts as having run them).

        For a sweep whose rungs turned out to mislead (``AsyncHyperband.switched``: a full run
        its first rung would have pruned became the best): the losses the rungs stopped trials
        at mislead the process as much, and a process fitted to them keeps proposing the
        configurations that start fast. Forgetting them, it models the full runs alone (below
        its start-up count it proposes at random again). The next ask refits. ``None``: every
        trial again."""
        if getattr(self, "_min_epochs", None) != epochs:  # absent in an older pickle
            self._min_epochs = epochs
            self._costtune_fitted_at = 0
            self._failed_at = None
            # below the start-up count again, the random proposals are meant: no warning per parameter
            self._warn_independent_sampling = False

    def _fit_floor(self, completed: list[Any]) -> int | None:
        """The fewest epochs a completed trial must have run to be fitted: the hedge's
        (:meth:`forget_below`) and, with ``longest_min`` n, the epochs of the n-th longest run
        among the completed trials that carry :data:`EPOCHS_ATTR` (BOHB's model on the largest
        budget with enough observations; the rungs' ties make it a rung's epochs), the larger."""
        floor = getattr(self, "_min_epochs", None)  # absent in an older pickle
        n = getattr(self, "_longest_min", None)
        if n is not None:
            ran = (int(t.user_attrs[EPOCHS_ATTR]) for t in completed if EPOCHS_ATTR in t.user_attrs)
            longest = nth_longest(ran, n)
            if longest is not None:
                floor = max(floor or 0, longest)
        return floor

    def _fails_check(self) -> bool:
        """Whether the process just fitted fails ``model_check`` (:func:`loo_spearman` below θ),
        recorded in :attr:`checks`."""
        theta = getattr(self, "_model_check", None)  # absent in an older pickle
        if theta is None or not self._gprs_cache_list:
            return False
        rho = loo_spearman(self._gprs_cache_list[0])
        if rho is None:
            return False
        self.checks.append(rho)
        return rho < theta

    def _optimize_acqf(self, acqf: Any, best_params: Any) -> Any:
        """Optuna's search over ``acqf`` (its documented override point), per unit of cost when
        ``cost_exponent`` α > 0 and the completed trials carry :data:`COST_ATTR`; none where the
        process fails the model check (its proposal would be discarded)."""
        if self._fails_check():
            self._checked_out = True
            if best_params is not None:  # never read; with no best trial, the search runs
                return np.asarray(best_params, dtype=float)[0]
        if _FAST.get() and getattr(self, "_believer", True):  # absent in an older pickle
            # before the cost weighs it: the believer stands in for the q-batch LogEI it reads
            acqf = _believer(acqf) or acqf
        alpha = getattr(self, "_cost_exponent", 0.0)
        costed = [t for t in getattr(self, "_costed", []) if (t.user_attrs.get(COST_ATTR) or 0) > 0]
        if alpha > 0 and len(costed) >= 2:
            log_cost = np.log([float(t.user_attrs[COST_ATTR]) for t in costed])
            scale = float(log_cost.std()) or 1.0
            # an ask that keeps the loss process's last fit keeps the cost process's too: it
            # conditions the kept kernel on the trials it sees (an ask at 1,000 trials: 140 → 14 ms)
            kept = getattr(self, "_cost_gpr", None) if _REUSE_FIT.get() else None  # absent in an older pickle
            cost_gpr = _fit_or_reuse(
                X=acqf.search_space.get_normalized_params(costed),
                Y=(log_cost - log_cost.mean()) / scale,
                is_categorical=acqf.search_space.is_categorical,
                log_prior=_prior.default_log_prior,
                minimum_noise=_prior.DEFAULT_MINIMUM_NOISE_VAR,
                deterministic_objective=False,
                gpr_cache=kept,
            )
            self._cost_gpr = cost_gpr
            acqf = _PerCost(acqf, cost_gpr, scale, alpha)
        if _FAST.get():
            acqf, best_params = _at_last_epoch(acqf, best_params)
            return fast_optimize(acqf, best_params, self._rng.rng, **getattr(self, "_fast_search", {}))
        acqf, best_params = _at_last_epoch(acqf, best_params)
        return super()._optimize_acqf(acqf, best_params)

    def sample_relative(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
        if not _INTERNALS or torch.get_default_device().type != "cpu":
            return dict(super().sample_relative(study, trial, search_space))
        if search_space == {}:
            return {}
        completed, values, started = self._told_and_running(study)
        floor = self._fit_floor(completed)
        if floor != getattr(self, "_fitted_floor", None):  # other trials: refit, not reuse
            self._fitted_floor = floor
            self._costtune_fitted_at = 0
            self._failed_at = None
        if floor is not None:
            kept = [i for i, t in enumerate(completed) if t.user_attrs.get(EPOCHS_ATTR, floor) >= floor]
            completed, values = [completed[i] for i in kept], values[kept]
        if len(completed) < self._n_startup_trials:
            return {}
        failed_at = getattr(self, "_failed_at", None)  # absent in an older pickle
        if (
            failed_at is not None
            and len(completed) > REFIT_EVERY_ASK_UNTIL
            and len(completed) < failed_at * (1 + REFIT_GROWTH)
        ):  # the check failed since the kernel's last fit, and the trials have not grown enough
            self._fell_back.add(trial.number)  # to refit it: TPE proposes, unchecked
            return {}
        running = [t for t in started if search_space.keys() <= _gp_module._get_params(t).keys()]
        fitted_at = getattr(self, "_costtune_fitted_at", 0)  # absent in a pickle from before
        reuse = (
            len(completed) > REFIT_EVERY_ASK_UNTIL
            and self._gprs_cache_list is not None
            and len(completed) < fitted_at * (1 + REFIT_GROWTH)
        )
        fast = (
            len(completed) > getattr(self, "_fast_from", FAST_ASK_FROM)  # absent in an older pickle
            and len(study.directions) == 1
            and self._constraints_func is None
        )
        token = _REUSE_FIT.set(reuse)
        warped = _TRANSFORM.set(getattr(self, "_value_transform", None))  # absent in an older pickle
        quick = _FAST.set(fast)
        seen = self._subset(study, completed, values) if fast else completed
        longest = getattr(self, "_fidelity_epochs", None)  # absent in an older pickle
        space = search_space
        if longest is not None:  # the epochs each trial ran, one more input of the process
            space = {**search_space, FIDELITY_PARAM: optuna.distributions.FloatDistribution(0.0, 1.0)}
            seen = [_with_fidelity(t, space, longest) for t in seen]
            running = [_with_fidelity(t, space, longest) for t in running]
        self._costed = seen
        pin = _PIN_LAST.set(longest is not None)
        self._checked_out = False  # set by _optimize_acqf where the process fails the model check
        deferred = fast and running and getattr(self, "_believer", True)  # absent in an older pickle
        if deferred:  # Optuna's sampler reads qLogEI through a lazily imported copy of the module
            _acqf.qLogEI = _gp_module.acqf_module.qLogEI = _DeferredQLogEI
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the process's small linear algebra, on one thread
        try:
            with _blas().limit(limits=1, user_api="blas"):
                params: dict[str, Any] = self._sample_relative_impl(study, seen, running, space)
        finally:
            torch.set_num_threads(threads)
            if deferred:
                _acqf.qLogEI = _gp_module.acqf_module.qLogEI = _QLOGEI
            _REUSE_FIT.reset(token)
            _TRANSFORM.reset(warped)
            _FAST.reset(quick)
            _PIN_LAST.reset(pin)
            self._costed = []
        params.pop(FIDELITY_PARAM, None)
        if not reuse:
            self._costtune_fitted_at = len(completed)
        if getattr(self, "_checked_out", False):  # the process does not rank its own trials: TPE proposes
            self._checked_out = False
            self._fell_back.add(trial.number)
            self._failed_at = len(completed)
            return {}
        self._failed_at = None
        if params:  # shared with other processes, as Optuna's own sampler does
            text, chunk = json.dumps(params), _gp_module._SYSTEM_ATTR_MAX_LENGTH
            for i in range(0, len(text), chunk):
                study._storage.set_trial_system_attr(
                    trial._trial_id, f"{_gp_module._RELATIVE_PARAMS_KEY}:{i // chunk}", text[i : i + chunk]
                )
        return params

    def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
        """Optuna's (a random draw), or, for a trial ``model_check`` gave to the fallback, TPE's."""
        fallback = getattr(self, "_fallback", None)  # absent in an older pickle
        if fallback is not None and trial.number in self._fell_back:
            return fallback.sample_independent(study, trial, param_name, param_distribution)
        return super().sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        super().after_trial(study, trial, state, values)
        fallback = getattr(self, "_fallback", None)
        if fallback is not None:
            fallback.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        super().reseed_rng()
        fallback = getattr(self, "_fallback", None)
        if fallback is not None:
            fallback.reseed_rng()

    def _told_and_running(self, study: Any) -> tuple[list[Any], np.ndarray, list[Any]]:
        """The study's completed trials, their first objective's values, and the trials still
        running, each by number. The leading trials that have all finished (they never change)
        are read once and kept: an ask looks again only at those past them, the newest one or
        two with one worker."""
        trials = study._get_trials(deepcopy=False, use_cache=False)
        head = getattr(self, "_head", None)  # absent in an older pickle
        if (
            head is None
            or head.storage() is not study._storage
            or head.study_id != study._study_id
            or head.settled > len(trials)  # fewer trials than it read: not the study it was
        ):
            head = self._head = _Head(study._storage, study._study_id)
        tail: list[Any] = []
        started: list[Any] = []
        settled = True  # every trial so far has finished: the next one, finished, joins the head
        for i in range(head.settled, len(trials)):
            t = trials[i]
            state = t.state
            if state is TrialState.COMPLETE:
                if settled:
                    head.add(i, t)
                else:
                    tail.append(t)
            elif state.is_finished():
                if settled:
                    head.settled = i + 1
            else:  # running or waiting: it may finish later
                settled = False
                if state is TrialState.RUNNING:
                    started.append(t)
        values = head.values[: len(head.completed)]
        if tail:
            values = np.concatenate([values, [_first_value(t) for t in tail]])
        return head.completed + tail, values, started

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_head"] = None  # the trials it read: read again at the next ask
        return state

    def _subset(self, study: Any, completed: list[Any], values: np.ndarray | None = None) -> list[Any]:
        """At most :data:`FAST_SUBSET` of the completed trials, in trial order: the best half of
        that by value (so the incumbent is always there) and a seeded random draw of the rest.
        ``values``: the trials' first objective's (read from them where not given)."""
        if len(completed) <= FAST_SUBSET:
            return completed
        sign = -1.0 if study.direction == optuna.study.StudyDirection.MAXIMIZE else 1.0
        if values is None:
            values = np.array([_first_value(t) for t in completed])
        order = np.argsort(sign * values, kind="stable")
        best, rest = order[: FAST_SUBSET // 2], order[FAST_SUBSET // 2 :]
        drawn = rest[self._rng.rng.choice(len(rest), FAST_SUBSET - len(best), replace=False)]
        return [completed[int(i)] for i in np.sort(np.concatenate([best, drawn]))]
