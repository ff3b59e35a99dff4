"""Ranking and CTR metrics in plain numpy, vectorised over all users at once.

Ties count half: an item tied with k others is ranked after half of them (the expected
rank under random tie-breaking), so a constant scorer gets no credit from ties.
"""

from __future__ import annotations

import numpy as np


def rank_of_first(scores: np.ndarray) -> np.ndarray:
    """(N, C) scores, column 0 the held-out item -> its 0-based rank among the C items, (N,)."""
    target = scores[:, :1]
    others = scores[:, 1:]
    return (others > target).sum(1) + 0.5 * (others == target).sum(1)


def hit_rate(ranks: np.ndarray, k: int = 10) -> float:
    """HR@k: share of users whose held-out item ranks in the top k."""
    return float((np.asarray(ranks) < k).mean())


def ndcg(ranks: np.ndarray, k: int = 10) -> float:
    """NDCG@k with one relevant item: 1 / log2(rank + 2) when it is in the top k, else 0."""
    ranks = np.asarray(ranks, np.float64)
    return float(np.where(ranks < k, 1.0 / np.log2(ranks + 2), 0.0).mean())


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
