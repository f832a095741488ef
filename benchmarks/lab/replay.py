"""A replay with the benchmarks' mechanisms: the settings ``families.py`` names, split into
what ``costtune replay`` takes (:class:`~costtune.replay.ReplaySettings`), what only
:class:`~lab.hyperband.LabHyperband` knows and what only :class:`~lab.stopping.LabStopping`
knows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from costtune.core.curves import Curve
from costtune.replay import Replay, ReplaySettings, replay_pool
from lab.hyperband import LabHyperband, auto_warmup_trials
from lab.stopping import LabStopping, LabStoppingRule

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
    "thaw": None,  # None: off; "quantile", "deepest" or "cut" (lab.thaw.ThawHyperband, with a budget)
    "thaw_share": None,  # what thawing may spend, a share of the sweep's dollars when it began
}


#: the stopping settings of :class:`LabStopping` and their values when off: ``stopping`` is
#: none, relative (ρ = ``rho``, sparing the best, ``noise_aware``) or expected (ρ = ``rho``)
LAB_STOPPING = {"stopping": "none", "rho": 0.3, "noise_aware": True}


def split(spec: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``spec`` as (ReplaySettings' fields, :data:`LAB_SCHEDULER`'s, :data:`LAB_STOPPING`'s)."""
    lab = {k: v for k, v in spec.items() if k in LAB_SCHEDULER}
    stop = {k: v for k, v in spec.items() if k in LAB_STOPPING}
    rest = {k: v for k, v in spec.items() if k not in LAB_SCHEDULER and k not in LAB_STOPPING}
    return rest, lab, stop


def lab_stopping(stop: Mapping[str, Any], max_epochs: int) -> LabStopping | None:
    """The stopping rule ``stop`` names (``None``: none)."""
    o = {**LAB_STOPPING, **stop}
    if o["stopping"] == "none":
        return None
    if o["stopping"] not in ("relative", "expected"):
        raise ValueError(f"stopping: none, relative or expected, got {o['stopping']!r}")
    expected = o["stopping"] == "expected"
    rule = LabStoppingRule(
        min_relative_roi=o["rho"],
        spare_best=True,
        max_epochs=max_epochs,
        expected=expected,
        noise_aware=o["noise_aware"] and not expected,
    )
    return LabStopping(rule)


def lab_policy(
    s: ReplaySettings, lab: Mapping[str, Any], max_epochs: int, configurations: int
) -> LabHyperband | None:
    """The scheduler ``lab`` names on ``s``'s rungs (``None`` with ``scheduler: fifo``)."""
    if s.scheduler != "hyperband":
        return None
    o = {**LAB_SCHEDULER, **lab}
    if o["thaw"] is not None:
        from lab.thaw import ThawHyperband

        return ThawHyperband(
            max_epochs, s.grace_epochs, s.eta, s.brackets, order=o["thaw"], share=o["thaw_share"]
        )
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
    :class:`LabHyperband`'s where ``spec`` names one of its settings, the stopping rule
    :class:`LabStopping`'s where it names one."""
    fields, lab, stop = split(spec)
    s = ReplaySettings(**fields)
    longest = max(c.epochs for c in table)
    policy = lab_policy(s, lab, longest, len(table)) if lab else None
    return replay_pool(table, s, policy=policy, stopping=lab_stopping(stop, longest))
