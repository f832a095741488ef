"""Where a learning curve is going: its final loss as a distribution, learned from the sweep.

A curve's pace is read over its last doubling of epochs, t/2 → t: its smoothed loss fell by
d = m(t/2) − m(t). The curves of the sweep's trials that reached ``max_epochs`` = T say how
many such paces a curve still fell from t to T:

    q_j = (m_j(t) − m_j(T)) / d_j,    j over the reference curves,

so a trial now at m(t) with pace d ends at one of m(t) − q_j · d, each equally likely: an
empirical predictive distribution whose spread is the sweep's own (no curve family assumed,
nothing in the metric's units). Few references (fewer than ``min_references``) give the
optimistic outlook alone (:func:`~lab.outlook.outlook`: a curve linear in log
epochs, the slowest-decaying power law), which judges a trial by the most it could gain. Each
q_j is capped at twice that outlook's multiple, so a reference that was flat at t and fell
later cannot promise a trial that is also flat an unbounded gain.

Pure and deterministic: lists of numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: references needed before their paces replace the optimistic outlook
MIN_REFERENCES = 3
#: a reference's multiple is capped at this many times the outlook's
CAP_OVER_OUTLOOK = 2.0


def doubling_drop(smooth: Sequence[float], t: int) -> float:
    """d: how far the smoothed curve fell over epochs ⌊t/2⌋ → t (1-based; 0 when t < 2)."""
    if t < 2:
        return 0.0
    drop = smooth[t // 2 - 1] - smooth[t - 1]
    return drop if math.isfinite(drop) and drop > 0 else 0.0


def outlook_multiple(t: int, max_epochs: int) -> float:
    """The paces a curve linear in log epochs still falls from t to T: log2(T/t) / log2(t/⌊t/2⌋)."""
    if t < 2 or t >= max_epochs:
        return 0.0
    return math.log2(max_epochs / t) / math.log2(t / (t // 2))


def pace_multiples(references: Sequence[Sequence[float]], t: int, max_epochs: int) -> list[float]:
    """Each reference curve's q_j at epoch ``t``: what it fell from t to T over its pace at t."""
    cap = CAP_OVER_OUTLOOK * outlook_multiple(t, max_epochs)
    out = []
    for ref in references:
        rest = ref[t - 1] - ref[max_epochs - 1]
        if not math.isfinite(rest):
            continue
        d = doubling_drop(ref, t)
        rest = max(rest, 0.0)
        out.append(min(rest / d, cap) if d > 0 else (0.0 if rest == 0 else cap))
    return out


def final_losses(
    smooth: Sequence[float],
    references: Sequence[Sequence[float]],
    max_epochs: int,
    min_references: int = MIN_REFERENCES,
) -> list[float]:
    """The trial's predicted losses at ``max_epochs``, equally likely (see the module docstring).

    Args:
        smooth: the trial's smoothed, non-increasing curve, epochs 1..t.
        references: smoothed curves of trials that reached ``max_epochs`` (each that long).
        max_epochs: T.
        min_references: below this many references, the optimistic outlook alone.
    """
    t = len(smooth)
    if t == 0:
        return [math.inf]
    now = smooth[-1]
    if t >= max_epochs:
        return [now]
    d = doubling_drop(smooth, t)
    multiples = pace_multiples(references, t, max_epochs) if len(references) >= min_references else []
    if len(multiples) < min_references:
        multiples = [outlook_multiple(t, max_epochs)]
    return [now - q * d for q in multiples]


def expected_gain(finals: Sequence[float], incumbent: float) -> float:
    """E[max(0, incumbent − final)]: what the trial is expected to lower the sweep's best by."""
    if not finals:
        return 0.0
    return sum(max(incumbent - f, 0.0) for f in finals) / len(finals)
