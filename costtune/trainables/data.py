"""Bundled datasets: real data that ships with a package, so no download is ever needed."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from costtune.errors import ConfigError

DATASETS = ("digits", "breast_cancer")


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
    10 classes), scaled to [0, 1]; ``breast_cancer`` its Wisconsin breast cancer data (569
    samples, 30 features standardised, 2 classes).
    """
    if name not in DATASETS:
        raise ConfigError(f"trainable.args.dataset: unknown dataset {name!r}; choose one of {DATASETS}")
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.model_selection import train_test_split

    if name == "digits":
        bunch = load_digits()
        x = (bunch.data / 16.0).astype(np.float32)
        shape, classes = (8, 8), 10
    else:
        bunch = load_breast_cancer()
        x = ((bunch.data - bunch.data.mean(axis=0)) / bunch.data.std(axis=0)).astype(np.float32)
        shape, classes = (5, 6), 2  # 30 features, read as a 5 × 6 "image" by the CNN and transformer
    y = bunch.target.astype(np.int64)
    x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=val_fraction, random_state=seed, stratify=y)
    return Split(x_tr, y_tr, x_va, y_va, image_shape=shape, n_classes=classes)
