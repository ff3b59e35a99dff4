"""Top-k retrieval over large score matrices, in bounded memory (``retrieval.py``)."""

from __future__ import annotations

import numpy as np


def top_k(queries: np.ndarray, keys: np.ndarray, k: int, chunk: int = 2048) -> np.ndarray:
    """``np.argsort(-(queries @ keys.T), axis=1, kind="stable")[:, :k]`` in O(chunk^2) memory."""
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
    """``np.argsort(-values, axis=1, kind="stable")[:, :k]`` without sorting whole rows."""
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
