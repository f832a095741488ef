"""The ``costtune`` command: a thin shell over the Python API.

Exit codes: 0 success, 1 a sweep ran but failed, 2 invalid input (nothing was started),
130 interrupted by Ctrl-C or SIGTERM (continue with ``costtune sweep --resume RUN_DIR``).
"""

from __future__ import annotations

import contextlib
import json
import math
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any, NoReturn

import click

from costtune.core.policy.defaults import DEFAULTS
from costtune.errors import ConfigError, CosttuneError

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C


_ALLOW_PATH = click.option(
    "--allow-path",
    "allow_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Also read search_space files from under this folder (repeatable); by default only the "
    "config's folder and search_spaces/.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="costtune")
def main() -> None:
    """Cost-aware hyperparameter search on Ray Tune: every GPU-dollar of a sweep metered.

    \b
    Start with the embedded default (digits, CPU, about a minute):
      costtune sweep --example digits        (the same as: costtune sweep experiments/digits.yaml)
      costtune report runs/digits-<timestamp> --html report.html
      costtune compare RUN_A RUN_B
    """
    warnings.showwarning = _show_warning


@main.command()
@click.argument("config", type=click.Path(path_type=Path), required=False)
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Continue the interrupted sweep in this run directory (no CONFIG needed).",
)
@click.option(
    "--example",
    default=None,
    metavar="NAME",
    help="Run a config shipped with costtune instead of CONFIG: digits (the embedded default: "
    "a real sweep on scikit-learn's digits, CPU, about a minute) or digits_long.",
)
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
@click.option(
    "--no-progress",
    is_flag=True,
    help="No progress while it runs (by default: a live table on a terminal; one line per trial "
    "end on stderr when the output goes to a log or a pipe).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the summary (totals, best trial, stop reasons) as JSON instead of the table.",
)
@click.option(
    "--approved",
    is_flag=True,
    help="Run even if the budget gate fails (grid search, or over the limits without an approval block).",
)
@_ALLOW_PATH
def sweep(
    config: Path | None,
    allow_paths: tuple[Path, ...],
    resume_dir: Path | None,
    example: str | None,
    output: Path | None,
    seed: int | None,
    address: str | None,
    no_progress: bool,
    as_json: bool,
    approved: bool,
) -> None:
    """Run the sweep described by CONFIG (YAML) and print its cost table.

    Writes trials.csv, trials.parquet, summary.json, ledger.jsonl and Ray's own results
    to the run directory. `costtune sweep --resume RUN_DIR` continues an interrupted one.
    """
    from costtune.core.config import load_config

    if example is not None:
        if config is not None or resume_dir is not None:
            _fail("--example: runs a shipped config; give it without CONFIG or --resume", EXIT_USAGE)
        from costtune.core.config import example_config

        try:
            config = example_config(example)
        except ConfigError as exc:
            _fail(str(exc), EXIT_USAGE)
    if resume_dir is not None:
        if config is not None or output is not None or seed is not None:
            _fail("--resume: takes the run directory alone (its config.yaml is reused)", EXIT_USAGE)
        from costtune.sweep import resume_sweep

        try:
            resumed = resume_sweep(resume_dir, progress=not no_progress, ray_address=address)
        except ConfigError as exc:
            _fail(str(exc), EXIT_USAGE)
        except CosttuneError as exc:
            _fail(str(exc), EXIT_FAILED)
        _print_result(resumed, as_json)
        _exit_if_interrupted(resumed)
        return
    if config is None:
        _fail("sweep: give a CONFIG file, or --resume RUN_DIR", EXIT_USAGE)
    try:
        cfg = load_config(config, allow_paths=allow_paths)
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    from costtune.sweep import run_sweep

    try:
        result = run_sweep(
            cfg,
            output,
            seed=seed,
            progress=not no_progress,
            ray_address=address,
            approved=approved,
            config_dir=config.parent,
        )
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    except CosttuneError as exc:
        _fail(str(exc), EXIT_FAILED)
    _print_result(result, as_json)
    _exit_if_interrupted(result)


def _print_result(result: Any, as_json: bool) -> None:
    notes = result.findings
    if as_json:
        found = [f.to_dict() for f in notes]
        summary = _no_nan({**result.summary, "interrupted": result.interrupted, "findings": found})
        click.echo(json.dumps(summary, indent=2, default=str))
        return
    from costtune.report.text import print_report

    print_report(result.trials, result.summary)
    for f in notes:
        click.echo(f"note: {f.message}")


def _no_nan(value: Any) -> Any:
    """JSON has no NaN: a missing number is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nan(v) for v in value]
    return value


def _exit_if_interrupted(result: Any) -> None:
    if result.interrupted:
        click.echo(
            "costtune: interrupted; the running trials are paused at their last checkpoint. "
            f"Continue with: costtune sweep --resume {shlex.quote(str(result.output_dir))}",
            err=True,
        )
        sys.exit(EXIT_INTERRUPTED)


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
    from costtune.core.run import load_run
    from costtune.report import html as hp
    from costtune.report import text as rp

    helper: Any = None
    if html_path is not None:
        _check_writable(html_path, "--html")
        from costtune.report.html import ImportanceHelper

        sys.stdout.flush()  # nothing buffered twice
        helper = ImportanceHelper()  # imports Optuna's importance on the other core meanwhile
    try:
        run = load_run(run_dir)
        built = rp.build_report(run, min_roi=min_roi)
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    if helper is not None:
        helper.ask(run.ledger, run.config.search_space)
    _say_unreadable(run.ledger)
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
        _write_page(html_path, hp.report_html(built, by=sort, importance=helper), "--html")
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
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "markdown"]),
    default="table",
    show_default=True,
    help="table: for people; csv: the side-by-side rows; json: side by side and the matched "
    "trials; markdown: both, for a PR comment.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also write a self-contained interactive comparison (best so far against dollars for "
    "every run, dollars to each run's best, the tables) to this file.",
)
def compare(run_dirs: tuple[Path, ...], target: float | None, fmt: str, html_path: Path | None) -> None:
    """Sweeps side by side: dollars, saved fraction, wall time, stop reasons, best metric,
    dollars to reach a target and each run's best; trials matched by configuration.

    Ratios are against the first RUN_DIR. Runs that sampled the same configurations (same
    seed and searcher) are also compared trial by trial: each one's epochs, dollars and
    stop reason in each run.
    """
    from costtune.core.run import load_run
    from costtune.report import html as hp
    from costtune.report import text as rp

    if len(run_dirs) < 2:
        _fail("compare: give at least two run directories", EXIT_USAGE)
    if html_path is not None:
        _check_writable(html_path, "--html")
    try:
        runs = [load_run(d) for d in run_dirs]
        frame = rp.compare_runs(runs, target)
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    for run in runs:
        _say_unreadable(run.ledger)
    matched = rp.matched_trials(runs)
    if fmt == "csv":
        click.echo(frame.to_csv(index=False), nl=False)
    elif fmt == "json":
        click.echo(rp.compare_json(frame, matched))
    elif fmt == "markdown":
        click.echo(rp.compare_markdown(frame, matched), nl=False)
    else:
        console = rp.default_console()
        console.print(rp.compare_table(frame))
        if matched.empty:
            console.print("no configuration ran in two of these runs: nothing to match trial by trial")
        else:
            console.print(rp.matched_table(matched))
    if html_path is not None:
        _write_page(html_path, hp.compare_html(runs, frame, matched), "--html")
        click.echo(f"HTML comparison: {html_path}", err=True)


def _check_writable(path: Path, flag: str, page: bool = True) -> None:
    """Refuse, before any work, an output file that cannot be written where it is asked, or
    whose writing would destroy a file: one of a run's own (its ledger, say), or, for a page
    (``page``), any existing file that is not a page costtune wrote (a typo'd ``--html
    train.py``). A table (``page=False``) may replace an older one outside a run."""
    from costtune.core.rundir import run_holding

    if path.is_dir():
        _fail(f"{flag}: {path} is a directory; give a file name", EXIT_USAGE)
    if not path.parent.is_dir():
        _fail(f"{flag}: no such directory: {path.parent}", EXIT_USAGE)
    if not (path.exists() or path.is_symlink()):
        return
    run = run_holding(path.resolve().parent) or run_holding(path.parent)  # a link into a run counts
    if page and _is_costtune_page(path) and (run is None or path.suffix.lower() in (".html", ".htm")):
        return  # an older page, regenerated
    if run is not None:
        _fail(
            f"{flag}: {path} is a file of the costtune run {run}; give a new file name (nothing was written)",
            EXIT_USAGE,
        )
    if page:
        _fail(
            f"{flag}: {path} exists and is not a page costtune wrote; give a new file name "
            "(nothing was written)",
            EXIT_USAGE,
        )


def _is_costtune_page(path: Path) -> bool:
    """Whether ``path`` is a regular file holding an HTML page costtune wrote (report or compare)."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.startswith(b"<!doctype html>") and b"<title>costtune " in head


def _write_page(path: Path, text: str, flag: str) -> None:
    """Write a page whole or not at all (a temporary file renamed over the target)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        _fail(f"{flag}: cannot write {path}: {exc.strerror or exc}", EXIT_USAGE)


def _estimate_for(cfg: Any, calibrate: bool, calibrate_trials: int, from_run: Path | None = None) -> Any:
    from costtune.core.estimate import estimate as make_estimate

    if calibrate and from_run is not None:
        raise ConfigError("--from-run: measures from a finished run; give it without --calibrate")
    measured, source = None, ""
    if from_run is not None:
        from costtune.calibrate import calibration_of
        from costtune.results import load_run

        try:
            past = load_run(from_run)
        except ConfigError as exc:
            raise ConfigError(f"--from-run: {str(exc).removeprefix('run: ')}") from None
        measured = calibration_of(past.ledger)
        if measured is None:
            raise ConfigError(f"--from-run: {from_run} has no metered epochs to measure")
        source = f"mean of {measured.samples} epochs metered in {from_run}"
    elif calibrate:
        from costtune.calibrate import calibrate_epoch_seconds

        click.echo(f"calibrating: {calibrate_trials} short trials on this machine ...", err=True)
        measured = calibrate_epoch_seconds(cfg, trials=calibrate_trials)
        source = f"mean of {measured.samples} epochs timed on this machine"
    if measured is None:
        return make_estimate(cfg, source="cost.epoch_seconds")
    return make_estimate(
        cfg,
        measured.mean_seconds,
        source=source,
        worst_epoch_seconds=measured.max_seconds,
        startup_seconds=measured.startup_seconds,
    )


_FROM_RUN = click.option(
    "--from-run",
    "from_run",
    type=click.Path(path_type=Path),
    default=None,
    help="Take the seconds per epoch from a finished run's ledger (the same trainable on the same "
    "hardware) instead of cost.epoch_seconds or new trials.",
)


def _print_estimate(est: Any) -> None:
    from costtune.report.text import usd

    click.echo("assumptions: " + "; ".join(est.assumptions))
    click.echo(f"{'':10}{'epochs':>12}{'device-h':>12}{'cost':>14}")
    click.echo(
        f"{'expected':10}{est.expected_epochs:>12,.0f}{est.expected_device_hours:>12,.4g}{usd(est.expected_cost_usd):>14}"
    )
    click.echo(
        f"{'worst':10}{est.worst_epochs:>12,.0f}{est.worst_device_hours:>12,.4g}{usd(est.worst_cost_usd):>14}"
    )
    click.echo(f"worst single trial: {est.worst_trial_hours:,.3g} h, {usd(est.worst_trial_cost_usd)}")


@main.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.option(
    "--calibrate", is_flag=True, help="Time real epochs on this machine instead of cost.epoch_seconds."
)
@click.option("--calibrate-trials", type=click.IntRange(1, 64), default=4, show_default=True)
@_FROM_RUN
@click.option("--json", "as_json", is_flag=True, help="Print the estimate as JSON.")
@_ALLOW_PATH
def estimate(
    config: Path,
    calibrate: bool,
    calibrate_trials: int,
    from_run: Path | None,
    as_json: bool,
    allow_paths: tuple[Path, ...],
) -> None:
    """Worst-case and expected cost of CONFIG's sweep, before it runs.

    From the scheduler's geometry (Hyperband rungs and brackets), the number of trials,
    max_epochs, devices per trial, price, and seconds per epoch (cost.epoch_seconds, or
    measured with --calibrate). Prints its assumptions.
    """
    from costtune.core.config import load_config

    try:
        cfg = load_config(config, allow_paths=allow_paths)
        est = _estimate_for(cfg, calibrate, calibrate_trials, from_run)
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    if as_json:
        click.echo(json.dumps(est.to_dict(), indent=2))
    else:
        _print_estimate(est)


@main.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.option(
    "--max-cost-usd",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Per-trial dollar limit [default: budget.max_cost_usd_per_trial, $300].",
)
@click.option(
    "--max-hours",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Per-trial hour limit [default: budget.max_hours_per_trial, 48].",
)
@click.option(
    "--max-sweep-cost-usd",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Whole-sweep dollar limit [default: budget.max_cost_usd, none].",
)
@click.option(
    "--calibrate", is_flag=True, help="Time real epochs on this machine instead of cost.epoch_seconds."
)
@click.option("--calibrate-trials", type=click.IntRange(1, 64), default=4, show_default=True)
@_FROM_RUN
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
@_ALLOW_PATH
def gate(
    config: Path,
    max_cost_usd: float | None,
    max_hours: float | None,
    max_sweep_cost_usd: float | None,
    calibrate: bool,
    calibrate_trials: int,
    from_run: Path | None,
    as_json: bool,
    allow_paths: tuple[Path, ...],
) -> None:
    """CI budget gate: exit 0 within limits (or approved), 1 over them, 2 invalid config.

    Grid search, and any sweep whose worst case exceeds the limits, must carry an
    approval: block (justification, estimated_resources, stop_conditions, approver).
    """
    from costtune.core.config import load_config
    from costtune.core.gate import check

    try:
        cfg = load_config(config, allow_paths=allow_paths)
        est = _estimate_for(cfg, calibrate, calibrate_trials, from_run)
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    result = check(cfg, est, max_cost_usd, max_hours, max_sweep_cost_usd)
    if as_json:
        click.echo(json.dumps({**result.to_dict(), "estimate": est.to_dict()}, indent=2))
    else:
        _print_estimate(est)
        for reason in result.over_limits:
            click.echo(f"over: {reason}")
        for note in result.notes:
            click.echo(f"note: {note}")
        click.echo("gate: PASS" if result.passed else "gate: FAIL")
    sys.exit(0 if result.passed else EXIT_FAILED)


@main.command("watch-idle")
@click.option(
    "--util-below",
    type=click.FloatRange(0, 100, min_open=True),
    default=1.0,
    show_default=True,
    help="A GPU counts as idle below this utilisation (%).",
)
@click.option(
    "--idle-minutes",
    type=click.FloatRange(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="Act on a process whose GPUs stayed idle this long.",
)
@click.option(
    "--action",
    type=click.Choice(["report", "pause", "stop"]),
    default="report",
    show_default=True,
    help="report: log only; pause: SIGSTOP the process; stop: SIGTERM it.",
)
@click.option("--dry-run", is_flag=True, help="Log what would be done; send no signal.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds between readings.",
)
@click.option("--iterations", type=click.IntRange(min=1), default=None, help="Stop after this many readings.")
@click.option(
    "--trace",
    type=click.Path(path_type=Path),
    default=None,
    help="Replay a recorded utilisation trace (JSON lines) instead of reading NVML.",
)
def watch_idle(
    util_below: float,
    idle_minutes: float,
    action: str,
    dry_run: bool,
    interval: float,
    iterations: int | None,
    trace: Path | None,
) -> None:
    """Reclaim idle GPUs: watch per-process GPU use, and report, pause or stop idle holders.

    Every action is logged as one JSON line on stdout.
    """
    from costtune.core.policy.idle import IdleTracker
    from costtune.idle import GpuSampler, IdleWatcher, NvmlSampler, NvmlUnavailable, TraceSampler

    try:
        if trace is not None:
            replay = TraceSampler.from_file(trace)
            if iterations is None:  # a replay runs through its trace, without waiting
                iterations, interval = len(replay.snapshots), 0.0
            sampler: GpuSampler = replay
        else:
            sampler = NvmlSampler()
    except (NvmlUnavailable, ConfigError) as exc:
        _fail(str(exc), EXIT_USAGE)
    watcher = IdleWatcher(
        sampler,
        IdleTracker(util_below, idle_minutes * 60),
        action=action,
        dry_run=dry_run,
        log=lambda event: click.echo(json.dumps(event)),
    )
    with contextlib.suppress(KeyboardInterrupt):
        watcher.run(interval, iterations)


@main.command()
@click.argument("curves", type=click.Path(path_type=Path))
@click.option(
    "--scheduler",
    type=click.Choice(["hyperband", "fifo"]),
    default="hyperband",
    show_default=True,
    help="hyperband: costtune's rungs, as a sweep's default decides; fifo: no early stopping, "
    "each configuration to its last recorded epoch.",
)
@click.option(
    "--grace-epochs",
    type=click.IntRange(min=1),
    default=DEFAULTS.grace_epochs,
    show_default=True,
    help="The first rung, in epochs (a run directory's own unless given).",
)
@click.option(
    "--eta",
    type=click.IntRange(min=2),
    default=DEFAULTS.eta,
    show_default=True,
    help="A rung keeps the top 1/eta of the trials that reached it, by loss, at least one (a run "
    "directory's own unless given).",
)
@click.option(
    "--brackets",
    type=click.IntRange(min=1),
    default=DEFAULTS.brackets,
    show_default=True,
    help="Hyperband brackets; bracket s has its first rung at grace-epochs × eta^s (a run "
    "directory's own unless given).",
)
@click.option(
    "--searcher",
    type=click.Choice(["order", "random", "tpe", "gp"]),
    default="order",
    show_default=True,
    help="order: the recorded order; random: a seeded shuffle; tpe: Optuna's univariate TPE (a sweep's "
    "default searcher), gp: Optuna's Gaussian process, each proposing among the recorded configurations.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="for --searcher random, tpe and gp")
@click.option(
    "--budget",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="USD for the replay: it ends once it has spent this much [default: no limit].",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Configurations trained at once on the simulated clock (a run directory's own "
    "max_concurrent_trials unless given).",
)
@click.option(
    "--price",
    type=click.FloatRange(min=0),
    default=None,
    help="USD per device-hour [default: a run directory's own prices; 2.50 for a curves table].",
)
@click.option("--target", type=float, default=None, help="val_loss to reach [default: see --target-at].")
@click.option(
    "--target-at",
    type=click.Choice(["final", "any"]),
    default="final",
    show_default=True,
    help="default target: the recorded best at the last epoch (final) or at any epoch (any).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the target, settings, both replays and findings as JSON."
)
@click.pass_context
def replay(
    ctx: click.Context,
    curves: Path,
    scheduler: str,
    grace_epochs: int,
    eta: int,
    brackets: int | None,
    searcher: str,
    seed: int,
    budget: float | None,
    workers: int,
    price: float | None,
    target: float | None,
    target_at: str,
    as_json: bool,
) -> None:
    """What would a finished sweep have cost under costtune? CURVES: a recorded-curves table
    (CSV or Parquet: config_id, hp.<name>..., epoch, val_loss, epoch_seconds, devices), or a
    costtune run directory.

    Replays CURVES on a simulated clock twice: as recorded (each configuration in file order
    to its last recorded epoch) and under costtune (the rungs, searcher and budget given
    here, choosing only among the recorded configurations). A curve that
    ends before the longest one was stopped when it was recorded: it is never taken as
    finished. The same seed gives the same replay. A run directory is replayed with its own
    trials' curves, metered seconds and prices, and its best metric (as a loss) as the target.
    """
    from costtune.core.curves import load_curves
    from costtune.core.simulate import simulate
    from costtune.replay import ReplaySettings, replay_pool
    from costtune.report.text import usd

    try:
        recorded_from = None
        if curves.is_dir():
            from costtune.core.curves import curves_from_frame
            from costtune.core.run import load_run
            from costtune.results import recorded_run

            recorded_from = recorded_run(curves)
            if recorded_from.mixed and price is not None:
                raise ConfigError(
                    "--price: the run billed device types at prices of their own; replay it without --price"
                )
            table = list(curves_from_frame(recorded_from.frame).values())
            # the run's own rungs and workers, unless given here
            run_config = load_run(curves).config

            def unless_given(name: str, own: Any, given: Any) -> Any:
                return own if ctx.get_parameter_source(name) is click.core.ParameterSource.DEFAULT else given

            grace_epochs = unless_given("grace_epochs", run_config.scheduler.grace_epochs, grace_epochs)
            eta = unless_given("eta", run_config.scheduler.eta, eta)
            brackets = unless_given("brackets", run_config.scheduler.brackets, brackets)
            workers = unless_given("workers", run_config.max_concurrent_trials or workers, workers)
        else:
            table = list(load_curves(str(curves.resolve())).values())
        if price is None:
            price = recorded_from.usd_per_device_hour if recorded_from is not None else 2.50
        price_note = (
            recorded_from.price_note
            if recorded_from is not None and price == recorded_from.usd_per_device_hour
            else f"${price:g}/device-hour"
        )
        chosen = ReplaySettings(
            scheduler=scheduler,
            grace_epochs=grace_epochs,
            eta=eta,
            brackets=brackets,
            searcher=searcher,
            seed=seed,
            budget=budget,
            workers=workers,
            price=price,
        )
        replayed = replay_pool(table, chosen)
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    costtune_run, longest = replayed.simulation, replayed.longest
    recorded = simulate(table, None, workers=workers, usd_per_device_hour=price, max_epochs=longest)
    finished = [c.val_loss[-1] for c in table if c.epochs == longest]
    goal = target
    if goal is None and recorded_from is not None:
        goal = recorded_from.best_loss  # the run's own best
    if goal is None:
        goal = recorded.best_loss if target_at == "any" or not finished else float(min(finished))
    label = f"costtune ({scheduler}, {searcher})"
    rows = {"recorded": recorded, "costtune": costtune_run}
    data = {
        name: {
            "epochs": len(sim.epochs),
            "trials": len(sim.stopped_at),
            "truncated": len(sim.truncated),
            "cost_usd": sim.total_usd,
            "best_val_loss": sim.best_loss,
            "cost_to_target_usd": sim.cost_to_target(goal),
            "wall_clock_hours": sim.wall_clock_s / 3600,
        }
        for name, sim in rows.items()
    }
    settings = {
        "scheduler": scheduler,
        "grace_epochs": grace_epochs if scheduler == "hyperband" else None,
        "eta": eta if scheduler == "hyperband" else None,
        "brackets": brackets if scheduler == "hyperband" else None,
        "searcher": searcher,
        "seed": seed,
        "budget_usd": budget,
    }
    notes = costtune_run.findings(longest)  # what its own curves say of its decisions
    if as_json:
        found = [f.to_dict() for f in notes]
        doc = {
            "target": goal,
            "target_at": target_at,
            "settings": settings,
            "runs": data,
            "findings": found,
        }
        click.echo(json.dumps(doc, indent=2))
        return
    click.echo(
        f"{len(table)} configurations ({len(recorded.truncated)} truncated), {workers} worker(s), "
        f"{price_note}; target val_loss {goal:.4g}"
        + (
            " (given)"
            if target is not None
            else " (the run's best)"
            if recorded_from is not None
            else f" (recorded best, {target_at} epoch)"
        )
    )
    click.echo(f"{'':34}{'epochs':>8}{'cost':>12}{'best val_loss':>15}{'cost to target':>16}{'hours':>9}")
    for name, d in data.items():
        click.echo(
            f"{label if name == 'costtune' else name:34}{d['epochs']:>8}{usd(d['cost_usd']):>12}"
            f"{d['best_val_loss']:>15.4g}"
            f"{usd(d['cost_to_target_usd']) if d['cost_to_target_usd'] is not None else 'not reached':>16}"
            f"{d['wall_clock_hours']:>9.2f}"
        )
    saved = 1 - costtune_run.total_usd / recorded.total_usd if recorded.total_usd else 0.0
    click.echo(f"saved: {saved:.0%} of the recorded cost" + _short_of(data, goal))
    for f in notes:
        click.echo(f"note: {f.message}")


def _short_of(runs: dict[str, dict[str, Any]], goal: float) -> str:
    """What the "saved" line must not hide: that costtune's replay ended short of the target
    the recorded sweep reached (a cheaper sweep to a worse model is not a saving)."""
    ours, recorded = runs["costtune"], runs["recorded"]
    if ours["cost_to_target_usd"] is not None:
        return ""
    neither = " (nor did the recorded sweep)" if recorded["cost_to_target_usd"] is None else ""
    best = ours["best_val_loss"]
    return f", but it did not reach the target{neither}: best val_loss {best:.4g} against {goal:.4g}"


@main.command()
@click.argument("task")
@click.option(
    "--out", type=click.Path(path_type=Path), required=True, help="curves table to write (.csv or .parquet)"
)
@click.option("--grid", "use_grid", is_flag=True, help="the protocol's 64-job reference grid")
@click.option(
    "--random", "n_random", type=click.IntRange(min=1), default=None, help="this many random configurations"
)
@click.option("--seed", type=int, default=0, show_default=True, help="for --random")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="the LCBench surrogate directory [default: $COSTTUNE_LCBENCH_DIR]",
)
def lcbench(
    task: str, out: Path, use_grid: bool, n_random: int | None, seed: int, data_dir: Path | None
) -> None:
    """Write LCBench learning curves of TASK (an OpenML task id) as a recorded-curves table.

    \b
    costtune lcbench 3945 --grid --out grid3945.csv --data-dir ../shared/benchmarks/yahpo_lcbench
    costtune replay grid3945.csv --workers 4
    """
    from costtune.lcbench import LCBench, random_configs, reference_grid

    if use_grid == (n_random is not None):
        _fail("lcbench: give exactly one of --grid or --random N", EXIT_USAGE)
    _check_writable(out, "--out", page=False)
    try:
        bench = LCBench(data_dir)
        configs = reference_grid() if use_grid else random_configs(n_random or 0, seed)
        frame = bench.curves(task, configs)
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    if out.suffix in (".parquet", ".pq"):
        frame.to_parquet(out, index=False)
    else:
        frame.to_csv(out, index=False)
    click.echo(f"{len(configs)} configurations × 52 epochs of task {task} → {out}")


_default_showwarning = warnings.showwarning


def _show_warning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    """costtune's own warnings (a repaired ledger) in one line; others as Python prints them."""
    from costtune.core.ledger import LedgerWarning

    if issubclass(category, LedgerWarning):
        click.echo(f"costtune: warning: {message}", err=True)
    else:
        _default_showwarning(message, category, *args, **kwargs)


def _say_unreadable(ledger: Any) -> None:
    if ledger.unreadable_lines:
        click.echo(
            f"costtune: warning: {ledger.unreadable_lines} unreadable line(s) of {ledger.path} skipped",
            err=True,
        )


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"costtune: error: {message}", err=True)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
