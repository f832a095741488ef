"""Rendering a sweep's cost table for people (rich) — the start of ``costtune report``."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table


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


def cost_table(frame: pd.DataFrame, metric: str, mode: str, limit: int | None = 20) -> Table:
    """The trial cost table, best trials first."""
    table = Table(title="Trials (best first)", show_lines=False)
    hp_columns = [c for c in frame.columns if c.startswith("hp.")]
    for name in [
        "trial",
        "stop reason",
        "epochs",
        "device-h",
        "cost",
        f"best {metric}",
        "roi",
        *(c[3:] for c in hp_columns),
    ]:
        table.add_column(name, justify="left" if name in ("trial", "stop reason") else "right")
    if frame.empty:
        return table
    ordered = frame.sort_values(f"best_{metric}", ascending=mode == "min", na_position="last")
    for _, row in (ordered if limit is None else ordered.head(limit)).iterrows():
        table.add_row(
            str(row["trial_id"]),
            str(row["stop_reason"] or row["status"]),
            str(row["epochs"]),
            _fmt(row["device_hours"], 3),
            usd(row["cost_usd"]),
            _fmt(row[f"best_{metric}"]),
            _fmt(row["roi"], 3),
            *(_fmt(row[c], 3) for c in hp_columns),
        )
    if limit is not None and len(ordered) > limit:
        table.caption = f"… and {len(ordered) - limit} more trials in trials.csv"
    return table


def summary_lines(summary: dict[str, Any]) -> list[str]:
    metric = summary["metric"]
    saved = summary.get("saved_fraction")
    lines = [
        f"trials: {summary['trials']}   epochs run: {summary['epochs']}   "
        f"device-hours: {summary['total_device_hours']:.4g}   GPU-hours: {summary['total_gpu_hours']:.4g}",
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


def print_report(frame: pd.DataFrame, summary: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console(width=None if Console().is_terminal else 160)
    console.print(cost_table(frame, summary["metric"], summary["mode"]))
    for line in summary_lines(summary):
        console.print(line, highlight=False)
