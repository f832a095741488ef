"""A sweep whose driver is killed with SIGKILL mid-run, resumed with `costtune sweep --resume`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from costtune.sweep import resume_sweep
from tests.conftest import SMALL

pytestmark = pytest.mark.ray
REPO = Path(__file__).resolve().parent.parent


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines() if line.strip()]


def test_sigkilled_sweep_resumes_without_losing_or_double_counting(ray_session, tmp_path) -> None:
    config = {**SMALL, "name": "killed", "max_epochs": 9, "num_samples": 6}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    run = tmp_path / "run"
    driver = subprocess.Popen(
        [sys.executable, "-m", "costtune.cli", "sweep", str(path), "--output", str(run), "--no-progress"],
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (run / "ledger.jsonl").exists() and sum(e["event"] == "end" for e in _events(run)) >= 2:
            break
        time.sleep(0.2)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and the Ray instance it started
    driver.wait()
    before = _events(run)
    ended_before = {e["trial_id"] for e in before if e["event"] == "end"}
    assert ended_before, "the sweep was killed before any trial ended"
    time.sleep(3)  # downtime that must not be charged

    resumed_at = time.time()
    result = resume_sweep(run)

    after = _events(run)
    assert after[: len(before)] == before  # the ledger was continued, not rewritten
    frame = result.trials.set_index("trial_id")
    assert frame.index.is_unique
    # a trial started after Tune's last snapshot is invisible to the restored experiment:
    # it is closed as interrupted with what it ran charged, and the searcher fills its place
    live = frame[frame["stop_reason"] != "interrupted"]
    assert len(live) == 6
    assert set(frame["stop_reason"]) <= {"rung_pruned", "completed", "interrupted"}
    ends = Counter(e["trial_id"] for e in after if e["event"] == "end")
    for trial_id in ended_before:
        assert ends[trial_id] == 1  # a trial finished before the kill was not run again
    for trial_id in frame.index:
        epochs = sorted({e["epoch"] for e in after if e["event"] == "result" and e["trial_id"] == trial_id})
        assert epochs == list(range(1, frame.loc[trial_id, "epochs"] + 1))  # nothing lost
    increments = [e["increment"] for e in after if e["event"] == "result"]
    # downtime not charged: every epoch charged after the resume ran after the resume began
    # (an epoch charged across the downtime would be ≥ 3 s longer than that window allows)
    for e in after[len(before) :]:
        if e["event"] == "result":
            assert e["increment"] <= e["time"] - resumed_at + 1.0, e
    assert frame["seconds"].sum() == pytest.approx(sum(increments))  # every epoch charged once
    assert result.summary["total_cost_usd"] == pytest.approx(frame["cost_usd"].sum())
    assert json.loads((run / "summary.json").read_text())["trials"] == len(frame)
