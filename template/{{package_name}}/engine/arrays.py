"""NumPy helpers the tasks share: held-out split, eval budget, normalisation and batched inference."""

from __future__ import annotations

from collections.abc import Callable

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn


def stratified_split(labels: np.ndarray | None, n: int, eval_fraction: float, seed: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(shuffled train, sorted eval) indices, ``eval_fraction`` held out per class (at least one each)."""
    rng = np.random.default_rng(seed)
    groups = [np.arange(n)] if labels is None else [np.flatnonzero(labels == c) for c in np.unique(labels)]
    train, held = [], []
    for idx in groups:
        idx = rng.permutation(idx)
        n_eval = max(1, round(len(idx) * eval_fraction))
        held.append(idx[:n_eval])
        train.append(idx[n_eval:])
    return rng.permutation(np.concatenate(train)), np.sort(np.concatenate(held))


def budget(n: int, max_examples: int | None, seed: int) -> np.ndarray:
    """Sorted eval indices: all, or ``max_examples`` of them fixed by (n, seed): the same every time."""
    if max_examples is None or max_examples >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng([seed, 0xE7A1]).choice(n, max_examples, replace=False))


def budget_note(max_examples: int | None, examples: int) -> str:
    if max_examples is None:
        return f"eval: all {examples:,} eval examples (eval.max_examples=null)"
    if examples < max_examples:
        return f"eval: all {examples:,} eval examples (fewer than eval.max_examples={max_examples})"
    return f"eval: a fixed subset of {examples:,} eval examples (eval.max_examples), the same at every evaluation"


def normalise(images: np.ndarray, meta: dict) -> np.ndarray:
    """Standardise (N, C, H, W) images by ``meta``'s mean and std (one number, or one per channel)."""
    mean = np.asarray(meta["mean"], np.float32).reshape(-1, 1, 1)
    std = np.asarray(meta["std"], np.float32).reshape(-1, 1, 1)
    return ((images - mean) / std).astype(np.float32)


def compiled(network: nn.Cell, jit: bool = True, head: Callable[[nn.Cell], nn.Cell] | None = None):
    """``network``'s (or ``head(network)``'s) forward, compiled once: a new ``ms.jit`` would compile again."""
    cache = network.__dict__.setdefault("_eval_forwards", {})
    if head not in cache:
        cell = head(network) if head else network
        cache[head] = ms.jit(cell.construct) if jit else cell
    return cache[head]


def predict(cell: nn.Cell, *columns: np.ndarray, batch_size: int = 512, rows: np.ndarray | None = None,
            prepare: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """``cell`` over the inputs (their ``rows``, if given) in batches, each ``prepare``d first; float32."""
    n = len(columns[0]) if rows is None else len(rows)
    out = []
    for i in range(0, n, batch_size):
        pick = slice(i, i + batch_size) if rows is None else rows[i:i + batch_size]
        batch = [c[pick] if prepare is None else prepare(c[pick]) for c in columns]
        out.append(cell(*(Tensor(b) for b in batch)).asnumpy())
    return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)
