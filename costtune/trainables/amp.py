"""The built-in AMP PyTorch trainable: mixed precision, gradient accumulation,
activation checkpointing, a checkpoint every epoch.

``train_amp(config)`` is a Ray Tune function trainable. ``run_training`` is the same loop
with the reporting function passed in, so it also runs (and is tested) without Ray.

Config keys (hyperparameters and fixed trainable args alike):
    model: ``mlp`` | ``cnn`` | ``transformer``; dataset: ``digits``.
    precision: ``fp32`` | ``bf16`` | ``fp16``. bf16/fp16 use ``torch.autocast``; fp16 on
        CUDA also uses a ``GradScaler`` (bf16 has fp32's range and needs none).
    batch_size: the effective batch; ``accumulation_steps``: micro-batches per optimizer
        step (micro-batch = batch_size / accumulation_steps), gradients equal to the
        large-batch ones.
    activation_checkpointing: recompute each block's activations in backward.
    lr, weight_decay, optimizer (``adamw`` | ``sgd``), momentum, width, depth, dropout,
    heads, max_epochs, seed, threads.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from costtune.core.config import CHECKPOINTING_MODES
from costtune.errors import ConfigError
from costtune.idle import visible_gpu_uuids
from costtune.trainables.data import load_dataset
from costtune.trainables.models import BlockStack, build_model

PRECISIONS: dict[str, torch.dtype | None] = {
    "fp32": None,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}
STATE_FILE = "state.pt"

Report = Callable[[dict[str, float], dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Settings:
    precision: str = "fp32"
    batch_size: int = 64
    accumulation_steps: int = 1
    activation_checkpointing: bool = False
    lr: float = 1e-3
    weight_decay: float = 0.0
    optimizer: str = "adamw"
    momentum: float = 0.9
    max_epochs: int = 50
    seed: int = 0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        s = cls(
            precision=str(config.get("precision", "fp32")),
            batch_size=int(config.get("batch_size", 64)),
            accumulation_steps=int(config.get("accumulation_steps", 1)),
            activation_checkpointing=checkpointing_mode(config.get("activation_checkpointing", False)),
            lr=float(config.get("lr", 1e-3)),
            weight_decay=float(config.get("weight_decay", 0.0)),
            optimizer=str(config.get("optimizer", "adamw")),
            momentum=float(config.get("momentum", 0.9)),
            max_epochs=int(config.get("max_epochs", 50)),
            seed=int(config.get("seed", 0)),
        )
        if s.precision not in PRECISIONS:
            raise ConfigError(
                f"trainable.args.precision: must be one of {sorted(PRECISIONS)}, got {s.precision!r}"
            )
        if s.batch_size < 1 or s.accumulation_steps < 1 or s.batch_size < s.accumulation_steps:
            raise ConfigError(
                "trainable.args.accumulation_steps: need 1 <= accumulation_steps <= batch_size, "
                f"got {s.accumulation_steps} with batch_size {s.batch_size}"
            )
        if s.optimizer not in ("adamw", "sgd"):
            raise ConfigError(f"trainable.args.optimizer: must be 'adamw' or 'sgd', got {s.optimizer!r}")
        if not (math.isfinite(s.lr) and s.lr > 0):
            raise ConfigError(f"lr: must be a finite number > 0, got {s.lr!r}")
        return s


def checkpointing_mode(value: Any) -> bool:
    """``activation_checkpointing`` as a flag (``"false"`` is no, as YAML's ``false``); else one line."""
    if isinstance(value, bool):
        return value
    mode = CHECKPOINTING_MODES.get(str(value).strip().lower())
    if mode is not None:
        return mode
    raise ConfigError(f"trainable.args.activation_checkpointing: must be true or false, got {value!r}")


def autocast(device: torch.device, precision: str) -> torch.autocast:
    dtype = PRECISIONS[precision]
    return torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None)


def accumulate_gradients(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    accumulation_steps: int,
    precision: str = "fp32",
    scaler: torch.amp.GradScaler | None = None,
) -> float:
    """Backward one effective batch as ``accumulation_steps`` micro-batches.

    Each micro-batch contributes sum-of-losses / effective batch size, so the accumulated
    gradient equals the gradient of the mean loss over the whole batch, also when the
    micro-batches are of unequal size. Returns that mean loss.
    """
    n = x.shape[0]
    total = 0.0
    for xb, yb in zip(x.tensor_split(accumulation_steps), y.tensor_split(accumulation_steps), strict=True):
        if xb.shape[0] == 0:
            continue
        with autocast(x.device, precision):
            loss = nn.functional.cross_entropy(model(xb), yb, reduction="sum") / n
        (scaler.scale(loss) if scaler is not None else loss).backward()
        total += float(loss.detach())
    return total


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, precision: str) -> tuple[float, float]:
    """Validation cross-entropy and accuracy (logits in fp32 for the loss)."""
    model.eval()
    with autocast(x.device, precision):
        logits = model(x)
    loss = nn.functional.cross_entropy(logits.float(), y).item()
    accuracy = (logits.argmax(dim=1) == y).float().mean().item()
    return loss, accuracy


def apply_optimizer_settings(optimizer: torch.optim.Optimizer, s: Settings) -> None:
    """This trial's lr, weight decay (and SGD momentum) on every parameter group.

    The pattern for any trainable that resumes from a checkpoint another trial wrote (PBT):
    load the optimizer's state, then set the hyperparameters of the config that now runs.
    """
    for group in optimizer.param_groups:
        group["lr"] = s.lr
        group["weight_decay"] = s.weight_decay
        if "momentum" in group:
            group["momentum"] = s.momentum


def run_training(
    config: Mapping[str, Any],
    report: Report,
    start_state: dict[str, Any] | None = None,
    device: torch.device | None = None,
) -> BlockStack:
    """Train for ``max_epochs`` epochs, calling ``report(metrics, state)`` after each.

    ``state`` holds what a checkpoint needs (model, optimizer, scaler, epoch); passing it
    back as ``start_state`` resumes after that epoch.
    """
    s = Settings.from_config(config)
    device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(s.seed)
    data = load_dataset(str(config.get("dataset", "digits")))
    model = _model_of(config).to(device)
    model.checkpointing = s.activation_checkpointing
    if s.optimizer == "adamw":
        optimizer: torch.optim.Optimizer = torch.optim.AdamW(
            model.parameters(), lr=s.lr, weight_decay=s.weight_decay
        )
    else:
        optimizer = torch.optim.SGD(
            model.parameters(), lr=s.lr, momentum=s.momentum, weight_decay=s.weight_decay
        )
    scaler = torch.amp.GradScaler(device.type, enabled=s.precision == "fp16" and device.type == "cuda")
    first_epoch = 1
    if start_state is not None:
        model.load_state_dict(start_state["model"])
        optimizer.load_state_dict(start_state["optimizer"])
        # load_state_dict brings the donor's lr, weight decay and momentum back with its
        # moments; a PBT clone must train at its own (explored) settings, so set them again
        apply_optimizer_settings(optimizer, s)
        scaler.load_state_dict(start_state["scaler"])
        first_epoch = int(start_state["epoch"]) + 1

    x_tr = torch.as_tensor(data.x_train, device=device)
    y_tr = torch.as_tensor(data.y_train, device=device)
    x_va = torch.as_tensor(data.x_val, device=device)
    y_va = torch.as_tensor(data.y_val, device=device)
    for epoch in range(first_epoch, s.max_epochs + 1):
        model.train()
        order = torch.as_tensor(np.random.default_rng([s.seed, epoch]).permutation(len(x_tr)), device=device)
        train_loss, seen = 0.0, 0
        for batch in order.split(s.batch_size):
            optimizer.zero_grad(set_to_none=True)
            loss = accumulate_gradients(
                model, x_tr[batch], y_tr[batch], s.accumulation_steps, s.precision, scaler
            )
            scaler.step(optimizer)
            scaler.update()
            train_loss += loss * len(batch)
            seen += len(batch)
        val_loss, val_accuracy = evaluate(model, x_va, y_va, s.precision)
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict(),
            "epoch": epoch,
        }
        metrics = {
            "epoch": float(epoch),
            "train_loss": train_loss / seen,
            "val_loss": val_loss,
            "val_accuracy": val_accuracy,
        }
        report(metrics, state)
    return model


def _model_of(config: Mapping[str, Any]) -> BlockStack:
    data = load_dataset(str(config.get("dataset", "digits")))
    return build_model(
        str(config.get("model", "mlp")),
        in_features=data.x_train.shape[1],
        image_shape=data.image_shape,
        n_classes=data.n_classes,
        **{k: config[k] for k in ("width", "depth", "dropout", "heads") if k in config},
    )


def load_model(checkpoint: str | Path, config: Mapping[str, Any]) -> BlockStack:
    """The model a checkpoint of this trainable holds, ready to evaluate (on CPU).

    ``config``: the run's ``trainable.args`` and the trial's hyperparameters, for example
    ``{**result.config.trainable.args, **result.best["config"]}`` with
    ``checkpoint=result.best["checkpoint"]``.
    """
    model = _model_of(config)
    state = torch.load(Path(checkpoint) / STATE_FILE, weights_only=True, map_location="cpu")
    model.load_state_dict(state["model"])
    return model.eval()


def train_amp(config: dict[str, Any]) -> None:
    """Ray Tune function trainable: ``run_training`` with a Ray checkpoint every epoch."""
    from ray import tune

    torch.set_num_threads(max(1, int(config.get("threads", 1))))
    start_state = None
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            start_state = torch.load(Path(d) / STATE_FILE, weights_only=True)

    # the GPUs Ray gave this trial, by name: the idle watchdog's match where NVML's process ids
    # are not the trial's (a container)
    gpus = {"gpu_uuids": ",".join(visible_gpu_uuids())} if torch.cuda.is_available() else {}

    def report(metrics: dict[str, float], state: dict[str, Any]) -> None:
        with tempfile.TemporaryDirectory() as d:
            torch.save(state, Path(d) / STATE_FILE)
            tune.report({**metrics, **gpus}, checkpoint=tune.Checkpoint.from_directory(d))

    run_training(config, report, start_state)
