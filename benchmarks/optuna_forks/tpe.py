"""Optuna's univariate TPE, proposal for proposal, without the per-ask costs that buy nothing.

Kept apart from :mod:`costtune.gp` so that a sweep's TPE searcher does not import torch.
"""

from __future__ import annotations

import functools
import math
import weakref
from typing import Any, NamedTuple

import numpy as np
import optuna
from optuna.samplers._tpe import _truncnorm
from optuna.samplers._tpe import parzen_estimator as _pe_module
from optuna.samplers._tpe import sampler as _tpe_module
from optuna.study import StudyDirection
from optuna.trial import TrialState
from scipy.special import log_ndtr as _log_ndtr  # type: ignore[import-untyped]
from scipy.special import ndtr as _ndtr

#: the Optuna internals :class:`QuickTPESampler` reads; without them it is Optuna's TPE
_TPE_INTERNALS = (
    hasattr(_tpe_module, "default_gamma")
    and hasattr(_pe_module, "_ParzenEstimator")
    and all(hasattr(_truncnorm, name) for name in ("_log_ndtr", "_ndtr", "_log_gauss_mass", "_norm_pdf_logC"))
    and hasattr(_pe_module, "_BatchedCategoricalDistributions")
    and hasattr(optuna.samplers.TPESampler, "_sample")
)
_NUMERIC = (optuna.distributions.FloatDistribution, optuna.distributions.IntDistribution)
_COMPLETE, _PRUNED, _RUNNING, _FAIL = (
    TrialState.COMPLETE,
    TrialState.PRUNED,
    TrialState.RUNNING,
    TrialState.FAIL,
)
#: below this many (candidate, kernel) pairs a stepped parameter's density takes every kernel's
#: mass as Optuna does; above it, the kernels that add nothing are skipped (``_Kernels.log_pdf``)
_DENSE_PAIRS = 2_000


def _as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


#: Optuna's own Φ and log Φ, put back after each quick ask (never whatever is there then: two
#: threads asking at once could otherwise leave SciPy's in place)
_OPTUNA_NDTR = getattr(_truncnorm, "_log_ndtr", None), getattr(_truncnorm, "_ndtr", None)


def _pruned_score(trial: Any, minimize: bool) -> tuple[float, float]:
    """Optuna's rank of a pruned trial (``_get_pruned_trial_score``): the furthest step first,
    then its intermediate value."""
    if trial.intermediate_values:
        step, value = max(trial.intermediate_values.items())
        if math.isnan(value):
            return -step, math.inf
        return -step, value if minimize else -value
    return 1, 0.0


def _categorical_log_pdf(mixture: Any, x: np.ndarray) -> np.ndarray:
    """Optuna's ``_MixtureOfProductDistribution.log_pdf`` for one categorical parameter: the
    log density of each choice index in ``x`` under ``mixture``'s kernels (numeric parameters
    go through :class:`_Kernels`)."""
    (d,) = mixture.distributions
    per_kernel = np.log(d.weights[:, x.astype(np.int64)].T)
    return _log_sum_exp(per_kernel + np.log(mixture.weights)[np.newaxis, :])


def _log_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Optuna's ``_truncnorm._log_gauss_mass`` (the log of a standard normal's mass between ``a``
    and ``b``, each case computed in the tail where it is accurate), the same formulas on real
    arrays, with SciPy's vectorised Φ and log Φ."""
    a, b = np.broadcast_arrays(a, b)
    left, right = b <= 0, a > 0
    if not left.any() and not right.any():  # every interval holds 0 (a kernel's own range)
        return np.asarray(np.log1p(-_ndtr(a) - _ndtr(-b)))
    out = np.empty(a.shape)
    central = ~(left | right)
    if left.any():
        lb = _log_ndtr(b[left])
        out[left] = lb + np.log1p(-np.exp(_log_ndtr(a[left]) - lb))
    if right.any():
        la = _log_ndtr(-a[right])
        out[right] = la + np.log1p(-np.exp(_log_ndtr(-b[right]) - la))
    if central.any():
        out[central] = np.log1p(-_ndtr(a[central]) - _ndtr(-b[central]))
    return out


def _step_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`_log_mass` (each a ≤ b), computed as log(Φ(b) - Φ(a)) on the side of 0 where both
    are accurate (an upper interval mirrored into the lower tail); across 0, or where that
    difference is lost, Optuna's formula."""
    flip = a > 0
    a, b = np.where(flip, -b, a), np.where(flip, -a, b)
    with np.errstate(divide="ignore"):
        mass = np.log(_ndtr(b) - _ndtr(a))
    hard = (b > 0) | ~np.isfinite(mass)
    if hard.any():
        mass[hard] = _log_mass(a[hard], b[hard])
    return np.asarray(mass)


@functools.lru_cache(maxsize=8)
def _default_weights(n: int) -> np.ndarray:
    """Optuna's ``default_weights(n)``, kept for the next ask's same ``n`` (read, never written)."""
    weights = np.asarray(_tpe_module.default_weights(n), dtype=float)
    weights.flags.writeable = False
    return weights


class _Kernels(NamedTuple):
    """One numeric parameter's Parzen estimator as Optuna builds it: a truncated normal per
    observation plus the prior's, in the transformed space (log for a log parameter)."""

    mu: np.ndarray
    sigma: np.ndarray
    weights: np.ndarray
    low: float  # the truncation, as Optuna's batched distributions adapt it
    high: float
    step: float  # 0 for a continuous parameter
    order: np.ndarray  # the observations' kernels (all but the prior's, the last) by μ

    @classmethod
    def build(cls, observations: np.ndarray, dist: Any, parameters: Any) -> _Kernels:
        """``_ParzenEstimator`` over one numeric parameter: its weights and its bandwidths
        (``_calculate_numerical_distributions``), the same operations on the same numbers."""
        n = len(observations)
        if parameters.weights is _tpe_module.default_weights:
            weights = _default_weights(n)
        else:
            weights = _pe_module._ParzenEstimator._call_weights_func(parameters.weights, n)
        weights = np.array([1.0]) if n == 0 else np.append(weights, [parameters.prior_weight])
        weights /= weights.sum()
        low, high, step = dist.low, dist.high, dist.step
        if step is not None:
            low -= step / 2
            high += step / 2
        if dist.log:
            observations, low, high = np.log(observations), np.log(low), np.log(high)
        order = np.argsort(observations)
        with_ends = np.empty(n + 2, dtype=float)
        with_ends[0], with_ends[1:-1], with_ends[-1] = low, observations[order], high
        sigmas = np.maximum(with_ends[1:-1] - with_ends[0:-2], with_ends[2:] - with_ends[1:-1])
        if not parameters.consider_endpoints and with_ends.shape[0] >= 4:
            sigmas[0] = with_ends[2] - with_ends[1]
            sigmas[-1] = with_ends[-2] - with_ends[-3]
        unsorted = np.empty_like(sigmas)
        unsorted[order] = sigmas  # Optuna's sigmas[np.argsort(order)], without the second sort
        minsigma = (
            (high - low) / min(100.0, (1.0 + n + 1)) if parameters.consider_magic_clip else _pe_module.EPS
        )
        sigmas = np.asarray(np.clip(unsorted, minsigma, high - low))
        mu = np.append(observations, [0.5 * (low + high)])
        sigma = np.append(sigmas, [high - low])
        if step is None:
            low, high = dist.low, dist.high
            step = 0.0
        else:
            low, high = dist.low - step / 2, dist.high + step / 2
        if dist.log:  # as Optuna's batched distributions adapt them: math.log, not np.log
            low, high = math.log(low), math.log(high)
        return cls(mu, sigma, weights, float(low), float(high), float(step), order)

    def log_pdf(self, x: np.ndarray, is_log: bool) -> np.ndarray:
        """Optuna's mixture log density at ``x`` (``_MixtureOfProductDistribution.log_pdf``):
        the same density, to rounding (~1e-13 of it; ``tests/test_search.py`` compares them). A
        stepped parameter's density is each kernel's mass over the step around each unique
        ``x``. Where this computes less than Optuna:

        - A kernel whose term at an ``x`` is more than 700 nats below the largest adds less
          than 1e-304 of it; it is taken as 700 below (``exp`` of a number that small is
          subnormal, and slow).
        - A continuous parameter's terms are exponentiated against the largest kernel constant
          (weight over normalisation), not each ``x``'s largest term: no pass for each row's
          maximum. The prior kernel's term, a few nats below that constant, keeps each sum
          from underflowing; where it is 600 nats below, or an ``x`` lies outside the range,
          Optuna's order is kept.
        - Stepped kernels at the same (μ, σ) next to each other by μ (an integer parameter's
          repeated values) are one, their weights summed. Past 2,000 (candidate, kernel) pairs
          a stepped kernel's mass at an ``x`` is computed only where a bound on it (the step's
          width times the normal density at the step's nearest end) comes within 40 nats of
          the prior kernel's term there; the rest add less than 5e-18 of the density each.
          Those kernels are found by μ in a window around each step, as wide as the furthest
          reach of all but the widest (those past 4 times the mean reach, taken at every
          step). A kernel's mass is Φ(b) - Φ(a) on the side of its centre where both are
          accurate; across the centre it is Optuna's formula (:func:`_step_mass`).
        """
        sigma, log_weights = self.sigma, np.log(self.weights)
        if not self.step:
            xt = np.log(x) if is_log else x
            a, b = (self.low - self.mu) / sigma, (self.high - self.mu) / sigma
            constant = log_weights - _log_mass(a, b) - np.log(sigma) - _truncnorm._norm_pdf_logC
            if self.low <= xt.min() and xt.max() <= self.high:
                # each term's exp taken against the largest kernel constant, not each row's
                # largest term: the prior kernel's term, never 600 nats below it, keeps each
                # row's sum from underflowing
                top = constant.max()
                prior = constant[-1] - 0.5 * ((xt - self.mu[-1]) / sigma[-1]) ** 2
                if top - prior.min() < 600.0:
                    half_z2 = np.subtract(xt[:, np.newaxis], self.mu)
                    half_z2 *= math.sqrt(0.5) / sigma
                    half_z2 *= half_z2  # z²/2
                    terms = np.subtract(constant - top, half_z2, out=half_z2)
                    np.maximum(terms, -700.0, out=terms)
                    np.exp(terms, out=terms)
                    return np.asarray(np.log(terms.sum(axis=1)) + top)
            weighted = np.subtract(xt[:, np.newaxis], self.mu)
            weighted /= sigma  # z, in place: this array is the density's bulk
            outside = (
                (weighted < a) | (weighted > b) if (xt < self.low).any() or (xt > self.high).any() else None
            )
            weighted *= weighted
            weighted *= -0.5
            weighted += constant
            if outside is not None:  # else each z lies within [a, b]
                weighted[outside] = -np.inf
        else:
            xu, inverse = np.unique(x, return_inverse=True)
            half = self.step / 2
            left = np.log(xu - half) if is_log else xu - half
            right = np.log(xu + half) if is_log else xu + half
            if len(xu) * len(self.mu) <= _DENSE_PAIRS:  # few kernels: each one's mass (_step_mass)
                mass = _step_mass(
                    (left[:, np.newaxis] - self.mu) / sigma, (right[:, np.newaxis] - self.mu) / sigma
                )
                norm = _log_mass((self.low - self.mu) / sigma, (self.high - self.mu) / sigma)
                return _log_sum_exp(((mass - norm) + log_weights)[inverse])
            # kernels at the same (μ, σ), an integer parameter's repeated values, have the same mass
            # everywhere: one kernel, their weights summed (those next to each other by μ)
            order = self.order
            mu, sigma = self.mu[order], sigma[order]
            first = np.empty(len(mu), dtype=bool)
            first[0], first[1:] = True, (mu[1:] != mu[:-1]) | (sigma[1:] != sigma[:-1])
            group = np.cumsum(first) - 1
            mu, sigma = mu[first], sigma[first]  # by μ
            log_weights = np.log(np.bincount(group, weights=self.weights[order]))
            norm = _log_mass((self.low - mu) / sigma, (self.high - mu) / sigma)
            p_mu, p_sigma = self.mu[-1], self.sigma[-1]
            p_norm = _log_mass(
                np.array([(self.low - p_mu) / p_sigma]), np.array([(self.high - p_mu) / p_sigma])
            )
            prior = (_log_mass((left - p_mu) / p_sigma, (right - p_mu) / p_sigma) - p_norm) + np.log(
                self.weights[-1]
            )
            # kernel k's term at x_j is at most c_k + log(width_j) - d²/2, d the step's nearest end
            # from μ_k in σ_k; it matters where that comes within 40 nats of the prior kernel's
            # term, so within reach_k of the step
            with np.errstate(divide="ignore"):
                slack = (log_weights - norm - np.log(sigma)) + np.max(
                    np.log(right - left) - _truncnorm._norm_pdf_logC - prior + 40.0
                )
            reach = sigma * np.sqrt(2.0 * np.maximum(slack, 0.0))
            # the kernels of a reach up to 4 times the mean (all but a quarter at most) are found
            # in a window that wide around each step; the wider ones are taken at every step
            wide = reach > 4.0 * reach.mean()
            narrow = np.flatnonzero(~wide)
            radius = float(reach[narrow].max()) if len(narrow) else 0.0
            rows, k, _ = _pairs(mu[narrow], left - radius, right + radius)
            k = narrow[k]
            if wide.any():  # appended row by row: each row's kernels stay together
                broad = np.flatnonzero(wide)
                rows = np.concatenate([rows, np.repeat(np.arange(len(xu)), len(broad))])
                k = np.concatenate([k, np.tile(broad, len(xu))])
                by_row = np.argsort(rows, kind="stable")
                rows, k = rows[by_row], k[by_row]
            near = (mu[k] - reach[k] <= right[rows]) & (mu[k] + reach[k] >= left[rows])
            j, k = rows[near], k[near]
            mass = _step_mass((left[j] - mu[k]) / sigma[k], (right[j] - mu[k]) / sigma[k])
            terms = mass - norm[k] + log_weights[k]
            counts = np.bincount(j, minlength=len(xu))
            return _log_sum_exp_rows(prior[:, np.newaxis], j, terms, counts)[inverse]
        return _log_sum_exp(weighted)


def _log_sum_exp(weighted: np.ndarray) -> np.ndarray:
    """Each row's log Σ exp, as Optuna's mixture takes it (its largest term out first); a term
    700 nats below that adds less than 1e-304 of it and is taken as 700 below (``exp`` of less
    is subnormal, and slow)."""
    top = weighted.max(axis=1)
    top[np.isneginf(top)] = 0
    terms = np.subtract(weighted, top[:, np.newaxis])
    np.maximum(terms, -700.0, out=terms)
    np.exp(terms, out=terms)
    with np.errstate(divide="ignore"):
        return np.log(terms.sum(axis=1)) + top


def _pairs(ordered: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each (row j, position p) with ``lo[j] <= ordered[p] <= hi[j]`` (``ordered`` ascending),
    row by row, and how many each row has."""
    first = ordered.searchsorted(lo, side="left")
    counts = np.maximum(ordered.searchsorted(hi, side="right") - first, 0)
    ends = np.cumsum(counts)
    rows = np.repeat(np.arange(len(lo)), counts)
    positions = np.arange(ends[-1] if len(ends) else 0) + np.repeat(first - (ends - counts), counts)
    return rows, positions, counts


def _log_sum_exp_rows(
    dense: np.ndarray, rows: np.ndarray, terms: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """:func:`_log_sum_exp` of each row of ``dense`` together with that row's ``terms`` (grouped
    by row: ``rows`` holds each term's, ``counts`` how many each row has)."""
    top = dense.max(axis=1)
    some = counts > 0
    starts = (np.cumsum(counts) - counts)[some]
    if len(terms):
        top[some] = np.maximum(top[some], np.maximum.reduceat(terms, starts))
    top[np.isneginf(top)] = 0
    shifted = np.subtract(dense, top[:, np.newaxis])
    np.maximum(shifted, -700.0, out=shifted)
    np.exp(shifted, out=shifted)
    total = shifted.sum(axis=1)
    if len(terms):
        shift = terms - top[rows]
        np.maximum(shift, -700.0, out=shift)
        np.exp(shift, out=shift)
        total[some] += np.add.reduceat(shift, starts)
    with np.errstate(divide="ignore"):
        return np.log(total) + top


class _Store:
    """What a sampler has read of a study's finished trials, a row each, kept because a finished
    trial never changes: its number, whether it completed or was pruned, its rank key (its
    value; a pruned trial's furthest step and its value there), its parameters, and those
    ``float()`` takes as floats, a column per parameter name (NaN where it has none)."""

    def __init__(self, storage: Any, study_id: int) -> None:
        self.storage, self.study_id = weakref.ref(storage), study_id  # trial ids are unique in one
        self.row_of: dict[int, int] = {}  # trial id -> row
        self.column_of: dict[str, int] = {}
        self.not_float: set[str] = set()  # names with a value float() rejects: Optuna's path
        self.params: list[dict[str, Any]] = []
        self.distributions: list[dict[str, Any]] = []  # each trial's, in the order it asked them
        self.values = np.full((64, 8), np.nan)
        self.number = np.zeros(64, dtype=np.int64)
        self.pruned = np.zeros(64, dtype=bool)
        self.rank = np.zeros((64, 2))
        self.size = 0
        # the study's leading trials (by number) that have all finished, none of which can change:
        # how many, and the rows of those completed or pruned, in order
        self.head = 0
        self.head_rows = np.zeros(64, dtype=np.int64)
        self.n_head = 0

    def extend_head(self, index: int, row: int | None) -> None:
        """Trial ``index``, the one after the head, has finished: its row (None where it
        failed) joins the head."""
        self.head = index + 1
        if row is not None:
            if self.n_head == len(self.head_rows):
                self.head_rows = np.concatenate([self.head_rows, np.zeros(self.n_head, dtype=np.int64)])
            self.head_rows[self.n_head] = row
            self.n_head += 1

    def row(self, params: dict[str, Any]) -> np.ndarray:
        """``params`` as a row of the value columns (new names get a column)."""
        row = np.full(max(self.values.shape[1], len(self.column_of) + len(params)), np.nan)
        for name, value in params.items():
            column = self.column_of.get(name)
            if column is None:
                column = self.column_of[name] = len(self.column_of)
                if column >= self.values.shape[1]:
                    self.values = np.hstack([self.values, np.full(self.values.shape, np.nan)])
            f = _as_float(value)
            if f is None:
                self.not_float.add(name)
            else:
                row[column] = f
        return row[: self.values.shape[1]]

    def add(self, trial: Any, minimize: bool) -> int:
        """Reads a finished trial into the next row; returns it."""
        if self.size == len(self.number):
            grow = len(self.number)
            self.values = np.vstack([self.values, np.full((grow, self.values.shape[1]), np.nan)])
            self.number = np.concatenate([self.number, np.zeros(grow, dtype=np.int64)])
            self.pruned = np.concatenate([self.pruned, np.zeros(grow, dtype=bool)])
            self.rank = np.vstack([self.rank, np.zeros((grow, 2))])
        k = self.size
        values = self.row(trial.params)
        self.values[k, : len(values)] = values
        self.number[k] = trial.number
        if trial.state is _PRUNED:
            self.pruned[k], self.rank[k] = True, _pruned_score(trial, minimize)
        else:
            self.pruned[k], self.rank[k] = False, (trial.value, 0.0)
        self.params.append(trial.params)
        self.distributions.append(trial.distributions)
        self.row_of[trial._trial_id] = k
        self.size += 1
        return k


class _Split(NamedTuple):
    """One ask's trials, good and rest, each by trial number: rows of ``values`` (the store's
    finished trials, then the running ones) and their parameters."""

    key: tuple[Any, ...]
    values: np.ndarray
    params: list[dict[str, Any]]
    good: np.ndarray
    rest: np.ndarray


class _Batch(NamedTuple):
    """One ask's proposals, made at its first parameter for the parameters the latest finished
    trial asked, in its order; served while the ask asks them in that order."""

    key: tuple[Any, ...]
    asked: list[tuple[str, Any]]  # (name, distribution)
    proposals: list[Any]
    state: Any  # the random stream before the batch
    served: list[int]  # how many were handed out (a one-item list, so the tuple stays fixed)


class QuickTPESampler(optuna.samplers.TPESampler):
    """Optuna's univariate TPE at its defaults, proposal for proposal to rounding
    (``tests/test_search.py`` compares them), in about a twentieth of its ask at 1,000 trials:
    a sweep's ``searcher: {type: optuna}``, and the model check's fallback
    (:class:`CpuGPSampler`), which answers most asks of a sweep whose process ranks nothing.
    Optuna's ask at 1,000 trials takes ~0.1 s on the 2-core machine, this one ~4 ms
    (``benchmarks/overhead.py --searchers``; against an earlier version,
    ``benchmarks/ask_ab.py``). It builds the same Parzen estimators and draws
    the same random numbers in the same order; what it does in fewer passes:

    - Optuna reads every trial's parameters, state and constraints, and splits the trials into
      the good and the rest, once per *parameter* of an ask; here a finished trial is read once
      (it never changes) into a row of arrays, the split is made once per ask, at its first
      parameter, in NumPy, and only the trials past the study's settled head (its leading
      trials, all finished) are looked at again.
    - It proposes one parameter per call; here, at an ask's first parameter, the proposals for
      every parameter the latest finished trial asked, in its order, are made together where
      all are numeric (``_make_batch``), from the same draws. An ask that takes another order
      or other parameters puts the random stream back where one-by-one asks would have left
      it, and goes on one by one.
    - Its mixture's log density handles any number of parameters of any kind, with complex
      arrays and, for stepped ones, two sorts to find the kernels' unique (μ, σ); here one
      parameter's density, real arrays, and the kernels that add nothing to it skipped
      (``_Kernels.log_pdf``).
    - Its truncated normals' Φ and log Φ are Python per element (``_truncnorm._ndtr``,
      ``_log_ndtr``); here SciPy's vectorised ``ndtr`` and ``log_ndtr``, swapped in for the
      draws (the driver asks from one thread).

    Proposals differ from Optuna's only by rounding (~1e-13 of a density): where two candidates
    tie exactly (mirror images under a symmetric small integer parameter), the other may win
    (8 of 900 fuzzed asks over mixed spaces, 0 of 900 over numeric ones; 6 of 900 with
    Optuna's own estimators and SciPy's Φ). Where the study has more than one objective, the
    sampler has a constraints function, Optuna asks for more than one parameter at once, or
    Optuna's TPE was given other Parzen estimators, it is Optuna's TPE."""

    def __init__(self, seed: int | None = None, n_startup_trials: int = 10) -> None:
        super().__init__(seed=seed, n_startup_trials=n_startup_trials, multivariate=False)
        self._split: _Split | None = None
        self._store: _Store | None = None
        self._batch: _Batch | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_split"], state["_store"], state["_batch"] = None, None, None  # rebuilt at the next ask
        return state

    def _quick(self, study: Any, search_space: dict[str, Any]) -> bool:
        return (
            _TPE_INTERNALS
            and len(search_space) == 1
            and len(study.directions) == 1
            and self._constraints_func is None
            and self._parzen_estimator_cls is _pe_module._ParzenEstimator
        )

    def _ask_key(self, study: Any, trial: Any) -> tuple[Any, ...]:
        return (id(study._storage), study._study_id, trial.number)

    def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
        split = getattr(self, "_split", None)
        if (
            split is not None
            and split.key == self._ask_key(study, trial)
            and self._quick(study, {param_name: param_distribution})
        ):  # a later parameter of an ask already split: past the start-up trials
            return self._sample(study, trial, {param_name: param_distribution})[param_name]
        return super().sample_independent(study, trial, param_name, param_distribution)

    def _sample(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
        if not self._quick(study, search_space):
            return dict(super()._sample(study, trial, search_space))
        ((name, dist),) = search_space.items()
        key = self._ask_key(study, trial)
        split = self._split
        if split is None or split.key != key:
            self._unbatch()  # the last ask asked fewer parameters than its batch drew for
            split = self._split = self._make_split(study, trial, key)
            self._batch = self._make_batch(split, name, dist)
        store = self._store
        if isinstance(dist, _NUMERIC) and store is not None and name in store.not_float:
            return dict(
                super()._sample(study, trial, search_space)
            )  # a value float() rejects: Optuna's error
        batch = getattr(self, "_batch", None)  # absent in an older pickle
        if batch is not None and batch.key == key:
            served = batch.served[0]
            if served < len(batch.asked) and batch.asked[served] == (name, dist):
                batch.served[0] += 1
                return {name: batch.proposals[served]}
            self._unbatch()  # asked out of the predicted order: this ask goes on one by one
        if isinstance(dist, _NUMERIC):
            n_ei = self._n_ei_candidates
            return {name: self._propose(split, [(name, dist)], self._rng.rng.random_sample(2 * n_ei))[0]}
        _truncnorm._log_ndtr, _truncnorm._ndtr = _log_ndtr, _ndtr
        try:  # a categorical parameter: Optuna's own estimators, its density computed here
            below = self._parzen(split, split.good, name, dist)
            above = self._parzen(split, split.rest, name, dist)
            samples = below.sample(self._rng.rng, self._n_ei_candidates)[:, 0]
            score = _categorical_log_pdf(below, samples) - _categorical_log_pdf(above, samples)
        finally:
            _truncnorm._log_ndtr, _truncnorm._ndtr = _OPTUNA_NDTR
        return {name: dist.to_external_repr(samples[int(np.argmax(score))].item())}

    def _unbatch(self) -> None:
        """Drops the batch, the random stream put where the parameters it served, asked one by
        one, would have left it (each took 2 × ``n_ei_candidates`` draws)."""
        batch = getattr(self, "_batch", None)  # absent in an older pickle
        if batch is not None and batch.served[0] < len(batch.asked):
            rng = self._rng.rng
            rng.set_state(batch.state)
            rng.random_sample(2 * self._n_ei_candidates * batch.served[0])
        self._batch = None

    def _make_batch(self, split: _Split, name: str, dist: Any) -> _Batch | None:
        """At an ask's first parameter, the proposals for every parameter the latest finished
        trial asked, if it asked this one first and all are numeric: drawn in one pass, in that
        trial's order, the same draws as one ask per parameter would take (each 2 ×
        ``n_ei_candidates`` uniforms: the kernels', then the truncated normals' quantiles)."""
        store = self._store
        if store is None or not store.distributions:
            return None
        asked = list(store.distributions[-1].items())
        if (
            len(asked) < 2
            or asked[0] != (name, dist)
            or any(not isinstance(d, _NUMERIC) or n in store.not_float for n, d in asked)
        ):
            return None
        rng = self._rng.rng
        state = rng.get_state()
        proposals = self._propose(split, asked, rng.random_sample(2 * self._n_ei_candidates * len(asked)))
        return _Batch(split.key, asked, proposals, state, [0])

    def _propose(self, split: _Split, asked: list[tuple[str, Any]], draws: np.ndarray) -> list[Any]:
        """Optuna's univariate TPE proposal for each numeric parameter in ``asked`` from
        ``draws``, 2 × ``n_ei_candidates`` uniforms a parameter, in order: its candidates'
        kernels (``RandomState.choice(p=weights)`` on the first half), then their truncated
        normals' quantiles; each candidate scored by the good trials' density over the rest's."""
        n_ei, parameters = self._n_ei_candidates, self._parzen_estimator_parameters
        draws = draws.reshape(len(asked), 2, n_ei)
        kernels = []
        loc, scale = np.empty((len(asked), n_ei)), np.empty((len(asked), n_ei))
        low, high = np.empty((len(asked), 1)), np.empty((len(asked), 1))
        for p, (n, d) in enumerate(asked):
            below = _Kernels.build(self._observations(split, split.good, n, d), d, parameters)
            above = _Kernels.build(self._observations(split, split.rest, n, d), d, parameters)
            kernels.append((below, above))
            cdf = below.weights.cumsum()  # numpy's RandomState.choice(p=...) on these draws
            cdf /= cdf[-1]
            active = cdf.searchsorted(draws[p, 0], side="right")
            loc[p], scale[p] = below.mu[active], below.sigma[active]
            low[p], high[p] = below.low, below.high
        _truncnorm._log_ndtr, _truncnorm._ndtr = _log_ndtr, _ndtr
        try:  # Optuna's truncnorm.rvs on those quantiles
            x = _truncnorm.ppf(draws[:, 1, :], (low - loc) / scale, (high - loc) / scale) * scale + loc
        finally:
            _truncnorm._log_ndtr, _truncnorm._ndtr = _OPTUNA_NDTR
        proposals = []
        for (below, above), (_, d), samples in zip(kernels, asked, x, strict=True):
            samples = np.exp(samples) if d.log else samples
            if below.step:
                samples = np.clip(
                    d.low + np.round((samples - d.low) / below.step) * below.step, d.low, d.high
                )
            score = below.log_pdf(samples, d.log) - above.log_pdf(samples, d.log)
            proposals.append(d.to_external_repr(samples[int(np.argmax(score))].item()))
        return proposals

    def _make_split(self, study: Any, trial: Any, key: tuple[Any, ...]) -> _Split:
        """Optuna's ``_split_trials`` for one objective and no constraints, with the constant
        liar (Optuna 5's default): of the completed and pruned trials, the ``γ(n)`` best
        completed are the good ones, then the pruned that got furthest (best at their last
        step); the rest, and the trials still running but this one, are the rest."""
        liar = self._constant_liar
        trials = study._get_trials(deepcopy=False, use_cache=not liar)  # every trial, by number
        store = self._store
        if store is None or store.storage() is not study._storage or store.study_id != study._study_id:
            store = self._store = _Store(study._storage, study._study_id)
        minimize = study.direction == StudyDirection.MINIMIZE
        get = store.row_of.get
        tail: list[int] = []  # the finished trials' rows past the first one still running
        running: list[Any] = []
        settled = True  # every trial so far has finished: the next one, finished, joins the head
        for i in range(store.head, len(trials)):
            t = trials[i]
            state = t.state
            if state is _COMPLETE or state is _PRUNED:
                row = get(t._trial_id)
                if row is None:
                    row = store.add(t, minimize)
                if settled:
                    store.extend_head(i, row)
                else:
                    tail.append(row)
            elif state is _FAIL:
                if settled:
                    store.extend_head(i, None)
            else:  # running or waiting: it may finish later
                settled = False
                if liar and state is _RUNNING and t.number != trial.number:
                    running.append(t)
        finished = store.head_rows[: store.n_head]
        if tail:
            finished = np.concatenate([finished, np.array(tail, dtype=np.int64)])
        pruned = store.pruned[finished]
        complete, cut = finished[~pruned], finished[pruned]
        n_below = (self._gamma or _tpe_module.default_gamma)(len(finished))
        rank = store.rank[complete, 0]
        order = np.argsort(rank if minimize else -rank, kind="stable")
        good = complete[order[:n_below]]
        n_cut = min(max(0, n_below - len(good)), len(cut))
        if n_cut:
            good = np.concatenate([good, cut[np.lexsort((store.rank[cut, 1], store.rank[cut, 0]))[:n_cut]]])
        n = store.size
        extra = [store.row(t.params) for t in running]  # may add columns
        values = store.values[:n]
        if extra:
            pad = np.full((len(extra), store.values.shape[1]), np.nan)
            for i, read in enumerate(extra):
                pad[i, : len(read)] = read
            values = np.vstack([values, pad])
        numbers = np.concatenate([store.number[finished], [t.number for t in running]]).astype(np.int64)
        index = np.concatenate([finished, np.arange(n, n + len(running))]).astype(np.int64)
        by_number = index[np.argsort(numbers, kind="stable")]
        is_good = np.zeros(n + len(running), dtype=bool)
        is_good[good] = True
        return _Split(
            key,
            values,
            store.params + [t.params for t in running],
            by_number[is_good[by_number]],
            by_number[~is_good[by_number]],
        )

    def _observations(self, split: _Split, rows: np.ndarray, name: str, dist: Any) -> np.ndarray:
        """The internal values of ``name`` in ``rows`` that have it, as Optuna reads them
        (``float()``, for an int parameter too)."""
        store = self._store
        column = store.column_of.get(name) if store is not None else None
        if column is None or column >= split.values.shape[1]:
            return np.zeros(0)
        values = split.values[rows, column]
        values = values[~np.isnan(values)]
        if dist.log and (values <= 0.0).any():
            dist.to_internal_repr(float(values[values <= 0.0][0]))  # Optuna's error
        return values

    def _parzen(self, split: _Split, rows: np.ndarray, name: str, dist: Any) -> Any:
        """Optuna's Parzen estimator of a categorical ``name`` over ``rows`` that have it."""
        params = split.params
        values = [dist.to_internal_repr(params[i][name]) for i in rows.tolist() if name in params[i]]
        estimator = _pe_module._ParzenEstimator(
            {name: np.asarray(values)}, {name: dist}, self._parzen_estimator_parameters
        )
        return estimator._mixture_distribution
