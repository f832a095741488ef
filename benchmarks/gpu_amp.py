"""AMP on a real GPU: speed, memory and dollars per epoch of the built-in models.

One command: `.venv/bin/python benchmarks/gpu_amp.py [--out amp.csv] [--price 2.50]`.
Auto-detects CUDA: full sizes there (loads the GPU), tiny sizes on CPU (a smoke test).
For the Transformer encoder and the CNN of `costtune.trainables.models`, it measures
fp32 / bf16 / fp16 (GradScaler): training samples per second, peak GPU memory (CUDA) and
the memory held from forward to backward (activations), and dollars per epoch at the price;
activation checkpointing on and off; gradient accumulation 4 × 16 against batch
64 (memory, time, and whether the loss trajectories agree). Prints one table and writes it as CSV. With
NVML available it also samples GPU utilisation while it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from costtune.trainables.amp import accumulate_gradients, autocast
from costtune.trainables.models import BlockStack, build_model

SIZES = {
    # name: (image_shape, width, depth, heads, batch)
    "cuda": {"transformer": ((256, 256), 1024, 8, 16, 64), "cnn": ((64, 64), 128, 8, 1, 64)},
    "cpu": {"transformer": ((8, 8), 32, 2, 4, 32), "cnn": ((8, 8), 16, 2, 1, 32)},
}
EPOCH_SAMPLES = 1_000_000  # what "one epoch" means for the dollars column


@dataclass
class Row:
    device: str
    model: str
    precision: str
    variant: str
    batch: int
    samples_per_s: float
    peak_mem_mb: float
    activation_mb: float
    usd_per_epoch: float
    note: str = ""


def make(
    name: str, device: torch.device, shape: tuple[int, int], width: int, depth: int, heads: int
) -> BlockStack:
    torch.manual_seed(0)
    model = build_model(
        name,
        in_features=shape[0] * shape[1],
        image_shape=shape,
        n_classes=10,
        width=width,
        depth=depth,
        heads=heads,
        dropout=0.0,
    )
    return model.to(device)


def batch_of(n: int, shape: tuple[int, int], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, shape[0] * shape[1], generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    return x.to(device), y.to(device)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def activation_mb(model: nn.Module, x: torch.Tensor, y: torch.Tensor, precision: str) -> float:
    """Memory a training step holds from forward to backward (the activations), in MB.

    CUDA: the allocator's bytes after forward less before (a tensor two autograd nodes save
    counts once; autocast's low-precision weight copies count). Elsewhere: the bytes autograd
    saves (a saved-tensor hook).
    """
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    model.train()
    cuda = x.device.type == "cuda"
    if cuda:
        sync(x.device)
        before = torch.cuda.memory_allocated()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast(x.device, precision):
        loss = nn.functional.cross_entropy(model(x), y)
    if cuda:
        sync(x.device)
        total = torch.cuda.memory_allocated() - before
    loss.float().backward()
    model.zero_grad(set_to_none=True)
    return total / 2**20


def train_speed(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, precision: str, steps: int, accumulation: int = 1
) -> tuple[float, float, list[float]]:
    """(samples/s, peak MB, losses) over ``steps`` optimizer steps after two warm-up steps."""
    device = x.device
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16" and device.type == "cuda")
    losses: list[float] = []

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        losses.append(accumulate_gradients(model, x, y, accumulation, precision, scaler))
        scaler.step(optimizer)
        scaler.update()

    model.train()
    for _ in range(2):
        step()
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    elapsed = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else math.nan
    return steps * x.shape[0] / elapsed, peak, losses[2:]


@contextlib.contextmanager
def gpu_utilisation() -> Iterator[list[float]]:
    """Samples NVML utilisation in the background (empty list when NVML is absent)."""
    readings: list[float] = []
    try:
        from costtune.idle import NvmlSampler, NvmlUnavailable

        sampler = NvmlSampler()
    except (ImportError, NvmlUnavailable):
        yield readings
        return
    done = threading.Event()

    def run() -> None:
        while not done.is_set():
            readings.extend(g.utilization_pct for g in sampler.sample().gpus)
            done.wait(0.2)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield readings
    finally:
        done.set()
        thread.join()
        sampler.close()


def measure(device: torch.device, steps: int, price: float) -> list[Row]:
    rows: list[Row] = []

    def usd(samples_per_s: float) -> float:
        return EPOCH_SAMPLES / samples_per_s / 3600 * price

    precisions = ["fp32", "bf16", "fp16"]
    for name, (shape, width, depth, heads, batch) in SIZES[device.type].items():
        x, y = batch_of(batch, shape, device)
        for precision in precisions:
            for checkpointing in (False, True):
                model = make(name, device, shape, width, depth, heads)
                model.checkpointing = checkpointing
                act = activation_mb(model, x, y, precision)
                speed, peak, _ = train_speed(model, x, y, precision, steps)
                rows.append(
                    Row(
                        device.type,
                        name,
                        precision,
                        "checkpointing" if checkpointing else "plain",
                        batch,
                        speed,
                        peak,
                        act,
                        usd(speed),
                    )
                )
                del model
                if device.type == "cuda":
                    torch.cuda.empty_cache()
        # gradient accumulation: 4 × (batch/4) against one batch, same init, fp32
        big = make(name, device, shape, width, depth, heads)
        small = make(name, device, shape, width, depth, heads)
        speed_big, peak_big, loss_big = train_speed(big, x, y, "fp32", steps, accumulation=1)
        speed_acc, peak_acc, loss_acc = train_speed(small, x, y, "fp32", steps, accumulation=4)
        worst = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(loss_big, loss_acc, strict=True))
        agree = f"losses agree within {worst:.1e} (relative)"
        rows.append(
            Row(
                device.type,
                name,
                "fp32",
                f"batch {batch}",
                batch,
                speed_big,
                peak_big,
                math.nan,
                usd(speed_big),
                agree,
            )
        )
        rows.append(
            Row(
                device.type,
                name,
                "fp32",
                f"4 x {batch // 4} accumulated",
                batch,
                speed_acc,
                peak_acc,
                math.nan,
                usd(speed_acc),
                agree,
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("amp.csv"))
    parser.add_argument("--steps", type=int, default=None, help="timed steps per measurement")
    parser.add_argument("--price", type=float, default=2.50, help="USD per GPU-hour (default: A100)")
    args = parser.parse_args()
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps: must be at least 1, got {args.steps}")
    if not (math.isfinite(args.price) and args.price > 0):
        parser.error(f"--price: must be a positive number, got {args.price}")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    steps = args.steps or (20 if device.type == "cuda" else 3)
    with gpu_utilisation() as util:
        rows = measure(device, steps, args.price)
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    print(
        f"device: {name}; {steps} timed steps; ${args.price}/device-hour; epoch = {EPOCH_SAMPLES:,} samples"
    )
    if util:
        print(f"NVML utilisation during the run: mean {sum(util) / len(util):.0f}%, max {max(util):.0f}%")
    print(
        f"{'model':12}{'precision':10}{'variant':26}{'samples/s':>12}{'peak MB':>10}"
        f"{'act MB':>9}{'$/epoch':>10}  note"
    )
    for r in rows:
        print(
            f"{r.model:12}{r.precision:10}{r.variant:26}{r.samples_per_s:>12,.0f}{r.peak_mem_mb:>10.0f}"
            f"{r.activation_mb:>9.1f}{r.usd_per_epoch:>10.3f}  {r.note}"
        )
    with args.out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
