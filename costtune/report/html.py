"""The interactive HTML report and comparison: one self-contained file each, Plotly inlined.

Figures are built as plain Plotly JSON (``{"data": [...], "layout": {...}}``) rather than
through ``plotly.graph_objects``: at 1,000 trials the object layer's validation costs more
than everything else together, and the JSON is what the page needs anyway. The only thing
taken from the ``plotly`` package is the Plotly.js bundle it ships (``get_plotlyjs``), so
the page works offline, as Optuna's visualisations do.

Each panel is a :class:`Panel`; a page is a list of them plus tables. A small script plots
them, shows a banner for a panel that failed, and records what it drew in
``<body data-render=…>`` (panels, points, errors) — what the browser tests read.
"""

from __future__ import annotations

import html
import json
import math
import os
import pickle
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from costtune.core.analysis import best_so_far, best_so_far_had_all_run_full
from costtune.core.direction import Direction
from costtune.core.ledger import CHARGE, Ledger
from costtune.core.policy import StopReason, reason_of
from costtune.core.run import Run
from costtune.report.text import (
    COMPARE_LABELS,
    Report,
    _readable,
    compare_notes,
    duration,
    load_snippet,
    report_lines,
    sort_trials,
    summary_lines,
    usd,
    wall_seconds,
)
from costtune.report.text import (
    _fmt as _metric_text,
)

#: one colour per stop reason, stable across panels and pages
_REASON_COLOURS = {
    StopReason.COMPLETED.value: "#1f77b4",
    StopReason.RUNG_PRUNED.value: "#ff7f0e",
    StopReason.MARGINAL_ROI.value: "#2ca02c",
    StopReason.PATIENCE.value: "#9467bd",
    StopReason.OUTLOOK.value: "#8c564b",
    StopReason.TRIAL_COST_CAP.value: "#d62728",
    StopReason.TRIAL_TIME_CAP.value: "#e377c2",
    StopReason.SWEEP_BUDGET.value: "#7f7f7f",
    StopReason.TIME_BUDGET.value: "#7f7f7f",
    StopReason.ERROR.value: "#bcbd22",
    StopReason.INTERRUPTED.value: "#17becf",
}
_OTHER_COLOURS = ["#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#31a354"]
_RUN_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
_BEST = "#000000"


@dataclass
class Panel:
    """One figure of a page: a div, a heading, a caption, and its Plotly JSON."""

    id: str
    title: str
    caption: str
    data: list[dict[str, Any]]
    layout: dict[str, Any] = field(default_factory=dict)
    note: str | None = None  # shown instead of the figure when there is nothing to draw
    #: what changes where the chart is narrower than :data:`NARROW_PX` (a phone): Plotly
    #: ``relayout`` updates under ``"layout"``, ``restyle`` updates under ``"style"``
    narrow: dict[str, dict[str, Any]] = field(default_factory=dict)


#: a chart narrower than this (CSS px) is laid out for a phone (:attr:`Panel.narrow`)
NARROW_PX = 560


def _num(value: Any) -> float | None:
    """A JSON-safe number (NaN and infinities become null, which Plotly leaves out)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def config_text(config: Mapping[str, Any], limit: int = 8) -> str:
    """A trial's hyperparameters for a hover label, one per line."""
    items = [f"{html.escape(str(k))}={html.escape(_fmt(v))}" for k, v in list(config.items())[:limit]]
    if len(config) > limit:
        items.append(f"… {len(config) - limit} more")
    return "<br>".join(items)


def _colour(reason: str, seen: dict[str, str]) -> str:
    if reason not in seen:
        seen[reason] = _REASON_COLOURS.get(reason, _OTHER_COLOURS[len(seen) % len(_OTHER_COLOURS)])
    return seen[reason]


def _axis(title: str, **more: Any) -> dict[str, Any]:
    return {"title": {"text": title}, "automargin": True, **more}


def _log_if_wide(values: Iterable[float], decades: float = 1.5) -> str:
    """``"log"`` when every value is positive and they span ``decades`` decades or more."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if finite and min(finite) > 0 and max(finite) / min(finite) >= 10**decades:
        return "log"
    return "linear"


def metric_axis(title: str, values: Iterable[float], decades: float = 1.5) -> dict[str, Any]:
    """An axis for the metric: log where its positive values span ``decades`` decades or more
    (:func:`_log_if_wide`), then labelled at round values (:func:`_log_tick_values`) as numbers
    people read, not Plotly's minor digits, which run into one another."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if _log_if_wide(finite, decades) != "log":
        return _axis(title)
    ticks = _log_tick_values(min(finite), max(finite))
    return _axis(title, type="log", tickvals=ticks, ticktext=[f"{v:g}" for v in ticks])


def dollar_tickformat(largest: float) -> str:
    """A d3 tick format for a dollar axis whose largest value is ``largest``: plain decimals a
    person reads ($0.0004, $0.25, $12, $1.2k), never SI's "10µ" or an exponent."""
    if not math.isfinite(largest) or largest <= 0:
        return ",.2f"
    if largest >= 1000:
        return ",.3~s"
    if largest >= 10:
        return ",.0f"
    return f",.{max(2, 1 - math.floor(math.log10(largest)))}~f"


def dollar_axis(title: str, largest: float, smallest: float | None = None, **more: Any) -> dict[str, Any]:
    """A dollar axis (``$`` before each tick, :func:`dollar_tickformat`). A log axis (``type="log"``
    and ``smallest`` > 0) is labelled at 1, 2 and 5 times each decade, or each decade where it
    spans more than two, as dollars: Plotly's own log ticks print every minor tick with the
    axis's format ($0.00001 five times over)."""
    if more.get("type") == "log" and smallest is not None and 0 < smallest < largest:
        values = _log_tick_values(smallest, largest)
        return _axis(title, tickvals=values, ticktext=[_money_tick(v) for v in values], **more)
    return _axis(title, tickprefix="$", tickformat=dollar_tickformat(largest), **more)


def _money_tick(value: float) -> str:
    """A round dollar amount as short as it reads: $0.00002, $0.5, $3, $20k."""
    if value >= 1e6:
        return f"${value / 1e6:g}M"
    if value >= 1e3:
        return f"${value / 1e3:g}k"
    if value >= 1:
        return f"${value:g}"
    return f"${value:.{-math.floor(math.log10(value) + 1e-9)}f}"


def _layout(x: str, y: str, **more: Any) -> dict[str, Any]:
    return {
        "xaxis": _axis(x),
        "yaxis": _axis(y),
        "hovermode": "closest",
        "margin": {"t": 30, "r": 20, "b": 50, "l": 60},
        "legend": {"orientation": "h", "y": -0.22},
        **more,
    }


# --------------------------------------------------------------------- report panels
def money_panel(ledger: Ledger) -> Panel:
    """Best-so-far metric against the sweep's cumulative dollars, and the counterfactual."""
    metric = ledger.spec.metric
    points = best_so_far(ledger)
    spent = sum(row.usd for row in ledger.timeline)
    data: list[dict[str, Any]] = []
    if points:
        xs = [p.usd for p in points] + [spent]
        ys = [p.metric for p in points] + [points[-1].metric]
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": xs,
                "y": ys,
                "line": {"shape": "hv", "color": "#1f77b4", "width": 2},
                "name": "this sweep",
                "hoverinfo": "skip",
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [p.usd for p in points],
                "y": [p.metric for p in points],
                "marker": {"size": 8, "color": "#1f77b4"},
                "name": "a new best",
                "hovertext": [
                    f"trial {p.trial_id}, epoch {p.epoch}<br>{metric} {p.metric:.4g}<br>"
                    f"sweep spent ${p.usd:.4g}<br>{config_text(ledger.trials[p.trial_id].config)}"
                    for p in points
                ],
                "hoverinfo": "text",
            }
        )
    full = best_so_far_had_all_run_full(ledger)
    if full:
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": [p.usd for p in full],
                "y": [p.metric for p in full],
                "line": {"shape": "hv", "color": "#7f7f7f", "dash": "dash"},
                "marker": {"size": 4},
                "name": "had every trial run to max_epochs",
                "hovertext": [
                    f"trial {p.trial_id} paid to epoch {p.epoch}<br>best {metric} so far {p.metric:.4g}<br>"
                    f"${p.usd:.4g}"
                    for p in full
                ],
                "hoverinfo": "text",
            }
        )
    ys = [p.metric for p in points] + [p.metric for p in full]
    counterfactual = full[-1].usd if full else None
    # the axis ends just past the dollars spent: the counterfactual runs on past the edge, so
    # the sweep's own curve uses the width
    edge = spent * 1.03
    beyond = ""
    if counterfactual is not None and counterfactual > spent:
        beyond = (
            f" Dashed: the same trials had each been paid to max_epochs (their observed best; what "
            f"the saving is measured against): {usd_text(counterfactual)} in all"
            + (
                ", past the right edge (double-click the chart to see it whole)."
                if counterfactual > edge
                else "."
            )
        )
    xaxis = dollar_axis("sweep dollars spent", spent, range=[0, edge] if spent > 0 else None)
    return Panel(
        "money",
        "Best so far against dollars",
        f"The best {html.escape(metric)} of the sweep against what the whole sweep had spent (every "
        f"epoch of every trial, in the order they ran); a marker where a new best arrived.{beyond}",
        data,
        _layout("sweep dollars spent", metric, xaxis=xaxis, yaxis=metric_axis(metric, ys, 1.0)),
        None if data else "no trial reported the metric",
    )


def usd_text(value: float | None) -> str:
    """:func:`costtune.report.text.usd`, HTML-escaped."""
    from costtune.report.text import usd

    return html.escape(usd(value))


def curves_panel(ledger: Ledger, best_id: str | None, elbow: Any = None) -> Panel:
    """Each trial's metric against epochs, its stop point marked and coloured by why."""
    metric = ledger.spec.metric
    model = ledger.spec.cost_model
    colours: dict[str, str] = {}
    shown: set[str] = set()
    data: list[dict[str, Any]] = []
    values: list[float] = []
    best_trace: list[dict[str, Any]] = []
    ends: dict[str, tuple[list[int], list[float | None], list[str]]] = {}
    for record in ledger.trials.values():
        if not record.history:
            continue
        reason = reason_of(record.stop_reason, record.status)
        colour = _colour(reason, colours)
        epochs = [e for e, _s, _m in record.history]
        ys = [_num(m) for _e, _s, m in record.history]
        values.extend(v for v in ys if v is not None)
        dollars = [model.cost_usd(s, record.devices, record.device_kind) for _e, s, _m in record.history]
        best = record.trial_id == best_id
        label = f"best trial {record.trial_id}" if best else f"trial {record.trial_id}"
        trace = {
            "type": "scatter",
            "mode": "lines",
            "x": epochs,
            "y": ys,
            "customdata": dollars,
            "meta": record.trial_id,  # a table row's click finds its curve by it
            "line": {"color": _BEST if best else colour, "width": 3 if best else 1},
            "opacity": 1.0 if best else 0.55,
            "name": label if best else reason,
            "legendgroup": "best" if best else reason,
            "showlegend": best or reason not in shown,
            "hovertemplate": f"{label} ({html.escape(reason)})<br>epoch %{{x}}<br>{html.escape(metric)} "
            f"%{{y:.4g}}<br>$%{{customdata:.4g}} so far<br>{config_text(record.config)}<extra></extra>",
        }
        if best:
            best_trace.append(trace)
        else:
            shown.add(reason)
            data.append(trace)
        xs_end, ys_end, text_end = ends.setdefault(reason, ([], [], []))
        xs_end.append(epochs[-1])
        ys_end.append(ys[-1])
        text_end.append(f"{label} stopped: {reason}<br>epoch {epochs[-1]}, ${dollars[-1]:.4g}")
    for reason, (xs, ys, text) in ends.items():
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": xs,
                "y": ys,
                "hovertext": text,
                "hoverinfo": "text",
                "marker": {"symbol": "x", "size": 7, "color": colours[reason]},
                "name": f"stopped: {reason}",
                "legendgroup": reason,
                "showlegend": False,
            }
        )
    data.extend(best_trace)  # drawn last: on top
    if elbow is not None and best_id is not None and best_id in ledger.trials:
        # on the trial's own curve: its metric at that epoch (the elbow's metric is its best so far)
        own = {e: m for e, _s, m in ledger.trials[best_id].history}
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [elbow.epoch],
                "y": [_num(own.get(elbow.epoch, elbow.metric))],
                "marker": {"size": 12, "color": "#d62728", "symbol": "circle-open", "line": {"width": 3}},
                "name": f"elbow of best trial {best_id} (epoch {elbow.epoch})",
                "hovertext": [
                    f"elbow of best trial {best_id}: epoch {elbow.epoch}<br>after it, "
                    f"${elbow.usd_after:.4g} bought less than {elbow.min_roi:.3g} ROI per dollar"
                ],
                "hoverinfo": "text",
            }
        )
    return Panel(
        "curves",
        "Learning curves",
        f"Every trial's {html.escape(metric)} by epoch (y on a log scale when it spans decades); × where "
        "it stopped, coloured by why; the best trial in black with its elbow. Click a legend entry to "
        "hide or show a stop reason.",
        data,
        _layout("epoch", metric, yaxis=metric_axis(metric, values)),
        None if data else "no trial reported an epoch",
    )


def pareto_panel(ledger: Ledger, frame: pd.DataFrame, best_id: str | None) -> Panel:
    """Each trial's best metric against its dollars, with the Pareto front."""
    metric, mode = ledger.spec.metric, ledger.spec.mode
    column = f"best_{metric}"
    rows = frame.dropna(subset=[column]) if column in frame else frame.iloc[0:0]
    data: list[dict[str, Any]] = []
    if not rows.empty:
        text = [
            f"{'best trial' if t == best_id else 'trial'} {t} ({r})<br>{metric} {m:.4g}, ${c:.4g}, "
            f"{int(e)} epochs<br>{config_text(ledger.trials[t].config)}"
            for t, r, m, c, e in zip(
                rows["trial_id"],
                rows["stop_reason"],
                rows[column],
                rows["cost_usd"],
                rows["epochs"],
                strict=True,
            )
        ]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": rows["cost_usd"].tolist(),
                "y": rows[column].tolist(),
                "hovertext": text,
                "hoverinfo": "text",
                "marker": {
                    "size": [12 if t == best_id else 7 for t in rows["trial_id"]],
                    "color": [_BEST if t == best_id else "#1f77b4" for t in rows["trial_id"]],
                    "opacity": 0.75,
                },
                "name": "trials",
            }
        )
        front = pareto_front(rows["cost_usd"].tolist(), rows[column].tolist(), mode)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": [c for c, _ in front],
                "y": [m for _, m in front],
                "line": {"shape": "hv", "color": "#d62728"},
                "name": "Pareto front",
                "hoverinfo": "skip",
            }
        )
    return Panel(
        "pareto",
        "Metric against dollars per trial",
        f"Each trial's best {html.escape(metric)} against what it cost; the red line is the Pareto "
        "front (no cheaper trial did better); the best trial in black.",
        data,
        _layout(
            "trial dollars",
            f"best {metric}",
            xaxis=dollar_axis(
                "trial dollars",
                float(rows["cost_usd"].max()) if not rows.empty else 0.0,
                float(rows["cost_usd"].min()) if not rows.empty else None,
                type=_log_if_wide(rows["cost_usd"].tolist() if not rows.empty else []),
            ),
            yaxis=metric_axis(f"best {metric}", rows[column].tolist() if not rows.empty else []),
        ),
        None if data else "no trial reported the metric",
    )


def pareto_front(costs: Sequence[float], metrics: Sequence[float], mode: str) -> list[tuple[float, float]]:
    """The trials no cheaper trial beats: sorted by cost, each better than all before it."""
    best = math.inf
    front = []
    for c, m in sorted(zip(costs, metrics, strict=True)):
        loss = Direction.of(mode).loss(m)
        if loss < best:
            best = loss
            front.append((c, m))
    return front


def spend_panel(by_reason: Mapping[str, float], by_band: Mapping[str, float]) -> Panel:
    """Dollars by stop reason and by epoch band, side by side."""
    colours: dict[str, str] = {}
    data = [
        {
            "type": "bar",
            "x": list(by_reason),
            "y": list(by_reason.values()),
            "marker": {"color": [_colour(r, colours) for r in by_reason]},
            "hovertemplate": "%{x}: $%{y:.4g}<extra>by stop reason</extra>",
            "name": "by stop reason",
        },
        {
            "type": "bar",
            "x": [f"epochs {b}" for b in by_band],
            "y": list(by_band.values()),
            "marker": {"color": "#7f7f7f"},
            "xaxis": "x2",
            "yaxis": "y2",
            "hovertemplate": "%{x}: $%{y:.4g}<extra>by epoch band</extra>",
            "name": "by epoch band",
        },
    ]
    layout = {
        "xaxis": {"domain": [0, 0.45], "title": {"text": "stop reason"}, "automargin": True},
        "yaxis": dollar_axis("dollars", max(by_reason.values(), default=0.0)),
        "xaxis2": {"domain": [0.55, 1], "title": {"text": "epoch band (rungs)"}, "automargin": True},
        "yaxis2": {"anchor": "x2", **dollar_axis("", max(by_band.values(), default=0.0))},
        "showlegend": False,
        "margin": {"t": 30, "r": 20, "b": 60, "l": 60},
    }
    # on a phone the two charts stand one above the other
    stacked = {
        "xaxis.domain": [0, 1],
        "yaxis.domain": [0.58, 1],
        "xaxis2.domain": [0, 1],
        "xaxis2.anchor": "y2",
        "yaxis2.domain": [0, 0.38],
        "yaxis2.title.text": "dollars",
        "height": 700,
    }
    return Panel(
        "spend",
        "Where the money went",
        "Left (on a phone, above): dollars of the trials that ended for each reason. Right (below): "
        "dollars spent in each band of epochs (the scheduler's rungs): what the early epochs of many "
        "trials cost against the late epochs of a few.",
        data,
        layout,
        None if any(by_reason.values()) or any(by_band.values()) else "nothing was spent",
        narrow={"layout": stacked},
    )


def _choice_labels(raw: Sequence[Any], spec: Any) -> list[str]:
    """A choice's values in the order a person reads them: numbers ascending, else the
    search space's own order, then any value the space does not list."""
    seen = list(dict.fromkeys(raw))
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in seen):
        return [_fmt(v) for v in sorted(seen)]
    listed = [v for v in (getattr(spec, "values", None) or []) if v in seen]
    return list(dict.fromkeys(_fmt(v) for v in [*listed, *seen]))


def _log_tick_values(low: float, high: float) -> list[float]:
    """Round values from ``low`` to ``high`` (both > 0) for a log axis: each decade, and 2 and 5
    times it where the span is short (``[low, high]`` where no round value lies between)."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1, 2, 5) if last - first <= 2 else (1,)
    values = [m * 10.0**d for d in range(first, last + 1) for m in steps]
    return [float(f"{v:.1g}") for v in values if low / 1.0001 <= v <= high * 1.0001] or [low, high]


def _log_ticks(low: float, high: float) -> tuple[list[float], list[str]]:
    """Ticks of a log10 axis from ``low`` to ``high`` (both > 0), labelled with the values
    themselves (1e-4 as 0.0001): :func:`_log_tick_values` at their logarithms."""
    shown = _log_tick_values(low, high)
    return [math.log10(v) for v in shown], [f"{v:.10g}" if v >= 1e-4 else f"{v:.0e}" for v in shown]


def parallel_panel(ledger: Ledger, search_space: Mapping[str, Any]) -> Panel:
    """Parallel coordinates of the hyperparameters and the epochs each trial ran, coloured by
    the best metric on a robust scale (its 5th to 95th percentile), as Optuna's and W&B's draw
    them: choices in order, log axes labelled with values. ``ids``: the trial of each line,
    for the page's link to the table (brushing an axis filters it)."""
    metric = ledger.spec.metric
    records = [r for r in ledger.trials.values() if not math.isnan(ledger.best_metric(r)) and r.config]
    names = [n for n in search_space if any(n in r.config for r in records)] or sorted(
        {k for r in records for k in r.config}
    )
    dimensions: list[dict[str, Any]] = []
    for name in names:
        raw = [r.config.get(name) for r in records]
        spec = search_space.get(name)
        numbers = [float(v) for v in raw if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(numbers) == len(raw) and getattr(spec, "type", "") != "choice":
            log = getattr(spec, "type", "") in ("loguniform", "logint") and all(v > 0 for v in numbers)
            if log and numbers:
                tickvals, ticktext = _log_ticks(min(numbers), max(numbers))
                dimensions.append(
                    {
                        "label": f"{name} (log)",
                        "values": [math.log10(v) for v in numbers],
                        "tickvals": tickvals,
                        "ticktext": ticktext,
                    }
                )
            else:
                dimensions.append({"label": name, "values": numbers})
        else:
            labels = _choice_labels(raw, spec)
            index = {label: i for i, label in enumerate(labels)}
            dimensions.append(
                {
                    "label": name,
                    "values": [index[_fmt(v)] for v in raw],
                    "tickvals": list(range(len(labels))),
                    "ticktext": labels,
                }
            )
    scores = [ledger.best_metric(r) for r in records]
    data: list[dict[str, Any]] = []
    if dimensions and len(records) >= 2:
        ran = [r.epochs for r in records]
        dimensions.append({"label": "epochs run", "values": ran})
        dimensions.append({"label": f"best {metric}", "values": scores})
    longest = max((len(d["label"]) for d in dimensions), default=0)
    if dimensions and len(records) >= 2:
        ordered = sorted(scores)
        low = ordered[int(0.05 * (len(ordered) - 1))]
        high = ordered[int(0.95 * (len(ordered) - 1))]
        data.append(
            {
                "type": "parcoords",
                "dimensions": dimensions,
                "ids": [r.trial_id for r in records],
                "labelangle": -30,
                "labelside": "top",
                "line": {
                    "color": scores,
                    "colorscale": "Viridis",
                    # the good end is bright either way; a diverged trial does not set the scale
                    "reversescale": ledger.spec.direction is Direction.MIN,
                    "cmin": low,
                    "cmax": high if high > low else low + 1e-12,
                    "showscale": True,
                    "colorbar": {"title": {"text": metric}},
                },
            }
        )
    return Panel(
        "parallel",
        "Hyperparameters, coloured by the result",
        f"One line per trial through its hyperparameters and the epochs it ran (the rungs' cuts: "
        f"trials that ran to max_epochs sit at the top) to its best {html.escape(metric)}; brighter is "
        "better, on its 5th to 95th percentile. Drag along an axis to keep a range: the trial table "
        "below keeps those trials.",
        data,
        {"margin": {"t": max(80, 40 + 4 * longest), "r": 60, "b": 30, "l": 60}},
        None if data else "needs two trials with hyperparameters and a metric",
        # on a phone the colour bar would sit on the last axis (which shows the same scale),
        # and labels side by side would run into one another: they stand upright
        narrow={
            "style": {"line.showscale": False, "labelangle": -90},
            "layout": {
                "margin.r": 30,
                "margin.l": 40,
                "margin.t": 40 + 7 * longest,
                "height": 400 + 7 * longest,
            },
        },
    )


#: up to this many trials, Optuna's fANOVA (its default evaluator: a random forest, whose
#: cost grows with the trials squared: 1.4 s at 200 trials and 14 s at 1,000 on 2 cores, plus
#: 1.6 s to import scikit-learn); past it, Optuna's PED-ANOVA (linear, no forest: 0.01 s at
#: 1,000), which was built for many trials
FANOVA_MAX_TRIALS = 200


@dataclass(frozen=True)
class Importance:
    """What Optuna's evaluator said: importance by hyperparameter, or why there is none."""

    importances: dict[str, float]
    trials: int  # the trials it was computed on
    method: str  # "fANOVA" or "PED-ANOVA"
    note: str | None = None


def importance(ledger: Ledger, search_space: Mapping[str, Any]) -> Importance:
    """Optuna's importance of each hyperparameter for the best metric: fANOVA, or PED-ANOVA
    for sweeps of more than :data:`FANOVA_MAX_TRIALS` trials."""
    from costtune.results import trial_rows

    return importance_of(trial_rows(ledger), search_space, ledger.spec.mode)


def importance_of(rows: list[dict[str, Any]], search_space: Mapping[str, Any], mode: str) -> Importance:
    """:func:`importance` from :func:`costtune.results.trial_rows`."""
    import warnings

    from costtune.results import study_of

    study = study_of(rows, search_space, mode)
    complete = len(study.trials)
    method = "fANOVA" if complete <= FANOVA_MAX_TRIALS else "PED-ANOVA"
    if len(search_space) < 2 and complete >= 2:
        return Importance({next(iter(search_space)): 1.0}, complete, method)
    if complete < 4:
        return Importance({}, complete, method, f"needs at least 4 trials with a metric (has {complete})")
    import optuna
    from optuna.importance import FanovaImportanceEvaluator, PedAnovaImportanceEvaluator

    evaluator = FanovaImportanceEvaluator(seed=0) if method == "fANOVA" else PedAnovaImportanceEvaluator()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PED-ANOVA is marked experimental
            found = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (ValueError, RuntimeError) as exc:  # e.g. every trial has the same value
        return Importance({}, complete, method, f"Optuna could not evaluate it: {exc}")
    return Importance({k: float(v) for k, v in found.items()}, complete, method)


class ImportanceHelper:
    """A forked child that computes :func:`importance` beside the parent's own work.

    Importing Optuna's importance module loads scikit-learn (1.2 s on 2 cores, also for
    PED-ANOVA, which does not use it): at 1,000 trials a quarter of a report's time. The
    child starts that import at once, on the second core, while the parent reads the run;
    :meth:`ask` then sends it the trials (configs and values: small), and :meth:`result`
    waits for the answer. Only for single-threaded callers (the CLI): forking a process
    that runs threads (Ray, a notebook kernel) is unsafe. Where anything fails (no fork,
    the child died), :meth:`result` returns ``None`` and the caller computes it in-process.
    """

    def __init__(self) -> None:
        self._pid = 0
        if not hasattr(os, "fork"):
            return
        ask_read, self._ask = os.pipe()
        self._answer, answer_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns, never runs the parent's exit handlers
            os.close(self._ask)
            os.close(self._answer)
            _serve(ask_read, answer_write)
        os.close(ask_read)
        os.close(answer_write)
        self._pid = pid

    def ask(self, ledger: Ledger, search_space: Mapping[str, Any]) -> None:
        if not self._pid:
            return
        from costtune.results import trial_rows

        request = pickle.dumps((trial_rows(ledger), dict(search_space), ledger.spec.mode))
        try:
            with os.fdopen(self._ask, "wb") as pipe:
                pipe.write(request)
        except OSError:  # the child is gone
            self._pid = 0

    def result(self) -> Importance | None:
        if not self._pid:
            return None
        with os.fdopen(self._answer, "rb") as pipe:
            payload = pipe.read()
        os.waitpid(self._pid, 0)
        try:
            found = pickle.loads(payload) if payload else None
        except (pickle.UnpicklingError, EOFError, AttributeError):
            return None
        return found if isinstance(found, Importance) else None


def _serve(ask_read: int, answer_write: int) -> None:
    payload = b""
    try:
        import optuna.importance  # noqa: F401 (the slow part, while the parent reads the run)

        with os.fdopen(ask_read, "rb") as pipe:
            request = pipe.read()
        if request:
            payload = pickle.dumps(importance_of(*pickle.loads(request)))
    except BaseException:
        payload = b""
    try:
        with os.fdopen(answer_write, "wb") as pipe:
            pipe.write(payload)
    finally:
        os._exit(0)


def importance_panel(
    ledger: Ledger, search_space: Mapping[str, Any], found: Importance | None = None
) -> Panel:
    """Optuna's importance of each hyperparameter for the best metric, as a bar chart."""
    found = found or importance(ledger, search_space)
    fanova = found.method == "fANOVA"
    meaning = (
        "the share of the metric's variance each hyperparameter explains"
        if fanova
        else "how much each hyperparameter's values differ between the best 10% of trials and all"
    )
    data: list[dict[str, Any]] = []
    if found.importances:
        names = list(found.importances)[::-1]  # the most important on top
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "x": [found.importances[n] for n in names],
                "y": names,
                "marker": {"color": "#1f77b4"},
                "hovertemplate": f"%{{y}}: %{{x:.3f}}<extra>{found.method} importance</extra>",
            }
        )
    return Panel(
        "importance",
        "Hyperparameter importance",
        f"Optuna's {found.method} evaluator on the {found.trials} trials that reported, each scored by the "
        f"best {html.escape(ledger.spec.metric)} it reached (an early-stopped trial at the epochs it ran): "
        f"{meaning}.",
        data,
        _layout(f"{found.method} importance (sums to 1)", "", margin={"t": 30, "r": 20, "b": 50, "l": 120}),
        found.note or (None if data else "no hyperparameters"),
    )


#: what a dollar of the sweep bought, as :func:`bought` splits them
BOUGHT_GAIN = "up to the trial's last new sweep best"
BOUGHT_NOTHING = "after it, or in a trial that never set one"
BOUGHT_UNMETERED = "held but not timed (start-up, hand-offs, lost work)"


def bought(ledger: Ledger) -> dict[str, dict[str, tuple[float, int]]]:
    """The sweep's dollars by the stop reason of the trial that spent them, split three ways:
    spent up to (and on) the epoch of that trial's last new sweep best, spent after it or by a
    trial that never set one, and held but not timed (charges). Each: (dollars, trials)."""
    last_gain: dict[str, int] = {}
    for p in best_so_far(ledger):
        last_gain[p.trial_id] = max(last_gain.get(p.trial_id, 0), p.epoch)
    out: dict[str, dict[str, tuple[float, int]]] = {}
    seen: dict[tuple[str, str], set[str]] = {}
    for row in ledger.timeline:
        record = ledger.trials.get(row.trial_id)
        reason = reason_of(record.stop_reason, record.status) if record is not None else "running"
        if row.kind == CHARGE:
            kind = BOUGHT_UNMETERED
        elif row.trial_id in last_gain and row.epoch <= last_gain[row.trial_id]:
            kind = BOUGHT_GAIN
        else:
            kind = BOUGHT_NOTHING
        usd_so_far, _ = out.setdefault(reason, {}).get(kind, (0.0, 0))
        trials = seen.setdefault((reason, kind), set())
        trials.add(row.trial_id)
        out[reason][kind] = (usd_so_far + row.usd, len(trials))
    return out


def bought_panel(ledger: Ledger, business_value_usd: float) -> Panel:
    """What the sweep's dollars bought, by the stop reason of the trial that spent them: the
    dollars that moved the sweep's best (up to each trial's last new best) against those that
    bought nothing, so that every dollar is in a bar (ROI per trial was 0 for most trials)."""
    split = bought(ledger)
    reasons = sorted(split, key=lambda r: -sum(v[0] for v in split[r].values()))
    colours = {BOUGHT_GAIN: "#2ca02c", BOUGHT_NOTHING: "#d62728", BOUGHT_UNMETERED: "#7f7f7f"}
    data: list[dict[str, Any]] = []
    for kind in (BOUGHT_GAIN, BOUGHT_NOTHING, BOUGHT_UNMETERED):
        dollars = [split[r].get(kind, (0.0, 0))[0] for r in reasons]
        if not any(dollars):
            continue
        data.append(
            {
                "type": "bar",
                "x": reasons,
                "y": dollars,
                "name": kind,
                "marker": {"color": colours[kind]},
                "hovertext": [
                    f"{html.escape(r)}: {usd_text(d)} {html.escape(kind)} "
                    f"({split[r].get(kind, (0.0, 0))[1]} trials)"
                    for r, d in zip(reasons, dollars, strict=True)
                ],
                "hoverinfo": "text",
            }
        )
    total = sum(v[0] for r in split.values() for v in r.values())
    return Panel(
        "bought",
        "What the dollars bought",
        "Every dollar of the sweep, by why the trial that spent it stopped: green, spent up to the "
        "epoch of that trial's last new best of the whole sweep (the dollars that moved the best); "
        "red, spent after it, or by a trial that never set one (they bought nothing the sweep kept); "
        "grey, time held but not timed. Each trial's ROI in the table is its share of the sweep's "
        f"gain × cost.business_value_usd ({business_value_usd:g} USD per unit of the metric; set it "
        "in the config) ÷ its dollars.",
        data,
        _layout("why the trial stopped", "dollars", barmode="stack", yaxis=dollar_axis("dollars", total)),
        None if data else "no trial spent anything",
    )


# -------------------------------------------------------------------------- tables
def table_html(frame: pd.DataFrame, table_id: str, caption: str) -> str:
    """A sortable (click a header), filterable (type in the box) table that scrolls inside
    the page instead of widening it."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    ids = frame["trial_id"].astype(str).tolist() if "trial_id" in frame.columns else [""] * len(frame)
    for trial_id, row in zip(ids, frame.itertuples(index=False), strict=True):
        cells = []
        for value in row:
            number = _num(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
            text = "–" if value is None or (isinstance(value, float) and math.isnan(value)) else _fmt(value)
            key = f' data-v="{number!r}"' if number is not None else ""
            cells.append(f"<td{key}>{html.escape(text)}</td>")
        body.append(f"<tr data-trial='{html.escape(trial_id)}'>" + "".join(cells) + "</tr>")
    return (
        f"<section class='table'><h2>{html.escape(caption)}</h2>"
        f"<input class='filter' data-table='{table_id}' placeholder='filter rows (any text)' "
        f"aria-label='filter {html.escape(caption)}'>"
        f"<div class='scroll'><table id='{table_id}' class='sortable'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div></section>"
    )


# ---------------------------------------------------------------------------- page
_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin:1.2em 0 .2em}
.caption{color:#555;font-size:.9em;margin:.2em 0 .4em}
.panel{border-top:1px solid #ddd;padding-top:.4em}.plot{width:100%;height:440px}
.note{color:#a33;font-style:italic}
.banner{background:#fdd;border:1px solid #c66;padding:.5em;margin:.5em 0}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:12px}
td,th{padding:2px 6px;border-bottom:1px solid #ddd;white-space:nowrap;text-align:right}
th{cursor:pointer;background:#f4f4f4;position:sticky;top:0}th:after{content:' \\2195';color:#aaa}
.filter{margin:.3em 0;padding:3px;width:20em}
ul.summary li{margin:.15em 0;overflow-wrap:anywhere}
table#matched td:first-child{white-space:normal;text-align:left;min-width:12em;max-width:22em}
table#side td:first-child{text-align:left}
.pager{margin:.3em 0;font-size:.9em}.pager button{margin:0 .3em}
table#trials tbody tr{cursor:pointer}tr.picked td{background:#fff3c4}
.cards{display:flex;flex-wrap:wrap;gap:1em;margin:.5em 0 1em}
.card{flex:1 1 340px;min-width:0;border:1px solid #ccd;border-radius:6px;padding:.6em 1em;background:#fafbff}
.card h2{margin:.1em 0 .4em}
.card dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em .8em;margin:0}
.card dt{color:#555}.card dd{margin:0;font-weight:600;overflow-wrap:anywhere}
.card .why{color:#555;font-size:.85em;font-weight:400}
.card pre{background:#f1f1f1;padding:.5em;overflow-x:auto;font-size:12px;white-space:pre-wrap;
  overflow-wrap:anywhere}
.card code{overflow-wrap:anywhere}
"""

_JS = """
(function(){
  var status = {panels:{}, errors:[], hover:{}};
  window.addEventListener('error', function(e){ status.errors.push(String(e.message)); save(); });
  function save(){
    var text = JSON.stringify(status);
    document.body.setAttribute('data-render', text);
    if (window.parent !== window) {  // a page framed at a set width (the narrow-screen check)
      try { window.parent.postMessage({costtuneRender: text}, '*'); } catch (e) {}
    }
  }
  // fewer tick labels on an axis whose labels run into one another (a narrow screen): every
  // other one of a set list, else half as many of Plotly's own; and where an x axis's label runs
  // into a y axis's (the corner where they meet), the x axis's labels moved down clear of it;
  // up to four times
  function fitTicks(gd){
    var ticks = function(name){
      var m = /^([xy])axis(\\d*)$/.exec(name);
      return m ? gd.querySelectorAll('g.' + m[1] + m[2] + 'tick text') : [];
    };
    for (var round = 0; round < 4; round++) {
      var update = {}, names = Object.keys(gd.layout || {});
      names.forEach(function(x){
        if (!/^xaxis\\d*$/.test(x)) return;
        var down = 0;
        names.forEach(function(y){
          if (/^yaxis\\d*$/.test(y)) down = Math.max(down, clash(ticks(x), ticks(y)));
        });
        if (down > 0)
          update[x + '.ticklabelstandoff'] = (gd.layout[x].ticklabelstandoff || 0) + Math.ceil(down) + 2;
      });
      names.forEach(function(name){
        var m = /^([xy])axis(\\d*)$/.exec(name);
        if (!m) return;
        var labels = ticks(name);
        if (overlapping(gd, labels).length === 0) return;
        var axis = gd.layout[name];
        var even = function(v, i){ return i % 2 === 0; };
        if (axis.tickvals && axis.tickvals.length > 2) {
          update[name + '.tickvals'] = axis.tickvals.filter(even);
          if (axis.ticktext) update[name + '.ticktext'] = axis.ticktext.filter(even);
        } else if (!axis.tickvals) {
          update[name + '.nticks'] = Math.max(2, Math.floor(labels.length / 2));
        }
      });
      if (!Object.keys(update).length) return;
      Plotly.relayout(gd, update);
    }
  }
  // how far (px, down the page) two boxes overlap; 0 unless they share more than a pixel each way
  function overlap(a, b){
    var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    return w > 1 && h > 1 ? h : 0;
  }
  // how far (px, down the page) any label of a overlaps any label of b; 0 where none do
  function clash(a, b){
    var most = 0;
    Array.prototype.forEach.call(a, function(p){
      var r = p.getBoundingClientRect();
      if (r.width < 1 || !(p.textContent || '').trim()) return;
      Array.prototype.forEach.call(b, function(q){
        var s = q.getBoundingClientRect();
        if (s.width < 1 || !(q.textContent || '').trim()) return;
        most = Math.max(most, overlap(r, s));
      });
    });
    return most;
  }
  // the labels of a chart that overlap one another: text boxes as drawn, pairwise (#selfcheck)
  function overlapping(gd, elements){
    var boxes = [], seen = {}, hits = [];
    (elements || gd.querySelectorAll('svg text')).forEach(function(el){
      var text = (el.textContent || '').trim();
      if (!text || el.closest('.hoverlayer')) return;
      var style = getComputedStyle(el);
      if (style.display === 'none' || style.visibility === 'hidden' || style.opacity === '0') return;
      var r = el.getBoundingClientRect();
      if (r.width < 1 || r.height < 1) return;
      var key = text + '@' + Math.round(r.left) + ',' + Math.round(r.top);
      if (seen[key]) return;  // one label drawn twice in place (an outline under its text)
      seen[key] = true; boxes.push({text: text, r: r});
    });
    for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
      if (overlap(boxes[i].r, boxes[j].r) > 0) hits.push(boxes[i].text + ' | ' + boxes[j].text);
    }
    return hits;
  }
  function points(trace){
    if (trace.type === 'parcoords')
      return trace.dimensions && trace.dimensions.length ? trace.dimensions[0].values.length : 0;
    var xs = trace.x || trace.values || [];
    return xs.filter(function(v){ return v !== null && v !== undefined; }).length;
  }
  function banner(id, message){
    var div = document.getElementById(id); var b = document.createElement('div');
    b.className = 'banner'; b.textContent = 'This panel could not be drawn: ' + message;
    div.parentNode.insertBefore(b, div);
  }
  status.fields = {}; status.axes = {};
  status.width = {scroll: document.documentElement.scrollWidth, inner: window.innerWidth};
  document.querySelectorAll('[data-field]').forEach(function(el){
    status.fields[el.getAttribute('data-field')] = el.textContent;
  });
  document.querySelectorAll('button.copy').forEach(function(b){
    b.addEventListener('click', function(){
      var text = document.getElementById(b.getAttribute('data-copy')).textContent;
      if (navigator.clipboard) navigator.clipboard.writeText(text);
    });
  });
  PANELS.forEach(function(p){
    try {
      Plotly.newPlot(p.id, p.data, p.layout, {responsive:true, displaylogo:false});
      var gd0 = document.getElementById(p.id);
      if (gd0.clientWidth < NARROW && p.narrow) {  // a phone: the panel's own narrow layout
        if (p.narrow.style) Plotly.restyle(gd0, p.narrow.style);
        if (p.narrow.layout && p.narrow.layout.height) gd0.style.height = p.narrow.layout.height + 'px';
        if (p.narrow.layout) Plotly.relayout(gd0, p.narrow.layout);
      }
      fitTicks(gd0);
      status.panels[p.id] = p.data.reduce(function(n, t){ return n + points(t); }, 0);
      var gd = document.getElementById(p.id);
      if (gd.layout && gd.layout.xaxis && gd.layout.xaxis.range) status.axes[p.id] = gd.layout.xaxis.range;
    } catch (e) { status.errors.push(p.id + ': ' + e.message); banner(p.id, e.message); }
  });
  if (location.hash === '#selfcheck') {
    status.overlaps = {};
    PANELS.forEach(function(p){
      var gd = document.getElementById(p.id);
      if (gd) status.overlaps[p.id] = overlapping(gd);
    });
  }
  // the rendered hover label of the best trial's point, in panels that have one (#selfcheck)
  if (location.hash === '#selfcheck' && BEST) {
    PANELS.forEach(function(p){
      var gd = document.getElementById(p.id);
      if (!gd || !gd.data) return;
      for (var c = 0; c < gd.data.length; c++) {
        var t = gd.data[c], texts = t.hovertext || [];
        var label = (t.hovertemplate || '') + ' ' + (t.name || '');
        for (var i = 0; i < Math.max(texts.length, (t.x || []).length); i++) {
          var text = (texts[i] || '') + ' ' + label;
          if (text.indexOf(BEST) >= 0 && t.type !== 'parcoords') {
            try {
              Plotly.Fx.hover(gd, [{curveNumber: c, pointNumber: i}]);
              var layer = gd.querySelector('.hoverlayer');
              status.hover[p.id] = layer ? layer.textContent : '';
              Plotly.Fx.unhover(gd);
            } catch (e) { status.errors.push(p.id + ' hover: ' + e.message); }
            return;
          }
        }
      }
    });
  }
  // tables: sorted, filtered and brushed in memory, drawn a page (50 rows) at a time
  var TABLES = {};
  document.querySelectorAll('table.sortable').forEach(function(table){
    var body = table.tBodies[0];
    var st = {query: '', keep: null, page: 0, size: 50, shown: 0};
    st.rows = Array.prototype.map.call(body.rows, function(r){
      return {el: r, id: r.getAttribute('data-trial'), text: r.textContent.toLowerCase(),
              keys: Array.prototype.map.call(r.cells, function(c){
                var v = c.getAttribute('data-v'); return v !== null ? parseFloat(v) : c.textContent; })};
    });
    var pager = document.createElement('div'); pager.className = 'pager';
    table.parentNode.parentNode.insertBefore(pager, table.parentNode.nextSibling);
    function button(label, page, off){
      var b = document.createElement('button'); b.textContent = label; b.disabled = off;
      b.addEventListener('click', function(){ st.page = page; st.render(); }); pager.appendChild(b);
    }
    st.render = function(){
      var shown = st.rows.filter(function(r){
        return (!st.query || r.text.indexOf(st.query) >= 0) && (!st.keep || st.keep[r.id]); });
      var pages = Math.max(1, Math.ceil(shown.length / st.size));
      st.page = Math.max(0, Math.min(st.page, pages - 1));
      var frag = document.createDocumentFragment();
      shown.slice(st.page * st.size, (st.page + 1) * st.size).forEach(function(r){ frag.appendChild(r.el); });
      body.textContent = ''; body.appendChild(frag);
      st.shown = shown.length; pager.textContent = '';
      if (pages > 1) button('\u2190 previous', st.page - 1, st.page === 0);
      var note = document.createElement('span');
      note.textContent = (pages > 1 ? ' rows ' + (st.page * st.size + 1) + '\u2013' +
        Math.min(shown.length, (st.page + 1) * st.size) + ' of ' + shown.length : shown.length + ' rows') +
        (shown.length < st.rows.length ? ' (of ' + st.rows.length + ')' : '') + ' ';
      pager.appendChild(note);
      if (pages > 1) button('next \u2192', st.page + 1, st.page === pages - 1);
    };
    table.querySelectorAll('th').forEach(function(th, index){
      th.addEventListener('click', function(){
        var up = th.getAttribute('data-dir') !== 'up';
        th.parentNode.querySelectorAll('th').forEach(function(h){ h.removeAttribute('data-dir'); });
        th.setAttribute('data-dir', up ? 'up' : 'down');
        st.rows.sort(function(a, b){
          var x = a.keys[index], y = b.keys[index], nx = typeof x === 'number', ny = typeof y === 'number';
          if (nx !== ny) return nx ? -1 : 1;  // numbers before blanks, either way
          var r = nx ? x - y : String(x).localeCompare(String(y));
          return up ? r : -r;
        });
        st.page = 0; st.render();
      });
    });
    TABLES[table.id] = st;
    st.render();
  });
  // a click on a trial's row picks its learning curve out of the others (again: all back)
  var chosen = null;
  function pick(id){
    var gd = document.getElementById('curves');
    if (!gd || !gd.data) return 0;
    chosen = chosen === id ? null : id;
    var idx = [], opacity = [], width = [], hits = 0;
    gd.data.forEach(function(t, i){
      if (t.meta === undefined) return;
      var mine = t.meta === chosen, black = t.line.color === '#000000'; hits += mine ? 1 : 0;
      idx.push(i); opacity.push(chosen === null ? (black ? 1 : 0.55) : (mine ? 1 : 0.12));
      width.push(chosen === null ? (black ? 3 : 1) : (mine ? 4 : 1));
    });
    Plotly.restyle(gd, {opacity: opacity, 'line.width': width}, idx);
    document.querySelectorAll('table#trials tbody tr').forEach(function(r){
      r.classList.toggle('picked', r.getAttribute('data-trial') === chosen); });
    return hits;
  }
  var trials = document.getElementById('trials');
  if (trials) trials.tBodies[0].addEventListener('click', function(e){
    var row = e.target.closest('tr'); if (row) pick(row.getAttribute('data-trial'));
  });
  if (location.hash === '#selfcheck' && TABLES.trials) {
    var first = document.querySelector('table#trials tbody tr');
    if (first) {
      first.click(); status.picked = chosen;
      status.picked_curves = document.getElementById('curves').data.filter(function(t){
        return t.meta === chosen && t.line.width === 4; }).length;
      first.click(); status.picked_after = chosen;
    }
  }
  if (location.hash === '#selfcheck' && TABLES.trials) {  // the time a click on a header takes
    var th = document.querySelector('table#trials th:nth-child(3)'), t0 = performance.now();
    th.click(); th.click();
    status.sort_ms = (performance.now() - t0) / 2;
    status.page_rows = document.querySelectorAll('table#trials tbody tr').length;
  }
  // brushing an axis of the parallel coordinates keeps those trials in the table
  var par = document.getElementById('parallel');
  function brushed(){
    var t = par.data[0], keep = {};
    for (var i = 0; i < t.ids.length; i++) {
      var ok = true;
      t.dimensions.forEach(function(d){
        var r = d.constraintrange;
        if (!r || !ok) return;
        var ranges = Array.isArray(r[0]) ? r : [r], v = d.values[i], inside = false;
        ranges.forEach(function(x){ if (v >= x[0] && v <= x[1]) inside = true; });
        ok = inside;
      });
      if (ok) keep[t.ids[i]] = true;
    }
    if (TABLES.trials) { TABLES.trials.keep = keep; TABLES.trials.page = 0; TABLES.trials.render(); }
    status.brushed = Object.keys(keep).length; save();
  }
  if (par && par.data && par.data[0] && par.data[0].ids) {
    status.brushes = 0;
    par.on('plotly_restyle', function(){ status.brushes += 1; brushed(); });
    if (location.hash === '#selfcheck') {  // a brush over the lower half of the first axis
      var d0 = par.data[0].dimensions[0], lo = Math.min.apply(null, d0.values),
          hi = Math.max.apply(null, d0.values);
      var visible = function(){ return TABLES.trials ? TABLES.trials.shown : -1; };
      Plotly.restyle(par, {'dimensions[0].constraintrange': [[lo, (lo + hi) / 2]]}).then(function(){
        status.rows = visible();
        status.range = par.data[0].dimensions[0].constraintrange;
        return Plotly.restyle(par, {'dimensions[0].constraintrange': null});
      }).then(function(){ status.rows_after = visible(); save(); });
    }
  }
  document.querySelectorAll('input.filter').forEach(function(input){
    input.addEventListener('input', function(){
      var st = TABLES[input.getAttribute('data-table')];
      st.query = input.value.toLowerCase(); st.page = 0; st.render();
    });
  });
  status.width = {scroll: document.documentElement.scrollWidth, inner: window.innerWidth};
  save();
})();
"""


def _json(value: Any) -> str:
    """``value`` as a JavaScript literal for the page's script. NaN and infinities stay
    ``NaN``/``Infinity`` (valid JavaScript, and gaps to Plotly, as nulls would be), which saves
    walking 100,000 points to replace them; a closing script tag inside a string is escaped."""
    return json.dumps(value, allow_nan=True, default=_json_default).replace("</", "<\\/")


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def page(
    title: str,
    intro: str,
    panels: Sequence[Panel],
    tables: Sequence[str],
    best: str | None,
    cards: str = "",
) -> str:
    """A self-contained HTML page: Plotly.js inlined, every panel's data in the page; ``cards``
    (HTML) first, under the title."""
    from plotly.offline import get_plotlyjs

    sections = []
    for p in panels:
        body = (
            f"<p class='note'>{html.escape(p.note)}</p>"
            if p.note
            else f"<div id='{p.id}' class='plot'></div>"
        )
        sections.append(
            f"<section class='panel'><h2>{html.escape(p.title)}</h2>"
            f"<p class='caption'>{p.caption}</p>{body}</section>"
        )
    drawn = [
        {"id": p.id, "data": p.data, "layout": p.layout, "narrow": p.narrow} for p in panels if not p.note
    ]
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style>"
        f"<script>{get_plotlyjs()}</script></head><body>"
        f"<h1>{html.escape(title)}</h1>{cards}{intro}{''.join(sections)}{''.join(tables)}"
        f"<script>var PANELS = {_json(drawn)}; var BEST = {_json(best)}; var NARROW = {NARROW_PX};"
        f"{_JS}</script></body></html>"
    )


# -------------------------------------------------------------------- compare panels
def compare_money_panel(runs: Sequence[Any]) -> Panel:
    """Every run's best-so-far metric against its cumulative dollars, overlaid."""
    data: list[dict[str, Any]] = []
    metric = runs[0].config.metric if runs else "metric"
    values: list[float] = []
    for i, run in enumerate(runs):
        points = best_so_far(run.ledger)
        if not points:
            continue
        colour = _RUN_COLOURS[i % len(_RUN_COLOURS)]
        spent = sum(row.usd for row in run.ledger.timeline)
        values.extend(p.metric for p in points)
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": [p.usd for p in points] + [spent],
                "y": [p.metric for p in points] + [points[-1].metric],
                "line": {"shape": "hv", "color": colour, "width": 2},
                "marker": {"size": [7] * len(points) + [0]},
                "name": run.name,
                "hovertext": [
                    f"{html.escape(run.name)}: trial {p.trial_id}, epoch {p.epoch}<br>"
                    f"{metric} {p.metric:.4g} "
                    f"after ${p.usd:.4g}<br>{config_text(run.ledger.trials[p.trial_id].config)}"
                    for p in points
                ]
                + [f"{html.escape(run.name)} ends: ${spent:.4g}"],
                "hoverinfo": "text",
            }
        )
    return Panel(
        "overlay",
        "Best so far against dollars, every run",
        f"Each run's best {html.escape(metric)} against what it had spent (every epoch of every trial, "
        "in the order they ran); a marker where a new best arrived; the line ends at the run's total.",
        data,
        _layout("dollars spent", metric, yaxis=metric_axis(metric, values)),
        None if data else "no run reported the metric",
    )


def compare_dollars_panel(frame: pd.DataFrame) -> Panel:
    """Dollars to reach each run's own best, to the common target, and in total."""
    runs = frame["run"].tolist()
    data = []
    for column, label, colour in (
        ("cost_to_best_usd", "to its own best", "#1f77b4"),
        ("cost_to_target_usd", "to the common target", "#2ca02c"),
        ("total_cost_usd", "in total", "#7f7f7f"),
    ):
        ys = [_num(v) for v in frame[column]]
        data.append(
            {
                "type": "bar",
                "x": runs,
                "y": ys,
                "name": label,
                "marker": {"color": colour},
                "hovertemplate": f"%{{x}}: $%{{y:.4g}}<extra>{label}</extra>",
            }
        )
    target = frame["target"].iloc[0] if "target" in frame and len(frame) else None
    return Panel(
        "dollars",
        "Dollars to the best, to the target, in total",
        "For each run: what it had spent when its own best first arrived, when it first reached the "
        f"common target ({_fmt(target)}), and in all.",
        data,
        _layout(
            "run",
            "dollars",
            barmode="group",
            xaxis=_axis("run", type="category"),
            yaxis=dollar_axis(
                "dollars", max((v for v in map(_num, frame["total_cost_usd"]) if v), default=0.0)
            ),
        ),
    )


def compare_matched_panel(matched: pd.DataFrame, runs: Sequence[str], metric: str) -> Panel:
    """The same configuration in each run: its dollars and best metric there, one marker per
    run, joined by a line (a configuration one run pruned and another ran far moves right)."""
    data: list[dict[str, Any]] = []
    if not matched.empty:
        for i, run in enumerate(runs):
            costs = [_num(v) for v in matched.get(f"{run}: cost_usd", [])]
            bests = [_num(v) for v in matched.get(f"{run}: best_{metric}", [])]
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "x": costs,
                    "y": bests,
                    "name": run,
                    "marker": {"size": 9, "color": _RUN_COLOURS[i % len(_RUN_COLOURS)]},
                    "hovertext": [
                        f"{html.escape(run)}: {html.escape(str(c))}<br>{html.escape(str(r))}"
                        for c, r in zip(
                            matched["config"], matched.get(f"{run}: stop_reason", []), strict=False
                        )
                    ],
                    "hoverinfo": "text+x+y",
                }
            )
        xs: list[float | None] = []
        ys: list[float | None] = []
        for _, row in matched.iterrows():
            for run in runs:
                xs.append(_num(row.get(f"{run}: cost_usd")))
                ys.append(_num(row.get(f"{run}: best_{metric}")))
            xs.append(None)
            ys.append(None)
        data.insert(
            0,
            {
                "type": "scatter",
                "mode": "lines",
                "x": xs,
                "y": ys,
                "line": {"color": "#bbbbbb", "width": 1},
                "hoverinfo": "skip",
                "showlegend": False,
            },
        )
    spent = [
        v for run in runs for v in (_num(x) for x in matched.get(f"{run}: cost_usd", [])) if v is not None
    ]
    return Panel(
        "matched",
        "The same configurations in each run",
        f"Each configuration two or more runs sampled: what it cost and the best {html.escape(metric)} it "
        "reached in each run, joined by a grey line.",
        data,
        _layout(
            "its dollars",
            f"its best {metric}",
            xaxis=dollar_axis("its dollars", max(spent, default=0.0)),
        ),
        None if data else "no configuration ran in two of these runs",
    )


def report_cards(report: Report) -> str:
    """The report's first screen (HTML): what the sweep cost and saved, against what, its time
    and best metric; and which trial's weights to use, with the Python that loads them."""
    s = report.summary
    saved, full = s.get("saved_fraction"), s.get("cost_if_all_ran_full_usd")
    saved_text = "–" if saved is None else f"{saved:.0%}"
    against = (
        f"against {usd(full)}: what the same {s['trials']} trials would have cost had each run to "
        f"max_epochs ({report.run.config.max_epochs}), each further epoch at what one more of its "
        "epochs cost (a start-up paid once). An extrapolation, not a measured run."
    )
    hours = f"{s['total_device_hours']:.3g} device-hours" + (
        f", {s['total_gpu_hours']:.3g} GPU-hours" if s.get("total_gpu_hours") else ""
    )
    metric = s["metric"]
    headline = (
        "<div class='card' data-card='headline'><h2>This sweep</h2><dl>"
        f"<dt>spent</dt><dd><span data-field='spent'>{html.escape(usd(s['total_cost_usd']))}</span>"
        f" <span class='why'>{html.escape(hours)}</span></dd>"
        f"<dt>saved</dt><dd><span data-field='saved'>{saved_text}</span> "
        f"<span class='why' data-field='saved_against'>{html.escape(against)}</span></dd>"
        f"<dt>time</dt><dd data-field='time'>{html.escape(duration(wall_seconds(report.run)))}</dd>"
        f"<dt>best {html.escape(metric)}</dt><dd data-field='best_metric'>"
        f"{html.escape(_metric_text(s.get('best_metric')))}</dd>"
        "</dl></div>"
    )
    best_id = s.get("best_trial_id")
    if best_id is None:
        return f"<section class='cards'>{headline}</section>"
    config = "".join(
        f"<dt>{html.escape(str(k))}</dt><dd>{html.escape(_metric_text(v))}</dd>"
        for k, v in (s.get("best_config") or {}).items()
    )
    relative = s.get("best_checkpoint")
    if relative:
        where = report.run.directory / relative
        weights = (
            f"<p>weights: <code data-field='checkpoint'>{html.escape(str(where))}</code></p>"
            f"<pre id='load-snippet' data-field='snippet'>{html.escape(load_snippet(report, where))}</pre>"
            "<button class='copy' data-copy='load-snippet'>copy</button>"
        )
    else:
        weights = (
            "<p data-field='checkpoint'>no checkpoint of that epoch is in the run (none written, "
            "or deleted)</p>"
        )
    best = (
        "<div class='card' data-card='best'><h2>Which weights to use</h2><dl>"
        f"<dt>trial</dt><dd data-field='best_trial'>{html.escape(str(best_id))}</dd>"
        f"<dt>best epoch</dt><dd data-field='best_epoch'>{s.get('best_epoch')}</dd>"
        f"<dt>{html.escape(metric)}</dt><dd>{html.escape(_metric_text(s.get('best_metric')))}</dd>"
        f"<dt>its dollars</dt><dd data-field='best_cost'>{html.escape(usd(s.get('best_cost_usd')))}</dd>"
        f"{config}</dl>{weights}</div>"
    )
    return f"<section class='cards'>{headline}{best}</section>"


# -------------------------------------------------------------------------- compare


# ---------------------------------------------------------------------------- pages
def report_panels(report: Report, importance: Any = None) -> list[Any]:
    """The interactive report's figures, as data (:mod:`costtune.report.html`).

    ``importance``: a :class:`~costtune.report.html.ImportanceHelper` computing it beside the
    caller's other work (the CLI's), asked last; else it is computed here."""
    ledger = report.run.ledger
    best_id = report.summary.get("best_trial_id")
    space = report.run.config.search_space
    panels = [
        money_panel(ledger),
        curves_panel(ledger, best_id, report.elbow),
        pareto_panel(ledger, report.trials, best_id),
        spend_panel(report.spend_by_stop_reason, report.spend_by_band),
        parallel_panel(ledger, space),
        bought_panel(ledger, report.run.config.cost.business_value_usd),
    ]
    found = importance.result() if importance is not None else None
    panels.insert(5, importance_panel(ledger, space, found))
    return panels


def report_html(report: Report, by: str = "metric", importance: Any = None) -> str:
    """One self-contained interactive page: the headline and best-trial cards, the summary,
    the panels, the trial table."""
    s = report.summary
    items = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(s) + report_lines(report))
    table = table_html(sort_trials(report.trials, s["metric"], s["mode"], by), "trials", "Trials")
    return page(
        f"costtune report: {report.run.name}",
        f"<ul class='summary'>{items}</ul>",
        report_panels(report, importance),
        [table],
        s.get("best_trial_id"),
        cards=report_cards(report),
    )


def compare_html(runs: list[Run], frame: pd.DataFrame, matched: pd.DataFrame) -> str:
    """One self-contained interactive page: what the trial-by-trial comparison shows, the runs'
    best-so-far against dollars overlaid, dollars to each run's best, the same configurations
    in each run, the side-by-side table with labels people read, and the matched trials."""
    measures = [c for c in frame.columns if c != "run"]
    side = pd.DataFrame(
        {
            "measure": [COMPARE_LABELS.get(m, m.replace("_", " ")) for m in measures],
            **{
                str(name): [_readable(m, frame.loc[i, m]) for m in measures]
                for i, name in zip(frame.index, frame["run"], strict=True)
            },
        }
    )
    tables = [table_html(side, "side", "Sweeps side by side")]
    if matched.empty:
        tables.append(
            "<section class='table'><h2>Trials matched by configuration</h2>"
            "<p class='note'>no configuration ran in two of these runs (different seeds or "
            "searchers sample different ones)</p></section>"
        )
    else:
        tables.append(table_html(matched, "matched", "Trials matched by configuration"))
    names = ", ".join(html.escape(r.name) for r in runs)
    notes = compare_notes(runs, frame, matched)
    flagged = "".join(f"<li data-note>{html.escape(n)}</li>" for n in notes)
    intro = f"<p class='caption'>Runs {names}; ratios against the first.</p>" + (
        f"<ul class='summary'>{flagged}</ul>" if flagged else ""
    )
    metric = runs[0].config.metric if runs else "metric"
    return page(
        f"costtune compare: {', '.join(r.name for r in runs)}",
        intro,
        [
            compare_money_panel(runs),
            compare_dollars_panel(frame),
            compare_matched_panel(matched, [r.name for r in runs], metric),
        ],
        tables,
        None,
    )
