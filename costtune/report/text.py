"""After a run: the cost table, where the money went, the elbow, plots, HTML, compare.

Everything here works from a run directory alone (``ledger.jsonl`` + ``config.yaml``):
no Ray process, and an interrupted run reads back like a finished one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from costtune.core.analysis import (
    Elbow,
    EpochPoint,
    Finding,
    cost_to_target,
    curve,
    dollars_to_best,
    elbow,
    findings,
    spend_by_band,
    spend_by_stop_reason,
    zone_bands,
)
from costtune.core.direction import Direction
from costtune.core.policy import StopReason, rung_epochs
from costtune.core.run import Run
from costtune.results import best_checkpoint

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
    if abs(value) >= 1 or value == 0:
        return f"${value:,.2f}"
    # three significant digits in plain decimals: $0.000553, never $5.53e-04
    return f"${value:.{2 - math.floor(math.log10(abs(value)))}f}"


def sort_trials(frame: pd.DataFrame, metric: str, mode: str, by: str = "metric") -> pd.DataFrame:
    """Best metric first, most expensive first, or highest ROI first."""
    if frame.empty:
        return frame
    if by == "cost":
        return frame.sort_values("cost_usd", ascending=False)
    if by == "roi":
        return frame.sort_values("roi", ascending=False, na_position="last")
    return frame.sort_values(f"best_{metric}", ascending=Direction.of(mode).ascending, na_position="last")


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
            str(row["stop_reason"] if isinstance(row["stop_reason"], str) else StopReason.INTERRUPTED.value),
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
    lines += best_trial_lines(summary)
    if "wall_seconds" in summary:
        lines.append(f"wall time: {summary['wall_seconds']:.1f} s   output: {summary.get('output_dir')}")
    return lines


def best_trial_lines(summary: dict[str, Any]) -> list[str]:
    """Which weights to use: the best trial's config, best epoch, its dollars and the checkpoint
    holding that epoch's weights (relative to the run directory)."""
    if summary.get("best_trial_id") is None:
        return []
    config = ", ".join(
        f"{k}={_fmt(v) if isinstance(v, float) else v}" for k, v in (summary.get("best_config") or {}).items()
    )
    metric = f"{summary['metric']} {_fmt(summary.get('best_metric'))}"
    lines = [
        f"best trial {summary['best_trial_id']}: epoch {summary.get('best_epoch')}, {metric}, "
        f"{usd(summary.get('best_cost_usd'))}; {config}"
    ]
    if "best_checkpoint" in summary:
        where = summary["best_checkpoint"]
        lines.append(
            f"weights to use: {where} (in the run directory)"
            if where
            else "weights to use: none; the run holds no checkpoint of that epoch (none written, or deleted)"
        )
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
    curves: dict[str, list[EpochPoint]] = field(default_factory=dict)  # the best trial's
    #: what the sweep's own curves say about its decisions (:func:`costtune.core.analysis.findings`)
    findings: list[Finding] = field(default_factory=list)


def epoch_bands(run: Run) -> list[int]:
    """Rung boundaries of the run's scheduler (bracket 0), then max_epochs."""
    c = run.config
    if c.scheduler.type == "cost_aware_hyperband":
        return [*rung_epochs(c.scheduler.grace_epochs, c.scheduler.eta, c.max_epochs), c.max_epochs]
    return [c.max_epochs]


def build_report(run: Run, min_roi: float | None = None, window: int = 3) -> Report:
    ledger = run.ledger
    summary = {**ledger.summary(), "best_checkpoint": best_checkpoint(ledger, run.directory)}
    best_id = summary.get("best_trial_id")
    # the best trial's curve: its elbow and zones (the panels read each trial's history)
    curves = {best_id: curve(ledger, ledger.trials[best_id], window, min_roi)} if best_id else {}
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
        findings=findings(ledger),
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
    lines += [f"note: {f.message}" for f in report.findings]
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
        "findings": [f.to_dict() for f in report.findings],
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


def duration(seconds: float | None) -> str:
    """Wall-clock time as people say it: 42 s, 3 min 5 s, 2 h 14 min."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min {seconds - 60 * minutes:.0f} s"
    return f"{minutes // 60} h {minutes % 60} min"


def load_snippet(report: Report, checkpoint: Path) -> str:
    """Python that loads the best trial's weights: the built-in trainable's ``load_model``, or,
    for a function trainable, Ray's ``Checkpoint`` of that directory."""
    config = report.run.config
    if config.trainable.name == "amp":
        args = {**config.trainable.args, **(report.summary.get("best_config") or {})}
        return (
            "from costtune.trainables.amp import load_model\n\n"
            f"model = load_model({str(checkpoint)!r}, {args!r})"
        )
    return (
        "from ray.tune import Checkpoint\n\n"
        f"checkpoint = Checkpoint.from_directory({str(checkpoint)!r})  # the files your trainable saved"
    )


def compare_runs(runs: list[Run], target: float | None = None) -> pd.DataFrame:
    """Side by side: dollars, GPU-hours, saved fraction, wall time, stop reasons, best metric,
    dollars to reach ``target`` and to reach each run's own best, with ratios to the first.

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
        target = Direction.of(mode).worst(bests)
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
                "saved_fraction": s["saved_fraction"],
                "wall_seconds": wall_seconds(run),
                "stop_reasons": ", ".join(f"{k} {v}" for k, v in sorted(s["stop_reasons"].items())),
                f"best_{run.config.metric}": s["best_metric"],
                "cost_to_best_usd": dollars_to_best(run.ledger),
                "target": target,
                "cost_to_target_usd": None if target is None else cost_to_target(run.ledger, target),
            }
        )
    frame = pd.DataFrame(rows)
    for column in ("total_cost_usd", "cost_to_target_usd", "wall_seconds"):
        first = frame[column].iloc[0]
        frame[column.removesuffix("_usd").removesuffix("_seconds") + "_ratio"] = [
            (v / first) if v is not None and first and not _isnan(v) and not _isnan(first) else math.nan
            for v in frame[column]
        ]
    return frame.rename(columns={"total_cost_ratio": "cost_ratio", "wall_ratio": "wall_time_ratio"})


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def wall_seconds(run: Run) -> float:
    """How long the sweep ran: ``summary.json``'s figure, else the span of its ledger's
    reports (an interrupted run), else NaN."""
    try:
        written = json.loads((run.directory / "summary.json").read_text())
        return float(written["wall_seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    times = [row.time for row in run.ledger.timeline if not math.isnan(row.time)]
    return max(times) - min(times) if len(times) >= 2 else math.nan


def config_key(config: dict[str, Any]) -> str:
    """One configuration, as the same text in every run (floats to 12 significant digits)."""

    def norm(v: Any) -> Any:
        return float(f"{v:.12g}") if isinstance(v, float) else v

    return json.dumps({k: norm(v) for k, v in sorted(config.items())}, sort_keys=True, default=str)


def matched_trials(runs: list[Run]) -> pd.DataFrame:
    """Trials with the same configuration in two or more runs (runs that sampled the same
    ones: same seed and searcher), one row per configuration: its epochs, dollars, stop
    reason and best metric in each run (empty where a run did not sample it)."""
    by_run: list[dict[str, Any]] = []
    for run in runs:
        seen: dict[str, Any] = {}
        for record in run.ledger.trials.values():
            seen.setdefault(config_key(record.config), record)  # a repeat: its first trial
        by_run.append(seen)
    counts: dict[str, int] = {}
    for seen in by_run:
        for key in seen:
            counts[key] = counts.get(key, 0) + 1
    rows = []
    for key in sorted(k for k, n in counts.items() if n >= 2):
        row: dict[str, Any] = {"config": ", ".join(f"{k}={_fmt(v)}" for k, v in json.loads(key).items())}
        for run, seen in zip(runs, by_run, strict=True):
            hit = seen.get(key)
            name = run.name
            row[f"{name}: trial"] = hit.trial_id if hit else None
            row[f"{name}: epochs"] = hit.epochs if hit else None
            row[f"{name}: cost_usd"] = run.ledger.cost_usd(hit) if hit else None
            row[f"{name}: stop_reason"] = (hit.stop_reason or hit.status.lower()) if hit else None
            best = run.ledger.best_metric(hit) if hit else math.nan
            row[f"{name}: best_{run.config.metric}"] = None if math.isnan(best) else best
        rows.append(row)
    return pd.DataFrame(rows)


def compare_json(frame: pd.DataFrame, matched: pd.DataFrame) -> str:
    return json.dumps(
        {
            "runs": json.loads(frame.to_json(orient="records")),
            "matched_trials": json.loads(matched.to_json(orient="records")) if not matched.empty else [],
        },
        indent=2,
    )


def compare_markdown(frame: pd.DataFrame, matched: pd.DataFrame) -> str:
    side = frame.set_index("run").T.reset_index().rename(columns={"index": ""})
    parts = ["## Sweeps side by side (ratios against the first)", "", markdown_table(side)]
    parts += ["## Trials matched by configuration", ""]
    parts.append(markdown_table(matched) if not matched.empty else "_no configuration ran in two runs_\n")
    return "\n".join(parts)


#: the side-by-side rows of ``costtune compare``, as a person reads them
COMPARE_LABELS = {
    "scheduler": "scheduler",
    "searcher": "searcher",
    "trials": "trials",
    "epochs": "epochs run",
    "total_cost_usd": "spent",
    "gpu_hours": "GPU-hours",
    "device_hours": "device-hours",
    "saved_fraction": "saved, against every trial run to max_epochs (an extrapolation)",
    "wall_seconds": "wall-clock time",
    "stop_reasons": "why trials stopped",
    "cost_to_best_usd": "spent when its own best arrived",
    "target": "common target",
    "cost_to_target_usd": "spent when it reached the common target",
    "cost_ratio": "spent, × the first run",
    "cost_to_target_ratio": "dollars to the common target, × the first run",
    "wall_time_ratio": "wall-clock time, × the first run",
}


def _readable(measure: str, value: Any) -> str:
    if value is None or _isnan(value):
        return "–"
    if measure.endswith("_usd"):
        return usd(value)
    if measure == "saved_fraction":
        return f"{value:.0%}"
    if measure.endswith("_ratio"):
        return f"{value:.2f}×"
    if measure == "wall_seconds":
        return duration(value)
    return _fmt(value) if isinstance(value, float) else str(value)


def compare_notes(runs: list[Run], frame: pd.DataFrame, matched: pd.DataFrame) -> list[str]:
    """What a trial-by-trial comparison shows that the totals hide: a configuration one run
    pruned short of its own three best results while another ran it to one of its three best;
    runs whose configs differ only by seed, and how far apart their dollars to the common
    target are."""
    notes: list[str] = []
    metric, mode = runs[0].config.metric, runs[0].config.mode
    direction = Direction.of(mode)
    top3: dict[str, list[float]] = {}
    for run in runs:
        bests = (run.ledger.best_metric(r) for r in run.ledger.trials.values())
        top3[run.name] = sorted((b for b in bests if not math.isnan(b)), reverse=not direction.ascending)[:3]

    def in_top3(name: str, value: Any) -> bool:
        top = top3[name]
        return bool(top) and value is not None and not _isnan(value) and not direction.better(top[-1], value)

    for _, row in matched.iterrows():
        for run in runs:
            mine = row.get(f"{run.name}: best_{metric}")
            if not in_top3(run.name, mine):
                continue
            for other in runs:
                theirs = row.get(f"{other.name}: best_{metric}")
                pruned = row.get(f"{other.name}: stop_reason") == StopReason.RUNG_PRUNED.value
                # pruned there before it reached what it reached here: one of this run's best
                if other is run or not pruned or in_top3(other.name, theirs):
                    continue
                notes.append(
                    f"{other.name} pruned {row['config']} at {_fmt(theirs)}; in {run.name} it ran to "
                    f"{_fmt(mine)}, one of that run's three best"
                )
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            mine, theirs = a.config.model_dump(mode="json"), b.config.model_dump(mode="json")
            mine.pop("name"), theirs.pop("name")
            if mine.pop("seed") == theirs.pop("seed") or mine != theirs:
                continue
            to_target = dict(zip(frame["run"], frame["cost_to_target_usd"], strict=True))
            x, y = _num_or_nan(to_target.get(a.name)), _num_or_nan(to_target.get(b.name))
            if x > 0 and y > 0:
                notes.append(
                    f"{a.name} and {b.name} differ only by seed: {usd(x)} and {usd(y)} to the same "
                    f"target, {max(x, y) / min(x, y):.1f}× apart. Seed-to-seed spread of this size is "
                    "noise, not a difference between settings."
                )
    return notes


def _num_or_nan(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def matched_table(matched: pd.DataFrame) -> Table:
    """The matched trials for a terminal: a configuration per row, each run's epochs,
    dollars and stop reason in one cell."""
    table = Table(title="Trials matched by configuration", box=box.SIMPLE_HEAD)
    table.add_column("config", overflow="fold")
    runs = list(dict.fromkeys(c.split(": ")[0] for c in matched.columns if ": " in c))
    for name in runs:
        table.add_column(name, overflow="fold")
    for _, row in matched.iterrows():
        cells = []
        for name in runs:
            epochs = row.get(f"{name}: epochs")
            if epochs is None or _isnan(epochs):
                cells.append("–")
                continue
            cost = row.get(f"{name}: cost_usd")
            cells.append(f"{int(epochs)} ep, {usd(cost)}, {row.get(f'{name}: stop_reason')}")
        table.add_row(str(row["config"]), *cells)
    return table


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
