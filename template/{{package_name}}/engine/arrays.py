"""NumPy helpers the tasks share: the held-out split, the evaluation budget, image
normalisation, compiled and batched inference and a top-k that never builds a queries x keys
matrix."""

from __future__ import annotations

from collections.abc import Callable

import mindspore as ms
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


def budget(n: int, max_examples: int | None, seed: int) -> np.ndarray:
    """Sorted indices of the ``n`` eval examples an evaluation uses (``eval.max_examples``):
    all of them, or a subset of ``max_examples`` that depends only on (n, seed), so every
    evaluation of a run, resumed or not, scores the same examples."""
    if max_examples is None or max_examples >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng([seed, 0xE7A1]).choice(n, max_examples, replace=False))


def budget_note(max_examples: int | None, examples: int) -> str:
    """What an evaluation of ``examples`` examples under ``eval.max_examples`` covered, in words."""
    if max_examples is None:
        return f"eval: all {examples:,} eval examples (eval.max_examples=null)"
    if examples < max_examples:
        return f"eval: all {examples:,} eval examples (fewer than eval.max_examples={max_examples})"
    return f"eval: a fixed subset of {examples:,} eval examples (eval.max_examples), the same at every evaluation"


def normalise(images: np.ndarray, meta: dict) -> np.ndarray:
    """Standardise (N, C, H, W) images with the training run's statistics: ``meta["mean"]`` and
    ``meta["std"]`` are one number, or one per channel (e.g. ImageNet's for imported weights)."""
    mean = np.asarray(meta["mean"], np.float32).reshape(-1, 1, 1)
    std = np.asarray(meta["std"], np.float32).reshape(-1, 1, 1)
    return ((images - mean) / std).astype(np.float32)


def compiled(network: nn.Cell, jit: bool = True, head: Callable[[nn.Cell], nn.Cell] | None = None):
    """The forward of ``network`` (or of ``head(network)``, e.g. a per-token loss around an LM)
    for evaluation: built and ``ms.jit``-compiled once per network, then reused by every later
    evaluation (a new ``ms.jit`` of the same method would compile again). Eager when ``jit`` is
    false (``train.jit: false``)."""
    cache = network.__dict__.setdefault("_eval_forwards", {})
    if head not in cache:
        cell = head(network) if head else network
        cache[head] = ms.jit(cell.construct) if jit else cell
    return cache[head]


def predict(cell: nn.Cell, *columns: np.ndarray, batch_size: int = 512, rows: np.ndarray | None = None,
            prepare: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """``cell`` applied in batches to equal-length input arrays (only ``rows`` of them when
    given), outputs concatenated (float32). ``prepare`` maps each input batch first (e.g.
    ``normalise``), so no prepared copy of the whole input is made."""
    n = len(columns[0]) if rows is None else len(rows)
    out = []
    for i in range(0, n, batch_size):
        pick = slice(i, i + batch_size) if rows is None else rows[i:i + batch_size]
        batch = [c[pick] if prepare is None else prepare(c[pick]) for c in columns]
        out.append(cell(*(Tensor(b) for b in batch)).asnumpy())
    return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)


def top_k(queries: np.ndarray, keys: np.ndarray, k: int, chunk: int = 2048) -> np.ndarray:
    """Indices of the ``k`` keys with the highest dot product for each query, best first, ties
    to the lower index: ``np.argsort(-(queries @ keys.T), axis=1, kind="stable")[:, :k]``, but
    over (chunk, chunk) blocks of scores with a running top-k, so memory stays O(chunk^2)."""
    k = min(k, len(keys))
    first = max(chunk, k)  # the first block of keys fills every row's top k
    result = np.zeros((len(queries), k), np.int64)
    for q in range(0, len(queries), chunk):
        query = queries[q:q + chunk]
        scores = query @ keys[:first].T  # (chunk, first)
        best = first_k_largest(scores, k)
        best_scores = np.take_along_axis(scores, best, 1)
        for j in range(first, len(keys), chunk):
            scores = query @ keys[j:j + chunk].T  # (chunk, chunk)
            # Only a score above a row's k-th best enters its top k (a tie loses: its index is higher).
            rows, cols = np.nonzero(scores > best_scores[:, -1:])
            if len(rows):
                best_scores, best = merge_top_k(best_scores, best, rows, scores[rows, cols], cols + j)
        result[q:q + chunk] = best
    return result


def merge_top_k(best_scores: np.ndarray, best: np.ndarray, rows: np.ndarray, scores: np.ndarray,
                index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's running top k (scores, indices) merged with new (row, score, index) entries."""
    n, k = best.shape
    all_rows, all_scores = np.r_[np.repeat(np.arange(n), k), rows], np.r_[best_scores.ravel(), scores]
    all_index = np.r_[best.ravel(), index]
    order = np.lexsort((all_index, -all_scores, all_rows))  # by row, then best first, then lower index
    starts = np.searchsorted(all_rows[order], np.arange(n))  # every row has at least k entries
    keep = order[(starts[:, None] + np.arange(k)).ravel()]
    return all_scores[keep].reshape(n, k), all_index[keep].reshape(n, k)


def first_k_largest(values: np.ndarray, k: int) -> np.ndarray:
    """Column positions of each row's ``k`` largest values, largest first, ties to the lower
    position: ``np.argsort(-values, axis=1, kind="stable")[:, :k]`` without sorting whole rows."""
    rows, width = values.shape
    if width > k:
        kth = np.partition(values, width - k, axis=1)[:, width - k, None]  # each row's k-th largest
        ties = values == kth
        room = k - (values > kth).sum(1, keepdims=True)  # places left for values equal to kth
        chosen = (values > kth) | (ties & (np.cumsum(ties, 1) <= room))  # exactly k per row
        positions = np.nonzero(chosen)[1].reshape(rows, k)  # ascending within each row
    else:
        positions = np.broadcast_to(np.arange(width), (rows, width))
    order = np.argsort(-np.take_along_axis(values, positions, 1), axis=1, kind="stable")
    return np.take_along_axis(positions, order, 1)
