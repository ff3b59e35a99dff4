"""Ranking and CTR metrics in plain numpy, vectorised over all users at once.

Ties are broken at random, in expectation: a held-out item is ranked as ``(above, tied)``,
the items scored above it and those scored equal, and HR@k and NDCG@k are their expected
values when it lands at any of the ``tied + 1`` places with equal chance (exact, no draws).
So a constant scorer gets the chance figure (HR@10 = 10 / 100 among 99 negatives), as random
tie-breaking would give, and a scorer is never credited for ties it cannot separate.
"""

from __future__ import annotations

import numpy as np


def rank_of_first(scores: np.ndarray) -> np.ndarray:
    """(N, C) scores, column 0 the held-out item -> its rank among the C items as (above, tied), (N, 2)."""
    target = scores[:, :1]
    others = scores[:, 1:]
    return np.stack([(others > target).sum(1), (others == target).sum(1)], axis=1)


def hit_rate(ranks: np.ndarray, k: int = 10) -> float:
    """HR@k: the expected share of users whose held-out item ranks in the top k."""
    above, tied = np.asarray(ranks, np.float64).reshape(-1, 2).T
    return float((np.clip(k - above, 0, tied + 1) / (tied + 1)).mean())


def ndcg(ranks: np.ndarray, k: int = 10) -> float:
    """NDCG@k with one relevant item: the expected 1 / log2(rank + 2) over the tied places, 0 past k."""
    above, tied = np.asarray(ranks, np.int64).reshape(-1, 2).T
    gains = np.r_[0.0, np.cumsum(1.0 / np.log2(np.arange(k) + 2))]  # gains[j]: the places 0..j-1 together
    return float(((gains[np.minimum(above + tied + 1, k)] - gains[np.minimum(above, k)]) / (tied + 1)).mean())


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U, ties averaged); 0.5 when a class is missing."""
    labels = np.asarray(labels) > 0.5
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return 0.5
    _, inverse, counts = np.unique(np.asarray(scores, np.float64), return_inverse=True, return_counts=True)
    average_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based rank shared by each tie group
    rank_sum = average_rank[inverse][labels].sum()
    return float((rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def logloss(labels: np.ndarray, probs: np.ndarray, eps: float = 1e-7) -> float:
    p = np.clip(np.asarray(probs, np.float64), eps, 1 - eps)
    y = np.asarray(labels, np.float64)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())
