from __future__ import annotations

import io

from rich.console import Console

from costtune.core.cost import CostModel
from costtune.core.ledger import Ledger, LedgerSpec
from costtune.ray.progress import LiveProgress


def test_live_progress_shows_running_trials_spend_and_best() -> None:
    ledger = Ledger(LedgerSpec(metric="val_loss", mode="min", cost_model=CostModel()))
    ledger.record_result("a", epoch=3, seconds=3600, metrics={"val_loss": 0.4}, device_kind="gpu", devices=1)
    ledger.record_result("b", epoch=1, seconds=1800, metrics={"val_loss": 0.9}, device_kind="gpu", devices=1)
    ledger.end("b", status="TERMINATED", stop_reason="rung_pruned")
    buffer = io.StringIO()
    console = Console(file=buffer, width=120, force_terminal=False)
    console.print(LiveProgress(ledger, num_samples=10, console=console)._render())
    text = buffer.getvalue()
    assert "2/10 trials started, 1 ended" in text
    assert "spent $3.75" in text  # 1.5 A100-hours at $2.50
    assert "best val_loss 0.4" in text
    assert "a" in text and "running" in text


def test_piped_output_shows_a_line_per_trial_end_while_the_sweep_runs(tmp_path) -> None:
    """A CI job or `nohup` sees progress as it happens, not only when the sweep is over."""
    import json
    import os
    import subprocess
    import sys
    import time

    import yaml

    from tests.conftest import REPO

    config = {
        "name": "piped",
        "trainable": {"name": "tests.user_trainables:steady", "args": {"epoch_s": 0.05}},
        "metric": "loss",
        "max_epochs": 12,
        "num_samples": 4,
        "max_concurrent_trials": 1,
        "search_space": {"x": {"type": "uniform", "low": 0, "high": 1}},
        "searcher": {"type": "random"},
        "scheduler": {"type": "fifo"},
    }
    path = tmp_path / "piped.yaml"
    path.write_text(yaml.safe_dump(config))
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "costtune.cli",
            "sweep",
            str(path),
            "--output",
            str(tmp_path / "run"),
            "--json",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )
    assert driver.stderr is not None and driver.stdout is not None
    deadline = time.monotonic() + 240
    first_seen_running = None
    lines = []
    for line in driver.stderr:
        lines.append(line)
        if line.startswith("costtune: trial ") and first_seen_running is None:
            first_seen_running = driver.poll() is None
        if time.monotonic() > deadline:
            break
    summary = json.loads(driver.stdout.read())
    assert driver.wait(timeout=60) == 0, "".join(lines)[-2000:]
    ends = [line for line in lines if line.startswith("costtune: trial ")]
    assert len(ends) == 4
    assert first_seen_running, "the first trial's line came only after the sweep had ended"
    assert "completed after 12 epochs" in ends[0] and "1/4 trials ended" in ends[0]
    assert "4/4 trials ended" in ends[-1]
    assert summary["trials"] == 4 and summary["interrupted"] is False
    assert summary["total_cost_usd"] > 0


def test_progress_restored_by_a_resume_counts_from_the_resumed_ledger(tmp_path) -> None:
    """Tune pickles the progress callback when the sweep starts and unpickles that copy on
    --resume: it must count what the log holds since, on the ledger the sweep writes to."""
    from ray import cloudpickle as pickle  # what Tune pickles its callbacks with

    from costtune.ray.callbacks import LedgerCallback
    from costtune.ray.progress import LineProgress

    spec = LedgerSpec(metric="val_loss", mode="min", cost_model=CostModel())
    ledger = Ledger(spec, tmp_path)
    pickled = [pickle.dumps(LineProgress(ledger, 4)), pickle.dumps(LiveProgress(ledger, 4))]
    callback = pickle.dumps(LedgerCallback(ledger, hyperparameters=[]))
    # the first session runs on: two trials report, one ends
    ledger.record_result("a", epoch=2, seconds=3600, metrics={"val_loss": 0.4}, device_kind="gpu", devices=1)
    ledger.record_result("b", epoch=1, seconds=1800, metrics={"val_loss": 0.9}, device_kind="gpu", devices=1)
    ledger.end("b", status="TERMINATED", stop_reason="rung_pruned")
    # the resumed process unpickles them (and the ledger callback that writes)
    writer = pickle.loads(callback).ledger
    line, live = (pickle.loads(p) for p in pickled)
    assert line.ledger is writer and live.ledger is writer
    assert line._sweep() == "1/4 trials ended, 1 running, spent $3.75, best val_loss 0.4"
    writer.end("a", status="TERMINATED", stop_reason="completed")
    assert line._sweep().startswith("2/4 trials ended, 0 running")
    buffer = io.StringIO()
    Console(file=buffer, width=120, force_terminal=False).print(live._render())
    assert "2/4 trials started, 2 ended" in buffer.getvalue()
