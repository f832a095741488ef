"""Multi-node: a sweep on a head and two worker nodes (one machine), and a node lost mid-sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray
REPO = Path(__file__).resolve().parent.parent


def _run(tmp_path: Path, *args: str, script: str = "tests/cluster_sweep.py") -> Path:
    """A cluster script in a process of its own (its cluster and Ray instance with it)."""
    proc = subprocess.run(
        [sys.executable, script, str(tmp_path), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp_path


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines() if line.strip()]


def test_a_worker_node_lost_mid_sweep_still_completes_with_consistent_books(tmp_path) -> None:
    out = _run(tmp_path, "remove")
    assert (out / "removed").exists(), "the worker node was never removed"
    removed = (out / "removed").read_text()
    traces = {f.stem: f.read_text().split() for f in (out / "trace").glob("*.log")}
    assert len(traces) == 2  # trials ran on both worker nodes
    lost = {x for x in traces[removed][::2]}
    survivor = next(node for node in traces if node != removed)
    assert lost <= set(traces[survivor][::2])  # the lost node's trials restarted on the other one
    events = _events(out / "run")
    ends = [e for e in events if e["event"] == "end"]
    assert sorted(e["stop_reason"] for e in ends) == ["completed"] * 4  # every trial finished
    results = [e for e in events if e["event"] == "result"]
    per_trial = Counter(e["trial_id"] for e in results)
    epochs_seen = {t: {e["epoch"] for e in results if e["trial_id"] == t} for t in per_trial}
    # nothing lost: every epoch of every trial reported (a restart may renumber one more)
    assert all(seen >= set(range(1, 13)) for seen in epochs_seen.values()), epochs_seen
    assert sum(per_trial.values()) >= 4 * 12
    summary = json.loads((out / "summary.json").read_text())
    charges = [e for e in events if e["event"] == "charge"]
    lost = [e for e in charges if e["why"] == "lost_work"]  # the unreported partial epochs
    assert lost and len({e["trial_id"] for e in lost}) == len(lost)  # once per lost trial
    # the rest: what trials held untimed (start-up, hand-offs, shutdown), charged as they let go
    assert all(e["why"] in ("unmetered", "shutdown") for e in charges if e not in lost)
    charged = sum(e["increment"] for e in results) + sum(e["seconds"] for e in charges)
    # every reported epoch once, re-runs and the work lost with the node included
    assert summary["total_device_hours"] == pytest.approx(charged / 3600)
    assert summary["trials"] == 4


def test_a_mixed_pool_bills_each_trial_at_the_price_of_the_gpu_it_ran_on(tmp_path) -> None:
    """Two trials, one on an A100 node and one on a T4 node: each is billed at its own type's
    price by the ledger, and the per-trial cap (the governor's meter) prices them the same way:
    the trial on the dear A100 is capped, the one on the cheap T4 finishes."""
    _run(tmp_path, script="tests/mixed_pool_sweep.py")
    import pandas as pd

    trials = pd.read_csv(tmp_path / "run" / "trials.csv").set_index("device")
    assert sorted(trials.index) == ["A100", "T4"]
    per_second = {"A100": 1.0, "T4": 0.01}
    for device, row in trials.iterrows():
        seconds = row["device_hours"] * 3600
        assert row["cost_usd"] == pytest.approx(seconds * per_second[str(device)], rel=1e-6)
        assert row["gpu_hours"] == pytest.approx(row["device_hours"])
    assert trials.loc["A100", "stop_reason"] == "trial_cost_cap"
    assert 1.5 <= trials.loc["A100", "cost_usd"] < 2.5
    assert trials.loc["T4", "stop_reason"] == "completed" and trials.loc["T4", "epochs"] == 12
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["total_cost_usd"] == pytest.approx(trials["cost_usd"].sum(), rel=1e-6)
