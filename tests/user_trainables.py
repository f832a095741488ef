"""Function trainables referenced from test configs as ``tests.user_trainables:NAME``."""

from __future__ import annotations

from ray import tune


def quadratic(config: dict) -> None:
    """A user's own trainable: loss falls towards (x - 0.3)^2 over the epochs."""
    for epoch in range(1, int(config["max_epochs"]) + 1):
        tune.report({"loss": (config["x"] - 0.3) ** 2 + 1.0 / epoch})


def hangs_after_two_epochs(config: dict) -> None:
    """Reports twice, then hangs (a dead data loader, a deadlock): never reports again."""
    import time

    for epoch in range(1, 3):
        tune.report({"loss": 1.0 / epoch})
    time.sleep(3600)


def steady(config: dict) -> None:
    """Epochs of a fixed length, a loss that keeps falling: only caps and budgets stop it."""
    import time

    for epoch in range(1, int(config["max_epochs"]) + 1):
        time.sleep(float(config.get("epoch_s", 0.05)))
        tune.report({"loss": 1.0 / epoch})


def diverges_or_raises(config: dict) -> None:
    """x < 0.33: raises at epoch 2; x > 0.66: NaN loss from epoch 3; otherwise fine."""
    for epoch in range(1, int(config["max_epochs"]) + 1):
        if config["x"] < 0.33 and epoch == 2:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        loss = float("nan") if config["x"] > 0.66 and epoch >= 3 else 1.0 / epoch
        tune.report({"loss": loss})


def checkpointed_steps(config: dict) -> None:
    """Epochs of fixed length with a checkpoint each; writes which Ray node ran each epoch."""
    import json
    import os
    import tempfile
    import time

    import ray

    start = 1
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "epoch.json")) as fh:
            start = json.load(fh)["epoch"] + 1
    node = ray.get_runtime_context().get_node_id()
    for epoch in range(start, int(config["max_epochs"]) + 1):
        time.sleep(float(config.get("epoch_s", 0.2)))
        with open(os.path.join(config["trace_dir"], f"{node}.log"), "a") as fh:
            fh.write(f"{config['x']} {epoch}\n")
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "epoch.json"), "w") as fh:
                json.dump({"epoch": epoch}, fh)
            tune.report({"loss": 1.0 / epoch + config["x"]}, checkpoint=tune.Checkpoint.from_directory(d))


def reports_another_metric(config: dict) -> None:
    """Reports ``loss`` only: a config that asks for ``val_loss`` can never rank it."""
    for epoch in range(1, int(config["max_epochs"]) + 1):
        tune.report({"loss": 1.0 / epoch, "accuracy": 0.5})


def always_raises(config: dict) -> None:
    """A broken data path: every trial fails before its first epoch."""
    raise FileNotFoundError("no such shard: /data/train-00007.tar")


def timed_sleeps(config: dict) -> None:
    """Sleeps ``epoch_s`` per epoch and writes, before each report, when it began and when
    it reported each epoch (its own wall clock; Tune ends it at its last report)."""
    import json
    import time
    from pathlib import Path

    held = {"began": time.time(), "reports": []}
    for epoch in range(1, int(config["max_epochs"]) + 1):
        time.sleep(float(config["epoch_s"]))
        held["reports"].append(time.time())
        Path(config["trace_dir"], f"{config['x']}.json").write_text(json.dumps(held))
        tune.report({"loss": 1.0 / epoch})
