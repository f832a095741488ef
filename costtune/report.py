"""After a run: the cost table, where the money went, the elbow, plots, HTML, compare.

Everything here works from a run directory alone (``ledger.jsonl`` + ``config.yaml``):
no Ray process, and an interrupted run reads back like a finished one.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from costtune.analysis import (
    Elbow,
    EpochPoint,
    cost_to_target,
    curve,
    elbow,
    spend_by_band,
    spend_by_stop_reason,
    zone_bands,
)
from costtune.policy import rung_epochs
from costtune.run import Run

SORT_KEYS = ("metric", "cost", "roi")


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def usd(value: float | None) -> str:
    """Dollars readable at any scale: $1,234.50, $0.42, $0.000123."""
    if value is None or math.isnan(value):
        return "–"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    return f"${value:.3g}"


def sort_trials(frame: pd.DataFrame, metric: str, mode: str, by: str = "metric") -> pd.DataFrame:
    """Best metric first, most expensive first, or highest ROI first."""
    if frame.empty:
        return frame
    if by == "cost":
        return frame.sort_values("cost_usd", ascending=False)
    if by == "roi":
        return frame.sort_values("roi", ascending=False, na_position="last")
    return frame.sort_values(f"best_{metric}", ascending=mode == "min", na_position="last")


def cost_table(
    frame: pd.DataFrame,
    metric: str,
    mode: str,
    limit: int | None = 20,
    by: str = "metric",
    hyperparameters: list[str] | None = None,
    compact: bool = False,
) -> Table:
    """The trial cost table as a rich table (``hyperparameters``: the ``hp.*`` columns to
    show, default all; ``compact``: no vertical rules)."""
    title = {"metric": "best first", "cost": "most expensive first", "roi": "highest ROI first"}[by]
    table = Table(
        title=f"Trials ({title})",
        box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
        collapse_padding=compact,
        pad_edge=not compact,
    )
    hp_columns = (
        [c for c in frame.columns if c.startswith("hp.")] if hyperparameters is None else hyperparameters
    )
    headers = ["trial", "stop reason", "epochs", "device-h", "cost", f"best {metric}", "roi"]
    for name in [*headers, *(c[3:] for c in hp_columns)]:
        table.add_column(name, justify="left" if name in ("trial", "stop reason") else "right", no_wrap=True)
    if frame.empty:
        return table
    ordered = _shown(frame, metric, mode, limit, by)
    for _, row in ordered.iterrows():
        table.add_row(
            str(row["trial_id"]),
            str(row["stop_reason"] if isinstance(row["stop_reason"], str) else "interrupted"),
            str(row["epochs"]),
            _fmt(row["device_hours"], 3),
            usd(row["cost_usd"]),
            _fmt(row[f"best_{metric}"]),
            _fmt(row["roi"], 3),
            *(_fmt(row[c], 3) for c in hp_columns),
        )
    if limit is not None and len(frame) > limit:
        table.caption = f"… and {len(frame) - limit} more trials in trials.csv"
    return table


def _shown(frame: pd.DataFrame, metric: str, mode: str, limit: int | None, by: str) -> pd.DataFrame:
    ordered = sort_trials(frame, metric, mode, by)
    return ordered if limit is None else ordered.head(limit)


def hyperparameter_table(
    frame: pd.DataFrame,
    metric: str,
    mode: str,
    columns: list[str],
    limit: int | None = 20,
    by: str = "metric",
) -> Table:
    """The ``hp.*`` columns of the same trials, in the same order, beside their trial ids."""
    table = Table(
        title="Hyperparameters (same order)", box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False
    )
    table.add_column("trial", no_wrap=True)
    for c in columns:
        table.add_column(c[3:], justify="right", no_wrap=True)
    if not frame.empty:
        for _, row in _shown(frame, metric, mode, limit, by).iterrows():
            table.add_row(str(row["trial_id"]), *(_fmt(row[c], 3) for c in columns))
    return table


def cost_tables(
    frame: pd.DataFrame, metric: str, mode: str, console: Console, limit: int | None = 20, by: str = "metric"
) -> list[Table]:
    """The cost table in as many tables as the console's width needs: all in one when it
    fits; otherwise the costs, then the hyperparameters in tables of as many as fit."""
    width = console.width

    def fits(table: Table) -> bool:  # drawn at its natural width, no cell squeezed to "0.…"
        return Measurement.get(console, console.options.update(width=10_000), table).maximum <= width

    whole = cost_table(frame, metric, mode, limit, by)
    if fits(whole):
        return [whole]
    tables = [cost_table(frame, metric, mode, limit, by, hyperparameters=[], compact=True)]
    chunk: list[str] = []
    for column in [c for c in frame.columns if c.startswith("hp.")]:
        if chunk and not fits(hyperparameter_table(frame, metric, mode, [*chunk, column], limit, by)):
            tables.append(hyperparameter_table(frame, metric, mode, chunk, limit, by))
            chunk = []
        chunk.append(column)
    if chunk:
        tables.append(hyperparameter_table(frame, metric, mode, chunk, limit, by))
    return tables


def summary_lines(summary: dict[str, Any]) -> list[str]:
    metric = summary["metric"]
    saved = summary.get("saved_fraction")
    lines = [
        f"trials: {summary['trials']}   epochs run: {summary['epochs']}   "
        f"device-hours: {summary['total_device_hours']:.4g}   "
        f"GPU-hours: {summary['total_gpu_hours']:.4g}",
        f"total cost: {usd(summary['total_cost_usd'])}   if every trial ran to max_epochs: "
        f"{usd(summary.get('cost_if_all_ran_full_usd'))}   saved: "
        + ("–" if saved is None else f"{saved:.0%}"),
        f"best {metric}: {_fmt(summary.get('best_metric'))} (trial {summary.get('best_trial_id')})"
        + "".join(
            f"   {k} {_fmt(v)}"
            for k, v in (summary.get("best_trial_metrics") or {}).items()
            if k not in (metric, "epoch", "train_loss")
        ),
        "stop reasons: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.get("stop_reasons", {}).items())),
    ]
    if "wall_seconds" in summary:
        lines.append(f"wall time: {summary['wall_seconds']:.1f} s   output: {summary.get('output_dir')}")
    return lines


def default_console() -> Console:
    return Console(width=None if Console().is_terminal else 160)


def print_report(frame: pd.DataFrame, summary: dict[str, Any], console: Console | None = None) -> None:
    """The cost table and totals (what ``costtune sweep`` prints at the end)."""
    console = console or default_console()
    for table in cost_tables(frame, summary["metric"], summary["mode"], console):
        console.print(table)
    for line in summary_lines(summary):
        console.print(line, highlight=False)


# --------------------------------------------------------------------------- report
@dataclass
class Report:
    """Everything ``costtune report`` shows, as data."""

    run: Run
    summary: dict[str, Any]
    trials: pd.DataFrame
    spend_by_stop_reason: dict[str, float]
    spend_by_band: dict[str, float]
    elbow: Elbow | None
    zones: list[EpochPoint] = field(default_factory=list)
    curves: dict[str, list[EpochPoint]] = field(default_factory=dict)


def epoch_bands(run: Run) -> list[int]:
    """Rung boundaries of the run's scheduler (bracket 0), then max_epochs."""
    c = run.config
    if c.scheduler.type == "cost_aware_hyperband":
        return [*rung_epochs(c.scheduler.grace_epochs, c.scheduler.eta, c.max_epochs), c.max_epochs]
    return [c.max_epochs]


def build_report(run: Run, min_roi: float | None = None, window: int = 3) -> Report:
    ledger = run.ledger
    summary = ledger.summary()
    curves = {r.trial_id: curve(ledger, r, window, min_roi) for r in ledger.trials.values()}
    best_id = summary.get("best_trial_id")
    best_elbow = elbow(ledger, ledger.trials[best_id], window, min_roi) if best_id else None
    zones = zone_bands(curves[best_id], best_elbow.epoch) if best_id and best_elbow else []
    return Report(
        run=run,
        summary=summary,
        trials=ledger.to_frame(),
        spend_by_stop_reason=spend_by_stop_reason(ledger),
        spend_by_band=spend_by_band(ledger, epoch_bands(run)),
        elbow=best_elbow,
        zones=zones,
        curves=curves,
    )


def report_lines(report: Report) -> list[str]:
    """Where the money went, in a few lines of prose."""
    metric = report.summary["metric"]
    total = report.summary["total_cost_usd"] or 0.0

    def share(v: float) -> str:
        return f"{usd(v)} ({v / total:.0%})" if total > 0 else usd(v)

    lines = [
        "spend by stop reason: "
        + ", ".join(f"{k} {share(v)}" for k, v in sorted(report.spend_by_stop_reason.items())),
        "spend by epoch band: "
        + ", ".join(f"epochs {k} {share(v)}" for k, v in report.spend_by_band.items()),
    ]
    e = report.elbow
    if e is not None:
        lines.append(
            f"elbow of the best trial ({e.trial_id}): epoch {e.epoch}, {metric} {_fmt(e.metric)}, "
            f"{usd(e.usd)}; the epochs after it cost {usd(e.usd_after)} "
            f"(marginal ROI below {_fmt(e.min_roi, 3)} per $)"
        )
    if report.zones:
        lines.append(
            "zones: "
            + "; ".join(
                f"epoch {p.epoch}: {metric} {_fmt(p.best_so_far)}, {usd(p.usd)} — {p.zone}"
                for p in report.zones
            )
        )
    return lines


def report_json(report: Report) -> dict[str, Any]:
    e = report.elbow
    return {
        "summary": report.summary,
        "spend_by_stop_reason": report.spend_by_stop_reason,
        "spend_by_epoch_band": report.spend_by_band,
        "elbow": None
        if e is None
        else {
            "trial_id": e.trial_id,
            "epoch": e.epoch,
            "metric": e.metric,
            "usd": e.usd,
            "usd_after": e.usd_after,
            "min_roi": e.min_roi,
        },
        "zones": [
            {"epoch": p.epoch, "best_so_far": p.best_so_far, "usd": p.usd, "zone": p.zone}
            for p in report.zones
        ],
        "trials": json.loads(report.trials.to_json(orient="records")),
    }


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (no optional dependency)."""
    if frame.empty:
        return "_no trials_\n"
    cols = list(frame.columns)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in frame.iterrows():
        out.append(
            "| " + " | ".join(_fmt(row[c]) if isinstance(row[c], float) else str(row[c]) for c in cols) + " |"
        )
    return "\n".join(out) + "\n"


def report_markdown(report: Report, by: str = "metric") -> str:
    s = report.summary
    parts = [f"# costtune report: {report.run.name}", ""]
    parts += [f"- {line}" for line in summary_lines(s) + report_lines(report)]
    parts += ["", "## Trials", ""]
    frame = sort_trials(report.trials, s["metric"], s["mode"], by)
    parts.append(markdown_table(frame))
    return "\n".join(parts)


def print_full_report(report: Report, console: Console | None = None, by: str = "metric") -> None:
    console = console or default_console()
    s = report.summary
    for table in cost_tables(report.trials, s["metric"], s["mode"], console, by=by):
        console.print(table)
    for line in summary_lines(s) + report_lines(report):
        console.print(line, highlight=False)


# ---------------------------------------------------------------------------- plots
def plots(report: Report) -> dict[str, bytes]:
    """PNG figures: metric vs dollars per trial, spend over time, Pareto front, ROI per trial."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = report.summary["metric"]
    mode = report.summary["mode"]
    out: dict[str, bytes] = {}

    fig, ax = plt.subplots(figsize=(8, 4.5))
    best_id = report.summary.get("best_trial_id")
    for trial_id, points in report.curves.items():
        if not points:
            continue
        best = trial_id == best_id
        (line,) = ax.plot(
            [p.usd for p in points],
            [p.metric for p in points],
            lw=2.0 if best else 1,
            alpha=1.0 if best else 0.6,
            color="k" if best else None,
            label=f"best trial {trial_id}" if best else None,
            zorder=3 if best else 2,
        )
        ax.plot(points[-1].usd, points[-1].metric, "x", color=line.get_color())
    if report.elbow is not None:  # the best trial's elbow, on its own curve
        ax.plot(
            report.elbow.usd,
            report.elbow.metric,
            "o",
            color="tab:red",
            zorder=4,
            label=f"its elbow (epoch {report.elbow.epoch})",
        )
    if best_id is not None:
        ax.legend()
    ax.set_xlabel("cumulative dollars of the trial")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} versus dollars per trial (x = where it stopped)")
    out["metric_vs_dollars"] = _png(fig)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    timeline = report.run.ledger.timeline
    start = timeline[0][4] if timeline and not math.isnan(timeline[0][4]) else 0.0
    per_trial: dict[str, tuple[list[float], list[float]]] = {}
    total_x: list[float] = []
    total_y: list[float] = []
    for i, (trial_id, _epoch, usd_delta, _metric, at) in enumerate(timeline):
        x = (at - start) if not math.isnan(at) else float(i)
        xs, ys = per_trial.setdefault(trial_id, ([], []))
        xs.append(x)
        ys.append((ys[-1] if ys else 0.0) + usd_delta)
        total_x.append(x)
        total_y.append((total_y[-1] if total_y else 0.0) + usd_delta)
    for xs, ys in per_trial.values():
        ax.plot(xs, ys, lw=0.8, alpha=0.7)
    ax.plot(total_x, total_y, color="k", lw=1.5, label="whole sweep")
    ax.legend()
    ax.set_xlabel("seconds since the first report")
    ax.set_ylabel("cumulative dollars")
    ax.set_title("Spend over time, per trial and in total")
    out["spend_over_time"] = _png(fig)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    frame = report.trials.dropna(subset=[f"best_{metric}"])
    if not frame.empty:
        ax.scatter(frame["cost_usd"], frame[f"best_{metric}"], s=14, alpha=0.7, label="trials")
        front = _pareto_front(frame["cost_usd"].tolist(), frame[f"best_{metric}"].tolist(), mode)
        ax.step(
            [c for c, _ in front], [m for _, m in front], where="post", color="tab:red", label="Pareto front"
        )
        ax.legend()
    ax.set_xlabel("trial cost (dollars)")
    ax.set_ylabel(f"best {metric}")
    ax.set_title("Best metric versus cost")
    out["pareto"] = _png(fig)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    roi_frame = report.trials.dropna(subset=["roi"]).sort_values("roi", ascending=False)
    ax.bar(range(len(roi_frame)), roi_frame["roi"], color="tab:green")
    ax.set_xticks(range(len(roi_frame)), roi_frame["trial_id"], rotation=90, fontsize=6)
    ax.set_ylabel("ROI (value per dollar)")
    ax.set_title("ROI per trial")
    out["roi"] = _png(fig)
    plt.close("all")
    return out


def _pareto_front(costs: list[float], metrics: list[float], mode: str) -> list[tuple[float, float]]:
    best = math.inf
    front = []
    for c, m in sorted(zip(costs, metrics, strict=True)):
        loss = m if mode == "min" else -m
        if loss < best:
            best = loss
            front.append((c, m))
    return front


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def report_html(report: Report, by: str = "metric") -> str:
    """A self-contained HTML page: prose, the trial table and the plots as data: URIs."""
    s = report.summary
    images = "".join(
        f'<figure><img alt="{name}" src="data:image/png;base64,{base64.b64encode(png).decode()}"/></figure>'
        for name, png in plots(report).items()
    )
    items = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(s) + report_lines(report))
    table = sort_trials(report.trials, s["metric"], s["mode"], by).to_html(
        index=False, float_format=lambda v: f"{v:.4g}", na_rep="–", border=0
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>costtune report: {html.escape(report.run.name)}</title>"
        "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}"
        "table{border-collapse:collapse;font-size:12px}td,th{padding:2px 6px;border-bottom:1px solid #ddd}"
        "img{max-width:100%}</style></head><body>"
        f"<h1>costtune report: {html.escape(report.run.name)}</h1><ul>{items}</ul>"
        f"{images}<h2>Trials</h2>{table}</body></html>"
    )


# -------------------------------------------------------------------------- compare
def compare_runs(runs: list[Run], target: float | None = None) -> pd.DataFrame:
    """Side by side: dollars, GPU-hours, best metric, dollars to reach ``target``, ratios.

    ``target`` defaults to the worse run's best metric, so every run reaches it.
    """
    if not runs:
        return pd.DataFrame()
    metrics = {r.config.metric for r in runs}
    modes = {r.config.mode for r in runs}
    if len(metrics) > 1 or len(modes) > 1:
        from costtune.errors import ConfigError

        raise ConfigError(
            f"compare: runs optimise different metrics {sorted(metrics)} / modes {sorted(modes)}"
        )
    mode = modes.pop()
    summaries = [r.ledger.summary() for r in runs]
    bests = [s["best_metric"] for s in summaries if s["best_metric"] is not None]
    if target is None and bests:
        target = max(bests) if mode == "min" else min(bests)
    rows = []
    for run, s in zip(runs, summaries, strict=True):
        rows.append(
            {
                "run": run.name,
                "scheduler": run.config.scheduler.type,
                "searcher": run.config.searcher.type,
                "trials": s["trials"],
                "epochs": s["epochs"],
                "total_cost_usd": s["total_cost_usd"],
                "gpu_hours": s["total_gpu_hours"],
                "device_hours": s["total_device_hours"],
                f"best_{run.config.metric}": s["best_metric"],
                "target": target,
                "cost_to_target_usd": None if target is None else cost_to_target(run.ledger, target),
            }
        )
    frame = pd.DataFrame(rows)
    base = frame["total_cost_usd"].iloc[0]
    frame["cost_ratio"] = frame["total_cost_usd"] / base if base > 0 else math.nan
    first_to_target = frame["cost_to_target_usd"].iloc[0]
    frame["cost_to_target_ratio"] = [
        (v / first_to_target) if v is not None and first_to_target else math.nan
        for v in frame["cost_to_target_usd"]
    ]
    return frame


def compare_table(frame: pd.DataFrame) -> Table:
    table = Table(title="Sweeps side by side (ratios against the first)")
    table.add_column("")
    for name in frame["run"]:
        table.add_column(str(name), justify="right")
    for column in frame.columns:
        if column == "run":
            continue
        values = frame[column].tolist()
        cells = [
            usd(v) if column.endswith("usd") and v is not None else _fmt(v if v is not None else math.nan)
            for v in values
        ]
        table.add_row(column, *cells)
    return table
