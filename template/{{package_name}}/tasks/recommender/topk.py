"""Top-K mode: implicit feedback. Every interaction is a positive; each user's latest one is
held out and ranked against sampled unseen items (HR@10, NDCG@10) and against every item
(``*_full``), always beside the same figure for "most popular" (``pop_*``)."""

from __future__ import annotations

import numpy as np
from mindspore import Tensor, nn

from ...engine.arrays import predict
from ...engine.errors import DataError
from ...engine.task import Data, Model
from .ids import IdMap
from .log import Log
from .metrics import hit_rate, ndcg, rank_of_first
from .model import NeuMF, PairLoss, TwoTower

K = 10  # the k of HR@k / NDCG@k
BATCH = 1 << 16  # scored pairs per forward pass at evaluation


MONITOR = "hr10"


def build_model(cfg, meta: dict) -> Model:
    m = cfg.model
    users, items = IdMap.from_meta(meta["users"]).rows, IdMap.from_meta(meta["items"]).rows
    network = (TwoTower if m.kind == "two_tower" else NeuMF)(users, items, m.embed_dim, m.hidden, m.dropout,
                                                             m.sparse)
    return Model(network=network, loss=PairLoss(network))


def prepare(log: Log, cfg) -> Data:
    d = cfg.data
    row = np.arange(len(log.user))
    order = np.lexsort((row, log.time, log.item, log.user))  # a repeated (user, item): keep the latest
    user, item, time, row = log.user[order], log.item[order], log.time[order], row[order]
    keep = np.r_[(user[1:] != user[:-1]) | (item[1:] != item[:-1]), True]
    user, item, time, row = user[keep], item[keep], time[keep], row[keep]
    order = np.lexsort((row, time, user))
    user, item = user[order], item[order]
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
    seen = np.unique(user_ids.encode(user).astype(np.int64) * width + item_ids.encode(item))

    rng = np.random.default_rng([cfg.seed, 1])
    columns = {"user": [], "item": [], "label": []}
    for _ in range(d.negative_passes):  # fresh negatives each pass; the engine shuffles rows
        negatives = sample_unseen(rng, np.repeat(tu, d.negatives), 1, candidates, seen, width)[:, 0]
        pass_user, pass_item = np.r_[tu, np.repeat(tu, d.negatives)], np.r_[ti, negatives]
        pass_user[rng.random(len(pass_user)) < d.id_dropout] = 0
        pass_item[rng.random(len(pass_item)) < d.id_dropout] = 0
        columns["user"].append(pass_user)
        columns["item"].append(pass_item)
        columns["label"].append(np.r_[np.ones(len(tu)), np.zeros(len(negatives))])
    train = {"user": np.concatenate(columns["user"]).astype(np.int32),
             "item": np.concatenate(columns["item"]).astype(np.int32),
             "label": np.concatenate(columns["label"]).astype(np.float32)}

    _, train_counts = np.unique(user[~held], return_counts=True)  # users in the order of eu
    n_neg = min(d.eval_negatives, len(candidates) - int(train_counts.max()) - 1)
    if n_neg < 1:
        raise DataError(f"{log.name}: a user has interacted with (nearly) every item: nothing left to rank against")
    if n_neg < d.eval_negatives:
        print(f"data: only {n_neg} unseen items for some user; sampled metrics use {n_neg} negatives", flush=True)
    # The eval negatives depend on the seed only, not on the training knobs: runs stay comparable.
    sampled = sample_unseen(np.random.default_rng([cfg.seed, 2]), eu, n_neg, candidates, seen, width, distinct=True)
    bounds = np.r_[0, np.cumsum(train_counts)]
    eval_ = {"user": eu, "candidates": np.c_[ei, sampled].astype(np.int32), "items": candidates.astype(np.int32),
             "train_items": ti, "train_bounds": bounds, "popularity": np.bincount(ti, minlength=width).astype(float)}
    meta = {"mode": "topk", "users": user_ids.to_meta(), "items": item_ids.to_meta()}
    return Data(train=train, eval=eval_, meta=meta)


def sample_unseen(rng, user_rows, count, candidates, seen_keys, width, distinct=False, tries=50) -> np.ndarray:
    """``count`` items per user row from ``candidates`` that the user never interacted with
    (``seen_keys`` = user_row * width + item_row). ``distinct``: no repeats within a row."""
    user_rows = np.asarray(user_rows, np.int64)[:, None]
    picks = candidates[rng.integers(0, len(candidates), (len(user_rows), count))]
    for _ in range(tries):
        bad = np.isin(user_rows * width + picks, seen_keys)
        if distinct:
            ordered = np.sort(picks, axis=1)
            dup = np.zeros_like(bad)
            np.put_along_axis(dup, np.argsort(picks, axis=1), np.c_[np.zeros((len(picks), 1), bool),
                                                                    ordered[:, 1:] == ordered[:, :-1]], axis=1)
            bad |= dup
        if not bad.any():
            break
        picks[bad] = candidates[rng.integers(0, len(candidates), int(bad.sum()))]
    return picks


def evaluate(network: nn.Cell, data: Data, cfg) -> dict[str, float]:
    e = data.eval
    users, candidates = e["user"], e["candidates"]
    scores = predict(network, np.repeat(users, candidates.shape[1]), candidates.ravel(), batch_size=BATCH)
    scores = scores.reshape(candidates.shape)
    ranks, pop_ranks = rank_of_first(scores), rank_of_first(e["popularity"][candidates])
    full, pop_full = full_ranks(network, e, scores[:, 0])
    return {"hr10": hit_rate(ranks, K), "pop_hr10": hit_rate(pop_ranks, K),
            "ndcg10": ndcg(ranks, K), "pop_ndcg10": ndcg(pop_ranks, K),
            "hr10_full": hit_rate(full, K), "pop_hr10_full": hit_rate(pop_full, K)}


def full_ranks(network: nn.Cell, e: dict, target_scores: np.ndarray, pairs: int = 1 << 20):
    """Rank of each held-out item among all known items the user has not interacted with,
    for the model and for popularity. Users go in chunks of about ``pairs`` scored pairs."""
    users, items, bounds = e["user"], e["items"], e["train_bounds"]
    column = np.full(max(int(items.max()), int(e["candidates"].max())) + 1, -1)
    column[items] = np.arange(len(items))
    target = e["candidates"][:, 0]
    pop_items, pop_target = e["popularity"][items], e["popularity"][target]
    ranks, pop_ranks = [], []
    step = max(1, pairs // len(items))
    for start in range(0, len(users), step):
        stop = min(start + step, len(users))
        chunk = stop - start
        scores = predict(network, np.repeat(users[start:stop], len(items)), np.tile(items, chunk), batch_size=BATCH)
        scores = scores.reshape(chunk, len(items))
        pop = np.tile(pop_items, (chunk, 1))
        # Mask the user's training items and the held-out item itself (compared separately).
        rows = np.repeat(np.arange(chunk), np.diff(bounds[start:stop + 1]))
        cols = column[e["train_items"][bounds[start]:bounds[stop]]]
        rows, cols = np.r_[rows, np.arange(chunk)], np.r_[cols, column[target[start:stop]]]
        rows, cols = rows[cols >= 0], cols[cols >= 0]
        scores[rows, cols], pop[rows, cols] = -np.inf, -np.inf
        for table, ref, out in ((scores, target_scores[start:stop], ranks), (pop, pop_target[start:stop], pop_ranks)):
            out.append((table > ref[:, None]).sum(1) + 0.5 * (table == ref[:, None]).sum(1))
    return np.concatenate(ranks), np.concatenate(pop_ranks)


def score(network: nn.Cell, meta: dict, user: int, items: np.ndarray, log: Log) -> np.ndarray:
    """Logits of raw item ids ``items`` for raw user id ``user`` (recommend.py)."""
    users, item_ids = IdMap.from_meta(meta["users"]), IdMap.from_meta(meta["items"])
    user_rows = np.full(len(items), users.encode([user])[0], np.int32)
    return predict(network, user_rows, item_ids.encode(items), batch_size=BATCH)


def exports(network: nn.Cell, meta: dict) -> dict:
    rng = np.random.default_rng(0)
    users, items = IdMap.from_meta(meta["users"]).rows, IdMap.from_meta(meta["items"]).rows
    user, item = rng.integers(0, users, 1).astype(np.int32), rng.integers(0, items, 1).astype(np.int32)
    return {"scorer": (network, (Tensor(user), Tensor(item)))}
