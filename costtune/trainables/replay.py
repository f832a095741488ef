"""The replay trainable: a recorded configuration's learning curve, epoch by epoch.

Config keys: ``curves`` (path of a curves table), ``config_id`` (which configuration),
``time_scale`` (sleep ``epoch_seconds × time_scale`` per epoch, so that concurrent trials
finish in a realistic order; default 0: no sleeping), ``checkpoint`` (default true: a
checkpoint each epoch; false for schedulers that never pause or clone, such as ASHA —
persisting a checkpoint per epoch is most of a replayed epoch's cost in Ray). Each report carries the recorded
metrics and ``sim_seconds``, the cumulative recorded time — set ``cost.time_field:
sim_seconds`` so that cost accounting matches what the recorded sweep paid. A checkpoint
each epoch (the epoch number) lets trials pause, resume and be cloned.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

from costtune.core.curves import load_curves
from costtune.errors import ConfigError


def replay(config: dict[str, Any]) -> None:
    from ray import tune

    curves = load_curves(str(config["curves"]))
    config_id = str(config["config_id"])
    if config_id not in curves:
        raise ConfigError(f"config_id: {config_id!r} is not in {config['curves']}")
    curve = curves[config_id]
    scale = float(config.get("time_scale", 0.0))
    start = 1
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "epoch.json")) as fh:
            start = int(json.load(fh)["epoch"]) + 1
    last = min(curve.epochs, int(config.get("max_epochs", curve.epochs)))
    for epoch in range(start, last + 1):
        if scale > 0:
            time.sleep(curve.epoch_seconds[epoch - 1] * scale)
        metrics = {
            "val_loss": float(curve.val_loss[epoch - 1]),
            "sim_seconds": curve.seconds_until(epoch),
            "sim_epoch_seconds": float(curve.epoch_seconds[epoch - 1]),
            **{k: float(v[epoch - 1]) for k, v in curve.extra.items()},
        }
        if not config.get("checkpoint", True):
            tune.report(metrics)
            continue
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "epoch.json"), "w") as fh:
                json.dump({"epoch": epoch}, fh)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))
