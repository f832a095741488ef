"""The benchmark scripts run (CPU smoke sizes); their figures belong in benchmarks/RESULTS.md."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_gpu_amp_benchmark_smoke_on_cpu(tmp_path) -> None:
    out = tmp_path / "amp.csv"
    run = subprocess.run(
        [sys.executable, "benchmarks/gpu_amp.py", "--steps", "1", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = list(csv.DictReader(out.open()))
    variants = {(r["model"], r["precision"], r["variant"]) for r in rows}
    for model in ("transformer", "cnn"):
        for precision in ("fp32", "bf16", "fp16"):
            assert (model, precision, "plain") in variants
            assert (model, precision, "checkpointing") in variants
    by = {(r["model"], r["precision"], r["variant"]): r for r in rows}
    for model in ("transformer", "cnn"):
        plain = float(by[(model, "fp32", "plain")]["activation_mb"])
        ckpt = float(by[(model, "fp32", "checkpointing")]["activation_mb"])
        assert ckpt < plain  # checkpointing saves activations
        assert float(by[(model, "fp32", "plain")]["samples_per_s"]) > 0
    accumulated = [r for r in rows if "accumulated" in r["variant"]]
    assert len(accumulated) == 2 and all("losses agree within" in r["note"] for r in accumulated)
    assert "samples/s" in run.stdout
