"""costtune report / compare on real runs, read back from their directories alone."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from costtune.cli import main
from costtune.config import parse_config
from costtune.report import build_report, compare_runs, report_html
from costtune.run import load_run
from costtune.sweep import run_sweep
from tests.conftest import SMALL

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def random_full_run(ray_session, tmp_path_factory):
    """The same space, random search, no stopping: what teams run today."""
    config = {**SMALL, "searcher": {"type": "random"}, "scheduler": {"type": "fifo"}}
    return run_sweep(parse_config(config), tmp_path_factory.mktemp("sweep") / "random_full")


def test_report_on_a_finished_sweep(small_run) -> None:
    result = CliRunner().invoke(main, ["report", str(small_run.output_dir), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    summary = json.loads((small_run.output_dir / "summary.json").read_text())
    assert data["summary"]["total_cost_usd"] == pytest.approx(summary["total_cost_usd"])
    assert sum(data["spend_by_stop_reason"].values()) == pytest.approx(summary["total_cost_usd"])
    assert sum(data["spend_by_epoch_band"].values()) == pytest.approx(summary["total_cost_usd"])
    assert set(data["spend_by_epoch_band"]) == {"1-1", "2-3", "4-9"}  # rungs at 1 and 3, max 9
    assert data["elbow"]["trial_id"] == summary["best_trial_id"]
    assert len(data["trials"]) == 6


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_report_formats(small_run, fmt) -> None:
    result = CliRunner().invoke(
        main, ["report", str(small_run.output_dir), "--format", fmt, "--sort", "cost"]
    )
    assert result.exit_code == 0, result.output
    if fmt == "csv":
        lines = result.output.strip().splitlines()
        assert lines[0].startswith("trial_id,") and len(lines) == 7
        costs = [float(line.split(",")[lines[0].split(",").index("cost_usd")]) for line in lines[1:]]
        assert costs == sorted(costs, reverse=True)
    else:
        assert "elbow of the best trial" in result.output
        assert "spend by stop reason" in result.output


def test_report_on_an_interrupted_sweep(small_run, tmp_path) -> None:
    """What a killed driver leaves: the ledger cut mid-run, no trial-end lines after the cut."""
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(small_run.output_dir / "config.yaml", partial)
    lines = (small_run.output_dir / "ledger.jsonl").read_text().splitlines(keepends=True)
    # cut just before the first trial-end line: that trial has results and no end
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["event"] == "end")
    (partial / "ledger.jsonl").write_text("".join(lines[:cut]) + lines[cut][:20])
    result = CliRunner().invoke(main, ["report", str(partial)])
    assert result.exit_code == 0, result.output
    assert "interrupted" in result.output
    report = build_report(load_run(partial))
    assert report.summary["total_cost_usd"] < small_run.summary["total_cost_usd"]


def test_report_of_a_directory_that_is_no_run_exits_2(tmp_path) -> None:
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 2
    assert "is not a costtune run directory" in result.output


def test_html_report_is_self_contained(small_run, tmp_path) -> None:
    page = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", str(small_run.output_dir), "--html", str(page)])
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", text)
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    assert len(images) == 4
    for data in images:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert small_run.summary["best_trial_id"] in text


def test_html_report_opens_in_headless_chromium(small_run, tmp_path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian package 'chromium')")
    page = tmp_path / "report.html"
    page.write_text(report_html(build_report(load_run(small_run.output_dir))))
    shot = tmp_path / "shot.png"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert "costtune report" in dom.stdout
    assert dom.stdout.count("<img") == 4
    subprocess.run(
        [chromium, *flags, f"--screenshot={shot}", "--window-size=1200,2400", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.stat().st_size > 10_000


def test_compare_hyperband_with_random_search_without_stopping(small_run, random_full_run) -> None:
    frame = compare_runs([load_run(random_full_run.output_dir), load_run(small_run.output_dir)])
    full, hb = frame.iloc[0], frame.iloc[1]
    assert full["epochs"] == 6 * 9  # no stopping: every trial ran to max_epochs
    assert hb["epochs"] < full["epochs"]
    # (on runs this small a fresh worker's warm-up can outweigh the saved epochs, so the
    # ratio's direction is not asserted; that it is the ratio of the metered totals is)
    assert hb["cost_ratio"] == pytest.approx(hb["total_cost_usd"] / full["total_cost_usd"])
    assert full["cost_ratio"] == 1.0
    # the default target is the worse run's best, which both runs reached
    assert frame["target"].iloc[0] == max(frame["best_val_loss"])
    assert frame["cost_to_target_usd"].notna().all()


def test_compare_cli_prints_both_runs_and_the_ratio(small_run, random_full_run) -> None:
    result = CliRunner().invoke(
        main, ["compare", str(random_full_run.output_dir), str(small_run.output_dir), "--format", "csv"]
    )
    assert result.exit_code == 0, result.output
    from io import StringIO

    frame = pd.read_csv(StringIO(result.output))
    assert list(frame["run"]) == [Path(random_full_run.output_dir).name, Path(small_run.output_dir).name]
    assert frame["cost_ratio"].iloc[0] == 1.0
    single = CliRunner().invoke(main, ["compare", str(small_run.output_dir)])
    assert single.exit_code == 2


@pytest.mark.parametrize("width", [80, 100])
def test_the_final_table_fits_the_terminal_without_squeezing_a_cell(small_run, width) -> None:
    """In an 80-column terminal every cell read "0.…"; the hyperparameters now move to
    tables of their own (as many as fit), in the same trial order."""
    import io

    from rich.console import Console

    from costtune.report import print_report

    frame = small_run.trials.copy()
    for i in range(8):  # a wide search space
        frame[f"hp.extra_parameter_{i}"] = 0.000123 * (i + 1)
    buffer = io.StringIO()
    print_report(frame, small_run.summary, Console(file=buffer, width=width, force_terminal=False))
    lines = buffer.getvalue().splitlines()
    assert all(len(line) <= width for line in lines)
    table_text = buffer.getvalue().split("trials:")[0]
    assert "…" not in table_text.replace("… and", "")  # no cell cut short
    assert "Hyperparameters (same order)" in table_text
    for trial_id in frame["trial_id"]:
        assert table_text.count(trial_id) >= 2  # in the cost table and beside its hyperparameters
    wide = io.StringIO()
    print_report(small_run.trials, small_run.summary, Console(file=wide, width=250, force_terminal=False))
    assert "Hyperparameters" not in wide.getvalue()  # one table where it fits
