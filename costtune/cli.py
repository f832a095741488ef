"""The ``costtune`` command: a thin shell over the Python API.

Exit codes: 0 success, 1 a sweep ran but failed, 2 invalid input (nothing was started).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

import click

from costtune.errors import ConfigError, CosttuneError

EXIT_FAILED = 1
EXIT_USAGE = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="costtune")
def main() -> None:
    """Cost-aware hyperparameter search on Ray Tune: every GPU-dollar of a sweep metered.

    \b
    Start with the embedded default (digits, CPU, about a minute):
      costtune sweep experiments/digits.yaml
      costtune report runs/digits-<timestamp> --html report.html
      costtune compare RUN_A RUN_B
    """


@main.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path),
    default=None,
    help="Run directory (default: runs/<name>-<timestamp>). Must not hold a sweep already.",
)
@click.option(
    "--seed",
    type=click.IntRange(0, 2**32 - 1),
    default=None,
    help="Override the config's seed (searcher and trainables).",
)
@click.option(
    "--address",
    default=None,
    help="Ray cluster to run on (e.g. 'auto'); default: a local Ray instance.",
)
@click.option("--no-progress", is_flag=True, help="Do not draw the live progress table.")
def sweep(
    config: Path, output: Path | None, seed: int | None, address: str | None, no_progress: bool
) -> None:
    """Run the sweep described by CONFIG (YAML) and print its cost table.

    Writes trials.csv, trials.parquet, summary.json, ledger.jsonl and Ray's own results
    to the run directory.
    """
    from costtune.config import load_config

    try:
        cfg = load_config(config)
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    from costtune.report import print_report
    from costtune.sweep import run_sweep

    try:
        result = run_sweep(cfg, output, seed=seed, progress=not no_progress, ray_address=address)
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    except CosttuneError as exc:
        _fail(str(exc), EXIT_FAILED)
    print_report(result.trials, result.summary)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "markdown"]),
    default="table",
    show_default=True,
    help="table: for people; csv: the trial table; json: everything; markdown: for a PR comment.",
)
@click.option(
    "--sort",
    type=click.Choice(["metric", "cost", "roi"]),
    default="metric",
    show_default=True,
    help="Order of the trial table.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write a self-contained HTML report (plots embedded) to this file.",
)
@click.option(
    "--min-roi",
    type=float,
    default=None,
    help="Marginal ROI (value per $) below which an epoch counts as past the elbow "
    "[default: a tenth of the best trial's average ROI].",
)
def report(run_dir: Path, fmt: str, sort: str, html_path: Path | None, min_roi: float | None) -> None:
    """Where a finished (or interrupted) sweep's money went, from RUN_DIR alone.

    Trial cost table, totals, spend by stop reason and by epoch band, the elbow of the best
    trial's metric-versus-dollars curve, savings against running every trial to max_epochs.
    """
    from costtune import report as rp
    from costtune.run import load_run

    try:
        built = rp.build_report(load_run(run_dir), min_roi=min_roi)
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    if fmt == "csv":
        s = built.summary
        click.echo(rp.sort_trials(built.trials, s["metric"], s["mode"], sort).to_csv(index=False), nl=False)
    elif fmt == "json":
        click.echo(json.dumps(rp.report_json(built), indent=2, default=str))
    elif fmt == "markdown":
        click.echo(rp.report_markdown(built, by=sort))
    else:
        rp.print_full_report(built, by=sort)
    if html_path is not None:
        html_path.write_text(rp.report_html(built, by=sort), encoding="utf-8")
        click.echo(f"HTML report: {html_path}", err=True)


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--target",
    type=float,
    default=None,
    help="Metric value to reach [default: the worse run's best, so that every run reaches it].",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True
)
def compare(run_dirs: tuple[Path, ...], target: float | None, fmt: str) -> None:
    """Sweeps side by side: dollars, GPU-hours, best metric, dollars to reach a target.

    Ratios are against the first RUN_DIR.
    """
    from costtune import report as rp
    from costtune.run import load_run

    if len(run_dirs) < 2:
        _fail("compare: give at least two run directories", EXIT_USAGE)
    try:
        frame = rp.compare_runs([load_run(d) for d in run_dirs], target)
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    if fmt == "csv":
        click.echo(frame.to_csv(index=False), nl=False)
    elif fmt == "json":
        click.echo(frame.to_json(orient="records", indent=2))
    else:
        rp.default_console().print(rp.compare_table(frame))


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"costtune: error: {message}", err=True)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
