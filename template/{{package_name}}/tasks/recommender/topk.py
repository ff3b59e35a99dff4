"""Top-K mode: implicit feedback. Every interaction is a positive; each user's latest one is
held out and ranked against sampled unseen items (HR@10, NDCG@10) and against every item
(``*_full``), always beside the same figure for "most popular" (``pop_*``)."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from ...engine.arrays import budget, compiled, predict
from ...engine.errors import DataError
from ...engine.task import Data, Model
from .ids import IdMap
from .log import Log, last_of_each_pair
from .metrics import hit_rate, ndcg, rank_of_first
from .model import NeuMF, PairLoss, TwoTower
from .sampling import EVAL_NEGATIVE, PairSource, sample_unseen

K = 10  # the k of HR@k / NDCG@k
BATCH = 1 << 16  # scored pairs per forward pass at evaluation
CHUNK = 1 << 18  # scored pairs per chunk of users at evaluation


MONITOR = "hr10"
METRICS = ("hr10", "pop_hr10", "ndcg10", "pop_ndcg10", "hr10_full", "pop_hr10_full", "cold_share")


def build_model(cfg, meta: dict) -> Model:
    m = cfg.model
    users, items = IdMap.from_meta(meta["users"]).rows, IdMap.from_meta(meta["items"]).rows
    network = (TwoTower if m.kind == "two_tower" else NeuMF)(users, items, m.embed_dim, m.hidden, m.dropout,
                                                             m.sparse)
    return Model(network=network, loss=PairLoss(network))


def prepare(log: Log, cfg) -> Data:
    d = cfg.data
    if log.side:
        print(f"data: column(s) {', '.join(log.side)} ignored (top-K learns from user, item and time; "
              "data.mode=ctr reads them as side features)", flush=True)
    user, item = latest_per_pair(log)
    users, counts = np.unique(user, return_counts=True)
    if (counts < 2).any():
        short = users[counts < 2]
        if not d.drop_short_users:
            raise DataError(f"{log.name}: user {short[0]} has a single interaction ({len(short)} such users), "
                            "so none can be held out; remove them or set data.drop_short_users=true")
        keep = ~np.isin(user, short)
        user, item = user[keep], item[keep]
        print(f"data: dropped {len(short)} users with a single interaction", flush=True)
    if len(user) == 0:
        raise DataError(f"{log.name}: no user has two interactions")
    held = np.r_[user[1:] != user[:-1], True]  # each user's latest interaction
    user_ids, item_ids = IdMap(user[~held], d.hash_buckets), IdMap(item[~held], d.hash_buckets)
    tu, ti = user_ids.encode(user[~held]), item_ids.encode(item[~held])
    eu, ei = user_ids.encode(user[held]), item_ids.encode(item[held])
    candidates = np.unique(item_ids.encode(item_ids.known))  # rows of the items a model can rank
    width = item_ids.rows
    # Training negatives avoid only the training items, as NCF's reference code does: the held-out
    # item stays a possible negative, else training never pushes it down and every metric is inflated
    # (on pure noise, HR@10 0.136 against chance 0.10). Eval negatives avoid the held-out item too.
    train_seen = np.unique(tu.astype(np.int64) * width + ti)
    seen = np.unique(np.r_[train_seen, eu.astype(np.int64) * width + ei])
    # Only the positives are kept: each epoch's negatives are drawn on the fly (sampling.py).
    train = PairSource(tu, ti, d.negatives, d.negative_passes, d.id_dropout, candidates, train_seen, width,
                       cfg.seed)

    _, train_counts = np.unique(user[~held], return_counts=True)  # users in the order of eu
    n_neg = min(d.eval_negatives, len(candidates) - int(train_counts.max()) - 1)
    if n_neg < 1:
        raise DataError(f"{log.name}: a user has interacted with (nearly) every item: nothing left to rank against")
    if n_neg < d.eval_negatives:
        print(f"data: only {n_neg} unseen items for some user; sampled metrics use {n_neg} negatives", flush=True)
    cold = ~np.isin(ei, candidates)  # held out an item no one trained on: scored through the unknown row
    if cold.any():
        print(f"data: {int(cold.sum())} of {len(eu)} users hold out an item that never occurs in training "
              "(scored through the unknown-item row; in every metric, and their share is cold_share)", flush=True)
    eval_ = {"user": eu, "target": ei, "cold": cold, "items": candidates.astype(np.int32), "train_items": ti,
             "train_bounds": np.r_[0, np.cumsum(train_counts)], "seen": seen, "width": width,
             "eval_negatives": n_neg, "popularity": np.bincount(ti, minlength=width).astype(np.float32)}
    meta = {"mode": "topk", "users": user_ids.to_meta(), "items": item_ids.to_meta()}
    return Data(train=train, eval=eval_, meta=meta)


def latest_per_pair(log: Log) -> tuple[np.ndarray, np.ndarray]:
    """(user, item) of every interaction, ordered by user, time, file row; a repeated (user,
    item) pair kept once, at its latest interaction. Stable sorts of one column at a time:
    2.2x faster than ``np.lexsort`` over (user, item, time, row) at 5 M rows, same result."""
    order = np.argsort(log.time, kind="stable")  # by (time, row)
    order = order[np.argsort(log.user[order], kind="stable")]  # by (user, time, row)
    user, item = log.user[order], log.item[order]
    del order
    keep = last_of_each_pair(user, item)
    return user[keep], item[keep]


def evaluate(network: nn.Cell, data: Data, cfg) -> dict[str, float]:
    """HR@10 and NDCG@10 among sampled negatives, HR@10 among all items (``*_full``), each
    beside popularity's, over the users of the eval budget; ``cold_share``: the share of them
    whose held-out item never occurs in training (a cold item: no model can rank it on merit)."""
    e = data.eval
    users = budget(len(e["user"]), cfg.eval.max_examples, cfg.seed)
    # Compiled once per network, the forward runs ~3x faster than eagerly (passes of one shape
    # compile once).
    ranks = user_ranks(compiled(network, cfg.train.jit), e, users, cfg.seed)
    return {"hr10": hit_rate(ranks["model"], K), "pop_hr10": hit_rate(ranks["pop"], K),
            "ndcg10": ndcg(ranks["model"], K), "pop_ndcg10": ndcg(ranks["pop"], K),
            "hr10_full": hit_rate(ranks["model_full"], K), "pop_hr10_full": hit_rate(ranks["pop_full"], K),
            "cold_share": float(e["cold"][users].mean()) if len(users) else 0.0, "examples": len(users)}


def user_ranks(scorer, e: dict, users: np.ndarray, seed: int, chunk: int | None = None) -> dict[str, np.ndarray]:
    """0-based rank of each eval user's held-out item (``users``: positions in ``e["user"]``)
    for the model and for popularity: among ``eval_negatives`` sampled unseen items (drawn
    from the seed and the user alone, so any subset sees the same ones), and among all
    items (``*_full``). Users go in chunks of ``chunk`` (default: about CHUNK scored pairs)."""
    items = e["items"]
    chunk = chunk or max(1, CHUNK // (1 + e["eval_negatives"] + len(items)))
    parts = []
    for start in range(0, len(users), chunk):
        rows = users[start:start + chunk]
        user, target = e["user"][rows], e["target"][rows]
        negatives = sample_unseen(seed, EVAL_NEGATIVE, user, user, e["eval_negatives"], items, e["seen"],
                                  e["width"], distinct=True)
        candidates = np.c_[target, negatives].astype(np.int32)  # (c, 1 + n), the held-out item first
        # One pass over the sampled pairs, then every (user, item) pair: scores stay on the device.
        scores = score_pairs(scorer, np.r_[np.repeat(user, candidates.shape[1]), np.repeat(user, len(items))],
                             np.r_[candidates.ravel(), np.tile(items, len(rows))])
        sampled = scores[:candidates.size].asnumpy().reshape(candidates.shape)
        full, pop_full = full_ranks(scores[candidates.size:].reshape(len(rows), len(items)), e, rows,
                                    Tensor(sampled[:, 0]))
        parts.append({"model": rank_of_first(sampled), "pop": rank_of_first(e["popularity"][candidates]),
                      "model_full": full, "pop_full": pop_full})
    return {name: np.concatenate([part[name] for part in parts]) if parts else np.zeros((0, 2)) for name in
            ("model", "pop", "model_full", "pop_full")}


def full_ranks(scores: Tensor, e: dict, rows: np.ndarray, target_scores: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Rank of each held-out item among all known items its user has not interacted with, for
    the model (``scores``: (users, items) on the device) and for popularity: the counting
    happens on the device too; only the ranks come back."""
    items = e["items"]
    column = np.full(e["width"], -1)
    column[items] = np.arange(len(items))
    # The user's training items and the held-out item itself (compared by its score) are left out.
    excluded = np.zeros(scores.shape, bool)
    starts, stops = e["train_bounds"][rows], e["train_bounds"][rows + 1]
    seen_rows = np.repeat(np.arange(len(rows)), stops - starts)
    seen_items = e["train_items"][np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)])]
    for r, c in ((seen_rows, column[seen_items]), (np.arange(len(rows)), column[e["target"][rows]])):
        excluded[r[c >= 0], c[c >= 0]] = True
    excluded = Tensor(excluded)
    popularity = Tensor(e["popularity"][items][None, :])  # (1, I)
    pop_target = Tensor(e["popularity"][e["target"][rows]])
    return rank_among(scores, target_scores, excluded), rank_among(popularity, pop_target, excluded)


def score_pairs(scorer, users: np.ndarray, items: np.ndarray) -> Tensor:
    """Logits of the pairs (users[i], items[i]), kept on the device, in forward passes of
    exactly BATCH pairs (the last one padded): a compiled scorer compiles once."""
    n, pad = len(users), -len(users) % BATCH
    users, items = (np.r_[x, np.zeros(pad, x.dtype)].astype(np.int32) for x in (users, items))
    return ops.cat([scorer(Tensor(users[i:i + BATCH]), Tensor(items[i:i + BATCH]))
                    for i in range(0, len(users), BATCH)])[:n]


def rank_among(scores: Tensor, target: Tensor, excluded: Tensor) -> np.ndarray:
    """The rank of ``target`` (c,) in each row of ``scores`` (c, I) as (above, tied) (c, 2), as
    ``metrics.rank_of_first``, leaving out the ``excluded`` entries."""
    target, kept = target.reshape(-1, 1), ops.logical_not(excluded)
    above = ops.logical_and(scores > target, kept).astype(ms.int32).sum(1)
    tied = ops.logical_and(scores == target, kept).astype(ms.int32).sum(1)
    return ops.stack([above, tied], axis=1).asnumpy()


def score(network: nn.Cell, meta: dict, user, items: np.ndarray, log: Log) -> np.ndarray:
    """Logits of raw item ids ``items`` for raw user id ``user`` (recommend.py)."""
    users, item_ids = IdMap.from_meta(meta["users"]), IdMap.from_meta(meta["items"])
    user_rows = np.full(len(items), users.encode([user])[0], np.int32)
    return predict(network, user_rows, item_ids.encode(items), batch_size=BATCH)


def exports(network: nn.Cell, meta: dict) -> dict:
    rng = np.random.default_rng(0)
    users, items = IdMap.from_meta(meta["users"]).rows, IdMap.from_meta(meta["items"]).rows
    user, item = rng.integers(0, users, 1).astype(np.int32), rng.integers(0, items, 1).astype(np.int32)
    return {"scorer": (network, (Tensor(user), Tensor(item)))}
