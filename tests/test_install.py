"""An installed costtune, away from its repository: the wheel carries the embedded default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.ray


def test_the_wheel_runs_the_embedded_default_outside_the_repository(tmp_path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("costtune-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "costtune/examples/digits.yaml" in names and "costtune/search_spaces/mlp.yaml" in names
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    elsewhere = tmp_path / "elsewhere"  # no experiments/ or search_spaces/ around
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "RAY_AUTH_MODE": "disabled"}
    where = subprocess.run(
        [sys.executable, "-c", "import costtune; print(costtune.__file__)"],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.strip().startswith(str(site))  # the wheel's copy, not the checkout's
    done = subprocess.run(
        [sys.executable, "-m", "costtune.cli", "sweep", "--example", "digits", "--output", "run", "--json"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["trials"] == 24 and summary["total_cost_usd"] > 0
    assert (elsewhere / "run" / "ledger.jsonl").is_file()
