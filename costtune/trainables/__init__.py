"""Trainables: the AMP PyTorch trainable and its bundled models and datasets (needs torch)."""

from __future__ import annotations

BUILTIN_TRAINABLES = {
    "amp": "costtune.trainables.amp:train_amp",
    "replay": "costtune.trainables.replay:replay",
}
