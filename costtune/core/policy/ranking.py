"""Ranking by two costs at once: non-dominated fronts of (loss, dollars).

One implementation for every decision that ranks by Pareto fronts: the rungs' ``pareto``
promotion rule (:mod:`~costtune.core.policy.successive_halving`) and PBT's quantiles
(:mod:`~costtune.core.policy.pbt`). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence


def pareto_fronts(points: Sequence[tuple[float, float]]) -> list[int]:
    """Front index (0 = non-dominated) of each point, both coordinates minimised.

    Sort and scan, O(n log n): in (x, y) order a point can only be dominated by one seen
    before it, and "some point of front k dominates p" holds for fronts 0..j−1 and for none
    after (a point of a later front is dominated by one of an earlier front), so each point's
    front is a bisection over the fronts' best y (with the x of the first point reaching it:
    an equal y dominates only from a smaller x).
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    fronts = [-1] * len(points)
    best_y: list[float] = []  # per front: its smallest y so far
    x_at_best: list[float] = []  # the x of the first point that reached it (the smallest)
    for i in order:
        x, y = points[i]
        lo, hi = 0, len(best_y)
        while lo < hi:  # the first front that does not dominate (x, y)
            mid = (lo + hi) // 2
            if best_y[mid] < y or (best_y[mid] == y and x_at_best[mid] < x):
                lo = mid + 1
            else:
                hi = mid
        if lo == len(best_y):
            best_y.append(y)
            x_at_best.append(x)
        elif y < best_y[lo]:
            best_y[lo], x_at_best[lo] = y, x
        fronts[i] = lo
    return fronts
