"""Trainables for ``benchmarks/gpu_sweep.py``'s idle-GPU check (a Ray Tune function trainable).

``hold_gpu``: reports ``loss`` every ``report_s`` seconds for ``seconds`` seconds while
holding a CUDA context; with ``mode: busy`` it keeps the GPU busy with matrix products in
between, with ``mode: idle`` it sleeps (a trial stuck on its data, say). Like the built-in
trainable it reports the GPUs Ray gave it (``gpu_uuids``).
"""

from __future__ import annotations

import time
from typing import Any

import torch
from ray import tune

from costtune.idle import visible_gpu_uuids


def hold_gpu(config: dict[str, Any]) -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n = 4096 if device.type == "cuda" else 256  # a CPU smoke test keeps its reports coming
    a = torch.randn(n, n, device=device)
    gpus = {"gpu_uuids": ",".join(visible_gpu_uuids())} if device.type == "cuda" else {}
    start, step = time.monotonic(), 0
    while time.monotonic() - start < float(config["seconds"]):
        until = time.monotonic() + float(config["report_s"])
        while time.monotonic() < until:
            if config["mode"] == "busy":
                a = torch.tanh(a @ a / n**0.5)
                if device.type == "cuda":
                    torch.cuda.synchronize()
            else:
                time.sleep(0.1)
        step += 1
        tune.report({"loss": 1.0 / step, **gpus})
