"""Where a sweep's money went: per-epoch spend, the elbow, ROI zones, cost to a target.

Pure functions of a :class:`~costtune.core.ledger.Ledger` (pandas at most; no Ray, no plots).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from costtune.core.ledger import Ledger, TrialRecord
from costtune.core.policy import StopReason, reason_of

HIGH_ROI, MARGINAL, WASTE = "high-ROI", "marginal", "waste"


@dataclass(frozen=True, slots=True)
class EpochPoint:
    """One epoch of one trial: cumulative dollars, the metric, the best so far and its zone."""

    epoch: int
    usd: float
    metric: float
    best_so_far: float
    marginal_roi: float
    zone: str


@dataclass(frozen=True, slots=True)
class Elbow:
    """The epoch after which a trial's marginal ROI stayed below ``min_roi``."""

    trial_id: str
    epoch: int
    metric: float
    usd: float
    usd_after: float  # what the epochs after the elbow cost
    min_roi: float


def curve(
    ledger: Ledger, record: TrialRecord, window: int = 3, min_roi: float | None = None
) -> list[EpochPoint]:
    """The trial's epochs with cumulative dollars and windowed marginal ROI.

    Marginal ROI at epoch i = improvement of the best-so-far metric over the last
    ``window`` epochs × business value / the dollars those epochs cost. A window (rather
    than one epoch) keeps a noisy validation curve from flipping zones every epoch.

    Zones: ``high-ROI`` while marginal ROI ≥ ``min_roi``; ``marginal`` while it is
    positive but below; ``waste`` when the window bought no improvement at all.
    ``min_roi`` defaults to :func:`default_min_roi`.
    """
    spec = ledger.spec
    model = spec.cost_model
    points: list[EpochPoint] = []
    best = math.nan
    history = [(e, model.cost_usd(s, record.devices, record.device_kind), m) for e, s, m in record.history]
    threshold = default_min_roi(ledger, record) if min_roi is None else min_roi
    bests: list[float] = []
    for i, (epoch, usd, metric) in enumerate(history):
        if spec.direction.better(metric, best):
            best = metric
        bests.append(best)
        j = max(0, i - window)
        spent = usd - history[j][1]
        gained = spec.direction.improvement(bests[j], best) if i > 0 else math.nan
        mroi = gained * spec.business_value_usd / spent if spent > 0 and not math.isnan(gained) else math.nan
        if i == 0 or math.isnan(mroi) or mroi >= threshold:
            zone = HIGH_ROI
        elif mroi > 0:
            zone = MARGINAL
        else:
            zone = WASTE
        points.append(EpochPoint(epoch, usd, metric, best, mroi, zone))
    return points


def default_min_roi(ledger: Ledger, record: TrialRecord) -> float:
    """A tenth of the trial's average ROI: the point where a dollar buys a tenth of what
    the average dollar of this trial bought."""
    average = ledger.trial_roi(record)
    return 0.1 * average if math.isfinite(average) and average > 0 else 0.0


def elbow(ledger: Ledger, record: TrialRecord, window: int = 3, min_roi: float | None = None) -> Elbow | None:
    """The last epoch whose marginal ROI was still ≥ the threshold (None without history)."""
    points = curve(ledger, record, window, min_roi)
    if not points:
        return None
    threshold = default_min_roi(ledger, record) if min_roi is None else min_roi
    last_good = 0
    for i, p in enumerate(points):
        if p.zone == HIGH_ROI:
            last_good = i
    at = points[last_good]
    return Elbow(record.trial_id, at.epoch, at.best_so_far, at.usd, points[-1].usd - at.usd, threshold)


def zone_bands(points: list[EpochPoint], elbow_epoch: int) -> list[EpochPoint]:
    """A trial's epochs as at most three contiguous bands a user can act on: ``high-ROI`` up
    to the elbow, ``marginal`` up to the last epoch that still improved the best, ``waste``
    after it. Returns the last point of each non-empty band, relabelled with the band.

    Windowed marginal ROI on a noisy curve flips zones every few epochs (7, 8, 11, 14, …);
    the bands keep what those flips say in aggregate: where the money stopped paying.
    """
    if not points:
        return []
    elbow_at = max((i for i, p in enumerate(points) if p.epoch <= elbow_epoch), default=0)
    gained_at = max(
        (i for i in range(1, len(points)) if points[i].best_so_far != points[i - 1].best_so_far),
        default=0,
    )
    ends = [(elbow_at, HIGH_ROI)]
    if gained_at > elbow_at:
        ends.append((gained_at, MARGINAL))
    if len(points) - 1 > max(elbow_at, gained_at):
        ends.append((len(points) - 1, WASTE))
    return [replace(points[i], zone=zone) for i, zone in ends]


def cost_to_target(ledger: Ledger, target: float) -> float | None:
    """Cumulative dollars of every epoch run, in the order they ran, until any trial's
    metric first reaches ``target``; ``None`` if it never did."""
    spent = 0.0
    for _trial_id, _epoch, usd, metric, *_ in ledger.timeline:
        spent += usd
        if not math.isnan(metric) and ledger.spec.direction.improvement(target, metric) >= 0:
            return spent
    return None


def spend_by_band(ledger: Ledger, bands: list[int]) -> dict[str, float]:
    """Dollars spent in each epoch band, e.g. bands [5, 25, 50] → '1-5', '6-25', '26-50'."""
    edges = sorted(set(bands))
    labels = [f"{lo + 1}-{hi}" for lo, hi in zip([0, *edges[:-1]], edges, strict=True)]
    out = dict.fromkeys(labels, 0.0)
    if edges:
        out[f">{edges[-1]}"] = 0.0
    for _trial_id, epoch, usd, *_ in ledger.timeline:
        for label, hi in zip(labels, edges, strict=True):
            if epoch <= hi:
                out[label] += usd
                break
        else:
            out[f">{edges[-1]}"] += usd
    return {k: v for k, v in out.items() if v > 0 or not k.startswith(">")}


def spend_by_stop_reason(ledger: Ledger) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in ledger.trials.values():
        key = reason_of(r.stop_reason, r.status)
        out[key] = out.get(key, 0.0) + ledger.cost_usd(r)
    return out


@dataclass(frozen=True, slots=True)
class BestSoFar:
    """A point of the sweep's best-so-far line: after ``usd`` dollars (all trials, in the
    order their epochs ran), the best metric was ``metric``, first reached by ``trial_id``
    at ``epoch``."""

    usd: float
    metric: float
    trial_id: str
    epoch: int


def best_so_far(ledger: Ledger) -> list[BestSoFar]:
    """Each new best of the sweep against its cumulative dollars (the money plot)."""
    spent, best = 0.0, math.nan
    points: list[BestSoFar] = []
    for trial_id, epoch, usd, metric, *_ in ledger.timeline:
        spent += usd
        if math.isnan(metric):
            continue
        if ledger.spec.direction.better(metric, best):
            best = metric
            points.append(BestSoFar(spent, metric, trial_id, epoch))
    return points


def best_so_far_had_all_run_full(ledger: Ledger) -> list[BestSoFar]:
    """The counterfactual the saving is measured against: the same trials, in the order
    they started, each paid to ``max_epochs`` (as :meth:`Ledger.costs_if_ran_full_usd`),
    each bringing the best value it reached.

    Its last point's dollars are ``cost_if_all_ran_full_usd``. What a stopped trial would
    have reached had it gone on is unknown; its observed best stands in (an optimistic
    counterfactual for the stopped trials, so the saving it shows is not overstated).
    """
    max_epochs = ledger.spec.max_epochs
    full = ledger.costs_if_ran_full_usd()
    if max_epochs is None or full is None:
        return []
    order = list(dict.fromkeys(trial_id for trial_id, *_ in ledger.timeline))
    spent, best = 0.0, math.nan
    points: list[BestSoFar] = []
    for trial_id in order:
        record = ledger.trials[trial_id]
        if trial_id not in full:
            continue
        spent += full[trial_id]
        value = ledger.best_metric(record)
        if ledger.spec.direction.better(value, best):
            best = value
        if not math.isnan(best):
            points.append(BestSoFar(spent, best, trial_id, max(max_epochs, record.epochs)))
    return points


def dollars_to_best(ledger: Ledger) -> float | None:
    """Dollars the sweep spent before its best value was first reached."""
    points = best_so_far(ledger)
    return points[-1].usd if points else None


#: the stop reasons that are the sweep's own judgement of a trial (not a cap, an error, the budget)
JUDGED = frozenset(
    r.value
    for r in (
        StopReason.RUNG_PRUNED,
        StopReason.LOOKAHEAD_PRUNED,
        StopReason.MARGINAL_ROI,
        StopReason.OUTLOOK,
        StopReason.PATIENCE,
    )
)
#: a trial "moved" once its loss fell below its first epoch's by this share of what the sweep gained
MOVED_SHARE = 0.02
#: the share of judged trials stopped before moving at which the sweep is told (and the fewest)
FLAT_STOPS_SHARE, FLAT_STOPS_MIN = 0.5, 10
#: the best trial is "still improving" when its last tenth of max_epochs bought this share of its gain
STILL_IMPROVING_SHARE = 0.1


@dataclass(frozen=True, slots=True)
class Finding:
    """Something the sweep's own books say about its decisions that a user should act on."""

    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


def findings(ledger: Ledger) -> list[Finding]:
    """What the sweep's own curves say about its decisions (:func:`curve_findings`)."""
    spec = ledger.spec
    loss = spec.direction.loss
    curves = {
        t: c
        for t, r in ledger.trials.items()
        if (c := [v for _, _, m in r.history if math.isfinite(v := loss(m))])
    }
    judged = {
        t
        for t, r in ledger.trials.items()
        if reason_of(r.stop_reason, r.status) in JUDGED
        and (spec.max_epochs is None or r.epochs < spec.max_epochs)
    }
    completed = {
        t for t, r in ledger.trials.items() if spec.max_epochs is not None and r.epochs >= spec.max_epochs
    }
    return curve_findings(curves, judged, completed, spec.metric, spec.max_epochs)


def curve_findings(
    curves: Mapping[str, Sequence[float]],
    judged: Collection[str],
    completed: Collection[str],
    metric: str,
    max_epochs: int | None,
) -> list[Finding]:
    """What a sweep's curves say about its own decisions, in a line each (none when healthy).

    ``curves``: each trial's losses by epoch (lower is better); ``judged``: the trials the rungs
    or the stopping rule stopped before ``max_epochs``; ``completed``: those that reached it.

    - ``stopped_before_moving``: at least half of the judged trials (and at least 10) had not
      moved from their first epoch's loss (by 2% of what the sweep gained: the median first
      loss less the best) when they were stopped. Where curves start flat (a warm-up, a small
      learning rate), every decision is taken before the curves say anything, and a sweep can
      stop the configurations that end best (``benchmarks/slow_starters.py``'s ``plateau``
      curves: 56% of the stopped trials; on LCBench's dev tasks 0–20%).
    - ``best_still_improving``: the best of the trials that reached ``max_epochs`` bought at
      least a tenth of its whole gain in its last tenth of them (at least 2 epochs): more
      epochs may buy more.
    """
    curves = {t: c for t, c in curves.items() if len(c)}
    if not curves:
        return []
    firsts = sorted(c[0] for c in curves.values())
    best = min(min(c) for c in curves.values())
    gained = (firsts[(len(firsts) - 1) // 2] + firsts[len(firsts) // 2]) / 2 - best
    out: list[Finding] = []
    stopped = [t for t in judged if t in curves]
    flat = sorted(len(curves[t]) for t in stopped if min(curves[t]) > curves[t][0] - MOVED_SHARE * gained)
    if gained > 0 and len(stopped) >= FLAT_STOPS_MIN and len(flat) >= FLAT_STOPS_SHARE * len(stopped):
        out.append(
            Finding(
                "stopped_before_moving",
                f"{len(flat)} of the {len(stopped)} trials the rungs or the stopping rule stopped had not "
                f"moved from their first epoch's {metric} (median stop at epoch {flat[len(flat) // 2]}): "
                "where curves start flat (a warm-up, a small learning rate) they were judged before they "
                "moved, and the configurations that end best may be among them; raise "
                "scheduler.grace_epochs past the flat stretch, or run "
                "scheduler.type: fifo",
            )
        )
    full = [t for t in completed if t in curves]
    if full and max_epochs is not None:
        top = min(full, key=lambda t: (min(curves[t]), t))
        c = list(curves[top])
        w = max(2, max_epochs // 10)
        whole, late = c[0] - min(c), (min(c[:-w]) - min(c)) if len(c) > w else 0.0
        if whole > 0 and late >= STILL_IMPROVING_SHARE * whole:
            out.append(
                Finding(
                    "best_still_improving",
                    f"the best trial that ran to max_epochs ({top}) was still improving there: its last "
                    f"{w} epochs bought {late / whole:.0%} of its whole gain in {metric}; a larger "
                    "max_epochs may buy more",
                )
            )
    return out
