"""NumPy helpers the tasks share: the held-out split, image normalisation, batched inference."""

from __future__ import annotations

import numpy as np
from mindspore import Tensor, nn


def stratified_split(labels: np.ndarray | None, n: int, eval_fraction: float, seed: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Hold out ``eval_fraction`` of ``n`` examples: per class when labelled (at least one
    each), else at random. Returns (shuffled train indices, sorted eval indices)."""
    rng = np.random.default_rng(seed)
    groups = [np.arange(n)] if labels is None else [np.flatnonzero(labels == c) for c in np.unique(labels)]
    train, held = [], []
    for idx in groups:
        idx = rng.permutation(idx)
        n_eval = max(1, round(len(idx) * eval_fraction))
        held.append(idx[:n_eval])
        train.append(idx[n_eval:])
    return rng.permutation(np.concatenate(train)), np.sort(np.concatenate(held))


def normalise(images: np.ndarray, meta: dict) -> np.ndarray:
    """Standardise (N, C, H, W) images with the training run's statistics: ``meta["mean"]`` and
    ``meta["std"]`` are one number, or one per channel (e.g. ImageNet's for imported weights)."""
    mean = np.asarray(meta["mean"], np.float32).reshape(-1, 1, 1)
    std = np.asarray(meta["std"], np.float32).reshape(-1, 1, 1)
    return ((images - mean) / std).astype(np.float32)


def predict(cell: nn.Cell, *columns: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """``cell`` applied to equal-length input arrays in batches, outputs concatenated (float32)."""
    out = [cell(*(Tensor(c[i:i + batch_size]) for c in columns)).asnumpy()
           for i in range(0, len(columns[0]), batch_size)]
    return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)
