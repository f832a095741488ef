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
        include_dashboard=False,
        logging_level="WARNING",
        log_to_driver=False,
        _temp_dir=str(tmp_path_factory.mktemp("ray")),
    )
    yield
    ray.shutdown()
