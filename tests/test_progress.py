from __future__ import annotations

import io

from rich.console import Console

from costtune.cost import CostModel
from costtune.ledger import Ledger, LedgerSpec
from costtune.progress import LiveProgress


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
