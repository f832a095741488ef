"""Small models for the AMP trainable: MLP, CNN and a Transformer encoder.

Each model is a stack of ``blocks`` (an ``nn.ModuleList``) between an input stem and a
head, so activation checkpointing can wrap each block the same way.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from costtune.errors import ConfigError

MODELS = ("mlp", "cnn", "transformer")


class BlockStack(nn.Module):
    """stem → blocks → head; ``checkpointing=True`` recomputes block activations in backward."""

    def __init__(self, stem: nn.Module, blocks: list[nn.Module], head: nn.Module) -> None:
        super().__init__()
        self.stem = stem
        self.blocks = nn.ModuleList(blocks)
        self.head = head
        self.checkpointing = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for block in self.blocks:
            if self.checkpointing and self.training and h.requires_grad:
                h = checkpoint(block, h, use_reentrant=False)
            else:
                h = block(h)
        return self.head(h)


class _Residual(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.inner(x)


class _MeanTokens(nn.Module):
    def __init__(self, width: int, n_classes: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(x.mean(dim=1)))


class _Tokens(nn.Module):
    """An (H, W) image as H tokens of W features, embedded, plus a learned position."""

    def __init__(self, image_shape: tuple[int, int], width: int) -> None:
        super().__init__()
        self.image_shape = image_shape
        self.embed = nn.Linear(image_shape[1], width)
        self.position = nn.Parameter(torch.zeros(1, image_shape[0], width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.embed(x.view(-1, *self.image_shape)) + self.position


def build_model(
    name: str,
    *,
    in_features: int,
    image_shape: tuple[int, int],
    n_classes: int,
    width: int = 128,
    depth: int = 2,
    dropout: float = 0.1,
    heads: int = 4,
    **_: Any,
) -> BlockStack:
    """Build ``mlp`` | ``cnn`` | ``transformer`` with ``depth`` blocks of ``width`` units."""
    width, depth = int(width), int(depth)
    if width < 1 or depth < 1:
        raise ConfigError(f"trainable.args: width and depth must be >= 1, got {width}, {depth}")
    if name == "mlp":
        stem: nn.Module = nn.Sequential(nn.Linear(in_features, width), nn.GELU())
        blocks: list[nn.Module] = [
            _Residual(
                nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.GELU(), nn.Dropout(dropout))
            )
            for _ in range(depth)
        ]
        head: nn.Module = nn.Linear(width, n_classes)
    elif name == "cnn":
        h, w = image_shape
        stem = nn.Sequential(nn.Unflatten(1, (1, h, w)), nn.Conv2d(1, width, 3, padding=1), nn.GELU())
        blocks = [
            _Residual(nn.Sequential(nn.BatchNorm2d(width), nn.Conv2d(width, width, 3, padding=1), nn.GELU()))
            for _ in range(depth)
        ]
        head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout), nn.Linear(width, n_classes)
        )
    elif name == "transformer":
        if width % int(heads):
            raise ConfigError(f"trainable.args.width: must be divisible by heads={heads}, got {width}")
        stem = _Tokens(image_shape, width)
        blocks = [
            nn.TransformerEncoderLayer(
                width,
                int(heads),
                dim_feedforward=2 * width,
                dropout=dropout,
                batch_first=True,
                norm_first=True,
            )
            for _ in range(depth)
        ]
        head = _MeanTokens(width, n_classes)
    else:
        raise ConfigError(f"trainable.args.model: unknown model {name!r}; choose one of {MODELS}")
    return BlockStack(stem, blocks, head)
