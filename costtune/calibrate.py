"""What an epoch costs on this machine, measured before a sweep: a short real probe sweep.

Feeds the pre-run estimate and the gate (``costtune estimate --calibrate``); the probe is a
real sweep of the config's first few configurations, metered like any other.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from costtune.core.config import SweepConfig
from costtune.core.ledger import Ledger
from costtune.errors import CosttuneError


@dataclass(frozen=True)
class Calibration:
    """Epoch times measured on this machine: the steady-state mean, the slowest steady epoch
    (for the worst case), and the start-up a fresh worker pays before its first epoch."""

    mean_seconds: float
    max_seconds: float
    startup_seconds: float
    samples: int


def calibrate_epoch_seconds(config: SweepConfig, trials: int = 4, epochs: int = 3) -> Calibration:
    """Seconds per epoch measured on this machine: a short real sweep of ``trials`` trials.

    The first configurations the sweep's own searcher would try run ``epochs`` epochs each
    without early stopping; the steady-state epoch time (epochs after the first, which pays
    for process and library warm-up) is averaged over them.
    """
    import tempfile

    epochs = max(1, min(epochs, config.max_epochs))
    probe = config.model_copy(
        update={
            "name": f"{config.name}-calibrate",
            "num_samples": 1 if config.searcher.type == "grid" else trials,
            "max_epochs": epochs,
            "scheduler": config.scheduler.model_copy(update={"type": "fifo"}),
            "approval": None,
        }
    )
    from costtune.sweep import run_sweep  # the probe is a sweep; sweep.py does not need this module

    with tempfile.TemporaryDirectory(prefix="costtune-calibrate-") as tmp:
        result = run_sweep(probe, Path(tmp) / "run", approved=True)
        measured = calibration_of(result.ledger)
    if measured is None:
        raise CosttuneError("calibration: the probe trials reported no epochs")
    return measured


def calibration_of(ledger: Ledger) -> Calibration | None:
    """Epoch times as a run metered them: each trial's epochs after its first (which pays
    the worker's warm-up) give the steady mean and the slowest; the first ones the start-up.
    ``None`` if no trial reported an epoch."""
    steps: list[float] = []
    firsts: list[float] = []
    for record in ledger.trials.values():
        seconds = [0.0, *(s for _, s, _ in record.metric_history)]
        diffs = [b - a for a, b in itertools.pairwise(seconds)]
        firsts.extend(diffs[:1])
        steps.extend(diffs[1:] if len(diffs) > 1 else diffs)
    if not steps:
        return None
    mean = sum(steps) / len(steps)
    return Calibration(mean, max(steps), max(0.0, max(firsts) - mean), len(steps))
