"""Paired statistics for benchmark tables: exact sign test, exact McNemar, geometric mean.

Pure Python (math.comb), so the benchmark needs no SciPy; tests check them against SciPy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


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
