"""A replay with the benchmarks' scheduling mechanisms: the settings ``families.py`` names,
split into what ``costtune replay`` takes (:class:`~costtune.replay.ReplaySettings`) and what
only :class:`~lab.hyperband.LabHyperband` knows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from costtune.core.curves import Curve
from costtune.replay import Replay, ReplaySettings, replay_pool
from lab.hyperband import LabHyperband, auto_warmup_trials

#: the scheduler settings of :class:`LabHyperband` and their values when off (the rungs alone)
LAB_SCHEDULER = {
    "promotion": "loss",
    "keep": "floor",
    "lookahead": 0,  # 0: off
    "warmup_trials": 0,  # "auto" (2η, at most a tenth of the pool), a count, or 0: off
    "escalate": False,
    "hedge": False,
    "hedge_judges": "every_bracket",
    "rung_checks": 0,
}


def split(spec: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``spec`` as (ReplaySettings' fields, :data:`LAB_SCHEDULER`'s)."""
    lab = {k: v for k, v in spec.items() if k in LAB_SCHEDULER}
    return {k: v for k, v in spec.items() if k not in LAB_SCHEDULER}, lab


def lab_policy(
    s: ReplaySettings, lab: Mapping[str, Any], max_epochs: int, configurations: int
) -> LabHyperband | None:
    """The scheduler ``lab`` names on ``s``'s rungs (``None`` with ``scheduler: fifo``)."""
    if s.scheduler != "hyperband":
        return None
    o = {**LAB_SCHEDULER, **lab}
    warmup = (
        auto_warmup_trials(s.eta, configurations)
        if o["warmup_trials"] == "auto"
        else int(o["warmup_trials"] or 0) or None
    )
    return LabHyperband(
        max_epochs,
        s.grace_epochs,
        s.eta,
        s.brackets,
        o["promotion"],
        o["keep"],
        o["lookahead"] or None,
        warmup,
        o["escalate"],
        rung_checks=o["rung_checks"],
        hedge=o["hedge"] and o["escalate"],
        judge_every_bracket=o["hedge_judges"] == "every_bracket",
    )


def lab_replay(table: Sequence[Curve], spec: Mapping[str, Any]) -> Replay:
    """:func:`costtune.replay.replay_pool` of ``table`` under ``spec``; the rungs are
    :class:`LabHyperband`'s where ``spec`` names one of its settings."""
    fields, lab = split(spec)
    s = ReplaySettings(**fields)
    if not lab:
        return replay_pool(table, s)
    longest = max(c.epochs for c in table)
    return replay_pool(table, s, policy=lab_policy(s, lab, longest, len(table)))
