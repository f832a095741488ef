"""Paired statistics for benchmark tables: exact sign test, exact McNemar, geometric mean, and a
seeded bootstrap interval of a table's figure.

Pure Python (math.comb), so the benchmark needs no SciPy; tests check them against SciPy.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable, Sequence


def binomial_two_sided(k: int, n: int) -> float:
    """Exact two-sided p-value of k successes in n fair coin flips (1.0 when n = 0)."""
    if n == 0:
        return 1.0
    tail = min(k, n - k)
    p = sum(math.comb(n, i) for i in range(tail + 1)) / 2**n
    return min(1.0, 2 * p)


def sign_test(ours: Sequence[float], theirs: Sequence[float]) -> tuple[int, int, float]:
    """Paired sign test on costs (lower wins; ties dropped; inf = failed, so two failures tie).

    Returns (our wins, their wins, two-sided p).
    """
    wins = sum(a < b for a, b in zip(ours, theirs, strict=True))
    losses = sum(a > b for a, b in zip(ours, theirs, strict=True))
    return wins, losses, binomial_two_sided(wins, wins + losses)


def mcnemar(ours: Sequence[bool], theirs: Sequence[bool]) -> tuple[int, int, float]:
    """Exact McNemar test on paired successes.

    Returns (b = we succeeded and they failed, c = the reverse, two-sided p).
    """
    b = sum(a and not t for a, t in zip(ours, theirs, strict=True))
    c = sum(t and not a for a, t in zip(ours, theirs, strict=True))
    return b, c, binomial_two_sided(b, b + c)


def geo_mean(values: Iterable[float]) -> float:
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs)) if logs else math.nan


def bootstrap_interval(
    groups: Sequence[Sequence[float]],
    statistic: Callable[[list[float]], float],
    draws: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over the per-group medians.

    Each draw resamples every group's values with replacement (the seeds of one task), takes
    each group's median and applies ``statistic`` across the groups (a median or geometric
    mean over tasks), as a table computes its figure. Seeded: the same input gives the same
    interval. Returns (low, high) at the two-sided ``level``.
    """
    if draws < 1 or not groups or any(not g for g in groups):
        raise ValueError("bootstrap_interval: needs draws >= 1 and at least one value in every group")
    rng = random.Random(seed)
    stats = sorted(
        statistic([statistics.median(rng.choices(g, k=len(g))) for g in groups]) for _ in range(draws)
    )
    cut = min(draws // 2, round((1 - level) / 2 * draws))  # draws cut from each tail
    return stats[cut], stats[draws - 1 - cut]
