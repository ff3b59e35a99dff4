"""The recommender task as the engine sees it: data, model + loss, evaluation, exports,
and ``recommend`` for recommend.py."""

from __future__ import annotations

import numpy as np
from mindspore import Tensor, nn

from ...engine.errors import DataError
from ...engine.task import Capabilities, Comm, Data, Model, Task
from .data import IdMap, ctr_features, load_data, read_log
from .metrics import auc, hit_rate, logloss, ndcg, rank_of_first
from .model import DeepFM, FeatureLoss, NeuMF, PairLoss, TwoTower

K = 10  # the k of HR@k / NDCG@k


def build_model(cfg, meta: dict, comm: Comm) -> Model:
    m = cfg.model
    if meta["mode"] == "ctr":
        network = DeepFM(meta["rows"], meta["fields"], m.embed_dim, m.hidden, m.dropout, m.sparse)
        return Model(network=network, loss=FeatureLoss(network))
    users, items = IdMap.from_meta(meta["users"]).rows, IdMap.from_meta(meta["items"]).rows
    network = (TwoTower if m.kind == "two_tower" else NeuMF)(users, items, m.embed_dim, m.hidden, m.dropout,
                                                             m.sparse)
    return Model(network=network, loss=PairLoss(network))


def predict(network: nn.Cell, *columns: np.ndarray, batch_size: int = 1 << 16) -> np.ndarray:
    """Logits for equal-length id arrays, in batches: (N,) float32."""
    out = [network(*(Tensor(c[i:i + batch_size]) for c in columns)).asnumpy()
           for i in range(0, len(columns[0]), batch_size)]
    return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)


def monitor(cfg) -> str:
    """The metric that picks best.ckpt: HR@10 for top-K, AUC for CTR."""
    return "auc" if cfg.data.mode == "ctr" else "hr10"


def evaluate(network: nn.Cell, data: Data, cfg) -> dict[str, float]:
    """Every model figure sits beside the same figure for the baseline (``pop_*``, ``rate_*``)."""
    if data.meta["mode"] == "ctr":
        e = data.eval
        probs = 1 / (1 + np.exp(-predict(network, e["features"]).astype(np.float64)))
        value = auc(e["label"], probs)
        return {"auc": value, "rate_auc": auc(e["label"], e["baseline"]),
                "logloss": logloss(e["label"], probs), "rate_logloss": logloss(e["label"], e["baseline"])}
    e = data.eval
    users, candidates = e["user"], e["candidates"]
    scores = predict(network, np.repeat(users, candidates.shape[1]), candidates.ravel()).reshape(candidates.shape)
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
        scores = predict(network, np.repeat(users[start:stop], len(items)), np.tile(items, chunk))
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


def recommend(network: nn.Cell, meta: dict, cfg, user: int, k: int) -> list[tuple[int, str, float]]:
    """Top-``k`` (item id, title, probability) for raw id ``user``, among the items seen in
    training that the user has not interacted with (the data in ``cfg`` is read again)."""
    if meta["mode"] == "ctr" and meta.get("layout") != "ratings":
        raise DataError("recommend.py needs user/item data; this checkpoint was trained on a TSV feature file")
    users, items = IdMap.from_meta(meta["users"]), IdMap.from_meta(meta["items"])
    if user not in users:
        raise DataError(f"--user {user}: unknown user (not in the training data)")
    log = read_log(cfg)
    candidates = np.setdiff1d(items.known, log.item[log.user == user])
    if meta["mode"] == "ctr":
        logits = predict(network, ctr_features(meta, np.full(len(candidates), user), candidates, log.genres))
    else:
        user_rows = np.full(len(candidates), users.encode([user])[0], np.int32)
        logits = predict(network, user_rows, items.encode(candidates))
    top = np.lexsort((candidates, -logits))[:k]  # best first; ties by item id
    probs = 1 / (1 + np.exp(-logits[top].astype(np.float64)))
    return [(int(candidates[i]), log.titles.get(int(candidates[i]), ""), float(p)) for i, p in zip(top, probs)]


def exports(network: nn.Cell, meta: dict, cfg) -> dict:
    rng = np.random.default_rng(0)
    if meta["mode"] == "ctr":
        features = rng.integers(0, meta["rows"], (1, meta["fields"])).astype(np.int32)
        return {"ctr_model": (network, (Tensor(features),))}
    users, items = IdMap.from_meta(meta["users"]).rows, IdMap.from_meta(meta["items"]).rows
    user, item = rng.integers(0, users, 1).astype(np.int32), rng.integers(0, items, 1).astype(np.int32)
    return {"scorer": (network, (Tensor(user), Tensor(item)))}


def capabilities(cfg) -> Capabilities:
    if cfg.model.sparse:  # sparse gradients: no accumulation buffers, overflow check, norm or all-reduce
        return Capabilities(grad_accum="none", amp=False, grad_clip=False, distributed=False,
                            reason="model.sparse=true gives sparse embedding gradients")
    return Capabilities()  # dense embeddings: accumulation exact, AMP, clipping, data parallel fine


TASK = Task(name="recommender", load_data=load_data, build_model=build_model, evaluate=evaluate,
            monitor=monitor, mode="max", exports=exports, capabilities=capabilities)
