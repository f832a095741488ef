from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One local Ray instance for the whole test session (start-up costs ~3 s)."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    ray.init(
        num_cpus=2,
        num_gpus=1,  # a declared (not real) GPU, so GPU trials can be scheduled and billed
        include_dashboard=False,
        logging_level="WARNING",
        log_to_driver=False,
        _temp_dir=str(tmp_path_factory.mktemp("ray")),
    )
    yield
    ray.shutdown()


SMALL = {
    "name": "small",
    "trainable": {"name": "amp", "args": {"model": "mlp", "width": 32, "depth": 1}},
    "max_epochs": 9,
    "num_samples": 6,
    "max_concurrent_trials": 2,
    "seed": 1,
    "search_space": {
        "lr": {"type": "loguniform", "low": 1e-4, "high": 3e-2},
        "batch_size": {"type": "choice", "values": [64, 128]},
    },
    "searcher": {"type": "optuna", "n_startup_trials": 3},
    "scheduler": {"grace_epochs": 1, "eta": 3, "brackets": 1},
    "cost": {"prices": {"cpu": 0.5}},
}


@pytest.fixture(scope="session")
def small_run(ray_session, tmp_path_factory):
    """A real sweep: CostAwareHyperBand + Optuna TPE + the AMP trainable, 6 trials on digits."""
    from costtune.core.config import parse_config
    from costtune.sweep import run_sweep

    return run_sweep(parse_config(SMALL), tmp_path_factory.mktemp("sweep") / "hyperband")
