"""Bundled datasets: real data that ships with a package, so no download is ever needed."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from costtune.errors import ConfigError

DATASETS = ("digits",)


@dataclass(frozen=True)
class Split:
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    image_shape: tuple[int, int]
    n_classes: int


@lru_cache(maxsize=4)
def load_dataset(name: str = "digits", val_fraction: float = 0.2, seed: int = 0) -> Split:
    """A fixed, seeded, stratified train/validation split of a bundled dataset.

    ``digits`` is scikit-learn's copy of the UCI handwritten digits (1,797 8×8 images,
    10 classes), scaled to [0, 1].
    """
    if name != "digits":
        raise ConfigError(f"trainable.args.dataset: unknown dataset {name!r}; choose one of {DATASETS}")
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    x = (bunch.data / 16.0).astype(np.float32)
    y = bunch.target.astype(np.int64)
    x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=val_fraction, random_state=seed, stratify=y)
    return Split(x_tr, y_tr, x_va, y_va, image_shape=(8, 8), n_classes=10)
