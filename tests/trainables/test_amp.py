from __future__ import annotations

import copy

import pytest
import torch

from costtune.errors import ConfigError
from costtune.trainables.amp import Settings, accumulate_gradients, evaluate, run_training
from costtune.trainables.data import load_dataset
from costtune.trainables.models import build_model

torch.set_num_threads(1)


def _model(name: str = "mlp", **kw):
    torch.manual_seed(0)
    return build_model(name, in_features=64, image_shape=(8, 8), n_classes=10, dropout=0.0, **kw)


def _batch(n: int = 130):
    data = load_dataset("digits")
    return torch.as_tensor(data.x_train[:n]), torch.as_tensor(data.y_train[:n])


def _grads(model) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("steps", [2, 4, 7])  # 130 / 7 leaves unequal micro-batches
def test_gradient_accumulation_equals_the_large_batch_gradient(steps) -> None:
    x, y = _batch()
    big, small = _model(), _model()
    small.load_state_dict(big.state_dict())
    loss_big = accumulate_gradients(big, x, y, accumulation_steps=1)
    loss_small = accumulate_gradients(small, x, y, accumulation_steps=steps)
    assert loss_small == pytest.approx(loss_big, rel=1e-5)
    for g_big, g_small in zip(_grads(big), _grads(small), strict=True):
        torch.testing.assert_close(g_small, g_big, rtol=1e-4, atol=1e-6)


def _saved_bytes(model, x, y) -> int:
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return total


@pytest.mark.parametrize(
    ("name", "kw"), [("mlp", {"width": 128, "depth": 4}), ("transformer", {"width": 32, "depth": 3})]
)
def test_activation_checkpointing_same_outputs_fewer_saved_bytes(name, kw) -> None:
    x, y = _batch(64)
    plain = _model(name, **kw)
    ckpt = copy.deepcopy(plain)
    ckpt.checkpointing = True
    plain.train()
    ckpt.train()
    torch.testing.assert_close(ckpt(x), plain(x))
    plain.zero_grad()
    ckpt.zero_grad()
    bytes_plain = _saved_bytes(plain, x, y)
    bytes_ckpt = _saved_bytes(ckpt, x, y)
    for g_plain, g_ckpt in zip(_grads(plain), _grads(ckpt), strict=True):
        torch.testing.assert_close(g_ckpt, g_plain)
    assert bytes_ckpt < 0.6 * bytes_plain, (bytes_ckpt, bytes_plain)


def test_activation_checkpointing_takes_a_flag_and_names_anything_else() -> None:
    """``bool("false")`` is True: a quoted "false" once turned checkpointing on."""
    from costtune.core.config import parse_config
    from costtune.errors import ConfigError
    from costtune.trainables.amp import Settings

    assert Settings.from_config({"activation_checkpointing": "false"}).activation_checkpointing is False
    assert Settings.from_config({"activation_checkpointing": "True"}).activation_checkpointing is True
    assert Settings.from_config({"activation_checkpointing": False}).activation_checkpointing is False
    with pytest.raises(ConfigError, match="activation_checkpointing: must be true or false, got 'selective'"):
        Settings.from_config({"activation_checkpointing": "selective"})
    base = {
        "name": "x",
        "max_epochs": 2,
        "num_samples": 1,
        "search_space": {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}},
    }
    with pytest.raises(ConfigError, match=r"trainable.args.activation_checkpointing: .* got 'sometimes'"):
        parse_config(
            {**base, "trainable": {"name": "amp", "args": {"activation_checkpointing": "sometimes"}}}
        )
    flags = {"type": "choice", "values": [False, True]}
    space = {**base["search_space"], "activation_checkpointing": {**flags, "values": [False, "maybe"]}}
    with pytest.raises(ConfigError, match=r"search_space.activation_checkpointing: .* got 'maybe'"):
        parse_config({**base, "search_space": space})
    parse_config({**base, "search_space": {**space, "activation_checkpointing": flags}})


def test_bf16_autocast_trains_on_cpu() -> None:
    reports: list[dict] = []
    run_training({"max_epochs": 2, "precision": "bf16", "width": 32}, lambda m, s: reports.append(m))
    assert [m["epoch"] for m in reports] == [1.0, 2.0]
    assert reports[-1]["val_loss"] < reports[0]["train_loss"]
    assert reports[-1]["val_accuracy"] > 0.5


def test_resume_from_an_epoch_checkpoint_matches_uninterrupted_training() -> None:
    config = {"max_epochs": 4, "width": 32, "dropout": 0.0, "lr": 3e-3}
    whole: list[dict] = []
    run_training(config, lambda m, s: whole.append(m))
    states: list[dict] = []
    first: list[dict] = []
    run_training({**config, "max_epochs": 2}, lambda m, s: (first.append(m), states.append(copy.deepcopy(s))))
    rest: list[dict] = []
    run_training(config, lambda m, s: rest.append(m), start_state=states[-1])
    assert [m["epoch"] for m in rest] == [3.0, 4.0]
    for a, b in zip(whole, first + rest, strict=True):
        assert a["val_loss"] == pytest.approx(b["val_loss"], rel=1e-5)


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_a_clone_trains_at_its_explored_settings_not_the_donors(optimizer) -> None:
    """PBT: a clone loads the donor's checkpoint, optimizer state included, and must then run
    at its own lr, weight decay and momentum (load_state_dict alone restores the donor's)."""
    donor = {
        "max_epochs": 1,
        "width": 16,
        "depth": 1,
        "lr": 1e-3,
        "weight_decay": 0.0,
        "optimizer": optimizer,
    }
    states: list[dict] = []
    run_training(donor, lambda m, s: states.append(copy.deepcopy(s)))
    explored = {**donor, "max_epochs": 2, "lr": 0.2, "weight_decay": 0.05, "momentum": 0.5}
    groups: list[dict] = []

    def report(metrics: dict, state: dict) -> None:
        groups.extend(state["optimizer"]["param_groups"])

    run_training(explored, report, start_state=states[-1])
    assert groups and all(g["lr"] == 0.2 and g["weight_decay"] == 0.05 for g in groups)
    if optimizer == "sgd":
        assert all(g["momentum"] == 0.5 for g in groups)
    # the donor's optimizer state (AdamW's moments, SGD's momentum buffers) came along
    assert states[-1]["optimizer"]["state"]


def test_evaluate_reports_loss_and_accuracy() -> None:
    x, y = _batch(50)
    loss, acc = evaluate(_model(), x, y, "fp32")
    assert loss > 0 and 0.0 <= acc <= 1.0


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"precision": "fp8"}, "trainable.args.precision"),
        ({"batch_size": 4, "accumulation_steps": 8}, "trainable.args.accumulation_steps"),
        ({"optimizer": "lion"}, "trainable.args.optimizer"),
    ],
)
def test_bad_trainable_settings_name_the_field(config, field) -> None:
    with pytest.raises(ConfigError, match=f"^{field}:"):
        Settings.from_config(config)


def test_unknown_model_names_the_field() -> None:
    with pytest.raises(ConfigError, match="^trainable.args.model:"):
        build_model("resnet", in_features=64, image_shape=(8, 8), n_classes=10)
