"""The recommender task as the engine sees it. Two modes share the data sources, id maps
and networks' building blocks: ``topk`` (implicit feedback, ranking: ``topk.py``) and
``ctr`` (like prediction: ``ctr.py``); each checkpoint's meta says which one it is."""

from __future__ import annotations

from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import nn

from ...engine.errors import ConfigError, DataError
from ...engine.task import Capabilities, Comm, Data, Model, Task
from . import ctr, topk
from .ids import IdMap
from .log import RATINGS, read_log
from .tsvfile import label_first

MODES = {"topk": topk, "ctr": ctr}


def load_data(cfg) -> Data:
    check_sharding(cfg)  # before reading the data: the device is known, nothing is loaded yet
    d = cfg.data
    path = Path(d.path) if d.source == "files" and d.path else None
    if d.mode == "ctr" and path and path.is_file() and path.name not in RATINGS and d.columns is None \
            and label_first(path):
        return ctr.prepare_tsv(path, cfg)  # a label-first feature file (Criteo layout)
    return MODES[d.mode].prepare(read_log(cfg), cfg)


def check_sharding(cfg) -> None:
    """``model.shard_embeddings``: refused on every device, with the reason for this one.

    MindSpore's own mechanism is ``nn.EmbeddingLookup(slice_mode=TABLE_ROW_SLICE)`` under
    ``SEMI_AUTO_PARALLEL`` in GRAPH_MODE: each device holds a slice of the rows. On CPU it fails
    to compile in MindSpore 2.10 ("Invalid backend: CPU"); on Ascend/GPU it needs a parallel
    training step (the optimizer over sliced parameters) that this project's data-parallel
    step is not, and that nothing here could test. The README says how to build one.
    """
    if not cfg.model.shard_embeddings:
        return
    device = ms.get_current_device().device_target
    if device == "CPU":
        raise ConfigError("model.shard_embeddings=true needs Ascend or GPU: MindSpore's row-sliced tables "
                          "(nn.EmbeddingLookup TABLE_ROW_SLICE, SEMI_AUTO_PARALLEL) fail on CPU "
                          "('Invalid backend: CPU'); on CPU the tables live in host memory "
                          "(big ones: model.sparse=true, optim.name=lazy_adam)")
    raise ConfigError(f"model.shard_embeddings=true: row-sliced tables need a semi-auto parallel training step, "
                      f"which this project does not have yet (device {device}); see the README, "
                      "'Tables bigger than one device'")


def build_model(cfg, meta: dict, comm: Comm) -> Model:
    return MODES[meta["mode"]].build_model(cfg, meta)


def evaluate(network: nn.Cell, data: Data, cfg) -> dict[str, float]:
    """Every model figure sits beside the same figure for the baseline (``pop_*``, ``rate_*``)."""
    return MODES[data.meta["mode"]].evaluate(network, data, cfg)


def monitor(cfg) -> str:
    """The metric that picks best.ckpt: HR@10 for top-K, AUC for CTR."""
    return MODES[cfg.data.mode].MONITOR


def metrics(cfg) -> tuple[str, ...]:
    return MODES[cfg.data.mode].METRICS


def exports(network: nn.Cell, meta: dict, cfg) -> dict:
    return MODES[meta["mode"]].exports(network, meta)


def recommend(network: nn.Cell, meta: dict, cfg, user, k: int) -> list[tuple[int | str, str, float]]:
    """Top-``k`` (item id, title, probability) for raw id ``user`` (as typed: ``"42"``, ``"user_0042"``;
    or the id itself), among the items seen in training that the user has not interacted with (the
    data in ``cfg`` is read again). Item ids come back as the data writes them."""
    if "users" not in meta:
        raise DataError("recommend.py needs user/item data; this checkpoint was trained on a TSV feature file")
    users, items = IdMap.from_meta(meta["users"]), IdMap.from_meta(meta["items"])
    raw = users.parse(user) if isinstance(user, str) else user
    if raw is None:
        raise DataError(f"--user {user!r}: expected an integer (this model's user ids are integers)")
    if raw not in users:
        raise DataError(f"--user {user}: unknown user (not in the training data)")
    log = read_log(cfg)
    candidates = np.setdiff1d(items.known, log.item[log.user == raw])
    logits = MODES[meta["mode"]].score(network, meta, raw, candidates, log)
    top = np.lexsort((candidates, -logits))[:k]  # best first; ties by item id
    probs = 1 / (1 + np.exp(-logits[top].astype(np.float64)))
    ids = candidates[top].tolist()  # Python ints or strs, as in the data
    return [(i, log.titles.get(i, ""), float(p)) for i, p in zip(ids, probs)]


def deploy_meta(meta: dict, cfg) -> dict:
    """CTR on ratings: the training items' genres (``item_genres``), so a server builds from
    ``user,item`` the features the model was trained on."""
    if meta["mode"] != "ctr" or "users" not in meta:
        return meta
    genres = read_log(cfg).genres
    return {**meta, "item_genres": {str(i): genres.get(i, []) for i in IdMap.from_meta(meta["items"]).known.tolist()}}


def deploy_arrays(meta: dict, cfg) -> dict[str, np.ndarray]:
    """Top-K: each user's items in the data (``seen_users``, CSR ``seen_offsets`` into
    ``seen_items``, raw ids), which serving leaves out as recommend.py does."""
    if meta["mode"] != "topk":
        return {}
    log = read_log(cfg)
    order = np.lexsort((log.item, log.user))
    users, starts = np.unique(log.user[order], return_index=True)
    return {"seen_users": users, "seen_offsets": np.r_[starts, len(order)], "seen_items": log.item[order]}


def capabilities(cfg) -> Capabilities:
    if cfg.model.sparse:  # sparse gradients: no accumulation buffers, overflow check, norm or all-reduce
        return Capabilities(grad_accum="none", amp=False, grad_clip=False, distributed=False,
                            reason="model.sparse=true gives sparse embedding gradients")
    return Capabilities()  # dense embeddings: accumulation exact, AMP, clipping, data parallel fine


TASK = Task(name="recommender", load_data=load_data, build_model=build_model, evaluate=evaluate,
            monitor=monitor, mode="max", metrics=metrics, exports=exports, capabilities=capabilities,
            fixed_data=("mode",), deploy_meta=deploy_meta, deploy_arrays=deploy_arrays,
            optimizers={"lazy_adam": lambda groups, lr: nn.Adam(groups, learning_rate=lr, use_lazy=True)},
            outputs={"scorer": ("logit", "the logit that the user interacts with the item (sigmoid: probability)"),
                     "ctr_model": ("logit", "the logit that the user likes the item (sigmoid: probability)")})
