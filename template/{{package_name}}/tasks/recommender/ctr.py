"""CTR mode: ratings >= ``data.like_threshold`` are positives; each user's latest ratings are
held out (AUC, logloss beside the item's positive rate). A label-first TSV file (Criteo
layout) goes straight to hashed features, kept compact (``tsvfile.Features``) and assembled
into int32 batches as they are taken (``TsvRows``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from mindspore import Tensor, nn

from ...engine.arrays import budget, predict
from ...engine.errors import DataError
from ...engine.task import Data, Model
from .ids import IdMap, ctr_features, numeric_codes
from .log import Log, last_of_each_pair
from .metrics import auc, logloss
from .model import DeepFM, FeatureLoss
from .tsvfile import Features, read_tsv

BATCH = 1 << 16  # rows per forward pass at evaluation


MONITOR = "auc"
METRICS = ("auc", "rate_auc", "logloss", "rate_logloss")


def build_model(cfg, meta: dict) -> Model:
    m = cfg.model
    network = DeepFM(meta["rows"], meta["fields"], m.embed_dim, m.hidden, m.dropout, m.sparse)
    return Model(network=network, loss=FeatureLoss(network))


def prepare(log: Log, cfg) -> Data:
    d = cfg.data
    if np.isnan(log.rating).any():
        raise DataError(f"{log.name}: data.mode=ctr needs a rating on every row (column 'rating')")
    row = np.arange(len(log.user))
    order = np.lexsort((row, log.time, log.user))
    user, item, rating = log.user[order], log.item[order], log.rating[order]
    side = {name: values[order] for name, values in log.side.items()}
    keep = last_of_each_pair(user, item)  # a pair rated twice: its latest rating (never in both splits)
    if not keep.all():
        print(f"data: {int((~keep).sum())} repeated (user, item) ratings; each pair's latest is kept", flush=True)
        user, item, rating = user[keep], item[keep], rating[keep]
        side = {name: values[keep] for name, values in side.items()}
    starts = np.r_[0, np.flatnonzero(user[1:] != user[:-1]) + 1]
    sizes = np.diff(np.r_[starts, len(user)])
    position = np.arange(len(user)) - np.repeat(starts, sizes)
    held = position >= np.repeat(sizes - np.round(sizes * d.eval_fraction), sizes)  # each user's latest ratings
    if not held.any():
        raise DataError(f"{log.name}: too few ratings per user to hold out data.eval_fraction={d.eval_fraction}")
    label = (rating >= d.like_threshold).astype(np.float32)
    users, items = IdMap(user[~held], d.hash_buckets), IdMap(item[~held], d.hash_buckets)
    genres = sorted({g for i in np.unique(item[~held]).tolist() for g in log.genres.get(i, [])})
    offsets = np.cumsum([0, users.rows, items.rows]).tolist()
    rows, side_meta = offsets[-1] + len(genres) + 1, []
    for name, values in side.items():  # each side column: one more field, its own rows in the shared table
        numeric = values.dtype.kind == "f"  # data.numeric: bucketed (ids.numeric_codes); else a category
        ids = IdMap((numeric_codes(values) if numeric else values)[~held], d.hash_buckets)
        side_meta.append({"name": name, "numeric": numeric, "offset": rows, "ids": ids.to_meta()})
        rows += ids.rows
    if side_meta:
        print("data: side features " + ", ".join(f"{f['name']} ({'numeric' if f['numeric'] else 'categorical'})"
                                                  for f in side_meta), flush=True)
    meta = {"mode": "ctr", "layout": "ratings", "users": users.to_meta(), "items": items.to_meta(),
            "genres": genres, "offsets": offsets, "side": side_meta, "rows": rows, "fields": 4 + len(side_meta)}
    features = ctr_features(meta, user, item, log.genres, side)
    train_x = features[~held].copy()
    rng = np.random.default_rng([cfg.seed, 1])
    for f in (0, 1):  # id dropout: some training rows see the unknown user / item
        drop = rng.random(len(train_x)) < d.id_dropout
        train_x[drop, f] = offsets[f]
    baseline = rate_table(features[~held, 1], label[~held], meta["rows"])[features[held, 1]]
    eval_ = {"features": features[held], "label": label[held], "baseline": baseline}
    return Data(train={"features": train_x, "label": label[~held]}, eval=eval_, meta=meta)


def side_values(log: Log, user, items: np.ndarray) -> dict[str, np.ndarray]:
    """The side features of (``user``, each of ``items``) for recommend.py: the item's own value
    where the column has one value per item in the data (an item attribute), else the value of
    the user's latest interaction (its context: device, country, ...)."""
    rows = np.flatnonzero(log.user == user)
    latest = rows[np.argmax(log.time[rows])]
    order = np.argsort(log.item, kind="stable")
    by_item = log.item[order]
    first = np.r_[True, by_item[1:] != by_item[:-1]]
    out = {}
    for name, values in log.side.items():
        v = values[order]
        if (v == v[first][np.cumsum(first) - 1]).all():  # one value per item
            out[name] = v[first][np.searchsorted(by_item[first], items)]
        else:
            out[name] = np.full(len(items), values[latest])
    return out


def rate_table(keys: np.ndarray, label: np.ndarray, size: int, strength: float = 5.0) -> np.ndarray:
    """Positive rate per key, shrunk toward the global rate (keys never seen get the global rate)."""
    prior = float(label.mean())
    positives = np.bincount(keys, weights=label, minlength=size)
    return (positives + strength * prior) / (np.bincount(keys, minlength=size) + strength)


def prepare_tsv(path: Path, cfg) -> Data:
    """Criteo layout: ``label<TAB>feature...``; label 0/1; empty = missing. All-integer columns
    are bucketed by log(v)^2; every (column, value) is hashed into one shared table (``tsvfile.py``)."""
    buckets = cfg.data.hash_buckets or 2**17
    label, features = read_tsv(path, buckets)
    fields = features.shape[1]
    split = len(label) - max(1, round(len(label) * cfg.data.eval_fraction))
    if split < 1:
        raise DataError(f"{path}: {len(label)} rows are too few to hold some out")
    train, held = features.part(0, split), features.part(split, len(label))
    # Each field's positive rate per id, indexed by its codes (the same rates as per hashed id).
    tables = [rate_table(codes, label[:split], len(ids)) for codes, ids in zip(train.codes, train.ids, strict=True)]
    best = max(range(fields), key=lambda f: auc(label[:split], tables[f][train.codes[f]]))
    meta = {"mode": "ctr", "layout": "tsv", "rows": buckets + 1, "fields": fields, "hash_buckets": buckets}
    baseline = tables[best][held.codes[best]]
    eval_ = {"features": held, "label": label[split:], "baseline": baseline}
    return Data(train=TsvRows(train, label[:split]), eval=eval_, meta=meta)


class TsvRows:
    """The training rows of a TSV file as a ``TrainSource``: each take assembles its (B, F)
    int32 features from the compact columns, the same rows as an int32 matrix would give."""

    def __init__(self, features: Features, label: np.ndarray):
        self.features, self.label = features, label

    def __len__(self) -> int:
        return len(self.label)

    def take(self, indices: np.ndarray, epoch: int = 0) -> tuple[np.ndarray, np.ndarray]:
        return self.features[indices], self.label[indices]  # the same rows every epoch


def evaluate(network: nn.Cell, data: Data, cfg) -> dict[str, float]:
    """AUC and logloss beside the positive rate's, over the held-out rows of the eval budget."""
    e = data.eval
    rows = budget(len(e["label"]), cfg.eval.max_examples, cfg.seed)
    label, baseline = e["label"][rows], e["baseline"][rows]  # features: an int32 matrix or tsvfile.Features
    probs = 1 / (1 + np.exp(-predict(network, e["features"], rows=rows, batch_size=BATCH).astype(np.float64)))
    return {"auc": auc(label, probs), "rate_auc": auc(label, baseline),
            "logloss": logloss(label, probs), "rate_logloss": logloss(label, baseline), "examples": len(rows)}


def score(network: nn.Cell, meta: dict, user, items: np.ndarray, log: Log) -> np.ndarray:
    """Logits of raw item ids ``items`` for raw user id ``user`` (recommend.py)."""
    features = ctr_features(meta, np.full(len(items), user), items, log.genres, side_values(log, user, items))
    return predict(network, features, batch_size=BATCH)


def exports(network: nn.Cell, meta: dict) -> dict:
    features = np.random.default_rng(0).integers(0, meta["rows"], (1, meta["fields"])).astype(np.int32)
    return {"ctr_model": (network, (Tensor(features),))}
