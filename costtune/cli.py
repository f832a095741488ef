"""The ``costtune`` command: a thin shell over the Python API.

Exit codes: 0 success, 1 a sweep ran but failed, 2 invalid input (nothing was started).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from costtune.errors import ConfigError, CosttuneError

EXIT_FAILED = 1
EXIT_USAGE = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="costtune")
def main() -> None:
    """Cost-aware hyperparameter search on Ray Tune: every GPU-dollar of a sweep metered.

    \b
    Start with the embedded default (digits, CPU, a few minutes):
      costtune sweep experiments/digits.yaml
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


def _fail(message: str, code: int) -> None:
    click.echo(f"costtune: error: {message}", err=True)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
