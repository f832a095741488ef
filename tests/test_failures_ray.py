"""Failing and diverging trials: the sweep goes on, and the books stay exact."""

from __future__ import annotations

import os

import pytest

from costtune.core.config import parse_config
from costtune.errors import ConfigError, SweepFailed
from costtune.sweep import run_sweep
from tests.conftest import REPO, SMALL

pytestmark = pytest.mark.ray


def test_raising_and_nan_trials_end_with_their_reason_and_cost(ray_session, tmp_path) -> None:
    config = parse_config(
        {
            "name": "failures",
            "trainable": {"name": "tests.user_trainables:diverges_or_raises"},
            "metric": "loss",
            "max_epochs": 6,
            "num_samples": 1,  # grid: each of the three values once
            "search_space": {"x": {"type": "choice", "values": [0.1, 0.5, 0.9]}},
            "searcher": {"type": "grid"},
            "scheduler": {"type": "fifo"},
            "approval": {
                "justification": "three cases",
                "estimated_resources": "seconds",
                "stop_conditions": "6 epochs",
                "approver": "tests",
            },
        }
    )
    result = run_sweep(config, tmp_path / "run")
    frame = result.trials.set_index("hp.x")
    assert frame.loc[0.1, "status"] == "ERROR" and frame.loc[0.1, "stop_reason"] == "error"
    assert frame.loc[0.1, "epochs"] == 1 and frame.loc[0.1, "cost_usd"] > 0  # what it ran is charged
    assert frame.loc[0.9, "stop_reason"] == "nan_metric" and frame.loc[0.9, "epochs"] == 3
    assert frame.loc[0.5, "stop_reason"] == "completed" and frame.loc[0.5, "epochs"] == 6
    assert result.summary["total_cost_usd"] == pytest.approx(frame["cost_usd"].sum())


def _one_trial_per_value(trainable: str, metric: str) -> dict:
    return {
        "name": "broken",
        "trainable": {"name": f"tests.user_trainables:{trainable}"},
        "metric": metric,
        "max_epochs": 6,
        "num_samples": 2,
        "search_space": {"x": {"type": "uniform", "low": 0.0, "high": 1.0}},
        "searcher": {"type": "random"},
        "scheduler": {"type": "fifo"},
    }


def test_a_metric_the_trainable_never_reports_stops_the_sweep_with_one_line(ray_session, tmp_path) -> None:
    with pytest.raises(SweepFailed) as failed:
        run_sweep(parse_config(_one_trial_per_value("reports_another_metric", "val_loss")), tmp_path / "run")
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith("metric: ") and "'val_loss'" in message
    assert "loss, accuracy" in message  # what it did report, to pick from
    assert (tmp_path / "run" / "summary.json").is_file()  # the books are written all the same


def test_every_trial_failing_is_a_failure_with_the_first_error_in_one_line(ray_session, tmp_path) -> None:
    with pytest.raises(SweepFailed) as failed:
        run_sweep(parse_config(_one_trial_per_value("always_raises", "loss")), tmp_path / "run")
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith("every trial failed (2 of 2): FileNotFoundError: no such shard")
    assert "user_trainables.py" in message and "in always_raises" in message
    result = failed.value.result
    assert result is not None and set(result.trials["status"]) == {"ERROR"}


def test_cli_exits_1_on_a_failed_sweep_with_no_traceback(tmp_path) -> None:
    import subprocess
    import sys

    import yaml

    config = tmp_path / "broken.yaml"
    config.write_text(yaml.safe_dump(_one_trial_per_value("always_raises", "loss")))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "costtune.cli",
            "sweep",
            str(config),
            "--output",
            str(tmp_path / "run"),
            "--no-progress",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "costtune: error: every trial failed (2 of 2): FileNotFoundError"
    )


@pytest.fixture
def tiny_disk(tmp_path):
    """A 600 KiB tmpfs: a real full disk, mounted where the tests run as root."""
    import subprocess

    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_stops_the_sweep_in_one_line_and_keeps_every_ledger_line(ray_session, tiny_disk) -> None:
    import json

    config = parse_config({**SMALL, "name": "full", "num_samples": 12})
    run = tiny_disk / "run"
    with pytest.raises(SweepFailed) as failed:
        run_sweep(config, run)
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith(f"disk full: the filesystem holding {run}")
    lines = (run / "ledger.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["trial_id"] for line in lines)  # no torn line
    assert not list(run.glob(".*.tmp"))  # no half-written table left behind
    # and a new sweep on the full disk is refused before anything starts
    with pytest.raises(ConfigError, match=r"^output: disk full"):
        run_sweep(config, tiny_disk / "second")
