"""Failing and diverging trials: the sweep goes on, and the books stay exact."""

from __future__ import annotations

import pytest

from costtune.config import parse_config
from costtune.sweep import run_sweep

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
