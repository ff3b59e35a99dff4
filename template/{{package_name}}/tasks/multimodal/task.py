"""The multimodal task as the engine sees it: data, model + loss, evaluation, exports."""

from __future__ import annotations

import numpy as np
from mindspore import Tensor, nn

from ...engine.arrays import budget
from ...engine.image_files import predict_files
from ...engine.pipeline import resolve_workers
from ...engine.task import Capabilities, Comm, Data, Model, Task
from .data import caption, load_data
from .model import ContrastiveLoss, build_network
from .retrieval import embed_images, embed_texts, retrieval_metrics, zero_shot_accuracy


def build_model(cfg, meta: dict, comm: Comm) -> Model:
    network = build_network(cfg, meta)
    return Model(network=network, loss=ContrastiveLoss(network, comm))


def evaluate(network: nn.Cell, data: Data, cfg) -> dict[str, float]:
    """Retrieval among the held-out pairs of the eval budget; zero-shot accuracy when the
    data has class labels."""
    meta, held = data.meta, data.eval
    rows = budget(len(held["text"]), cfg.eval.max_examples, cfg.seed)
    texts = [held["text"][i] for i in rows]
    if "file" in held:  # a folder: its images stream through the eval transform
        image_emb = predict_files(network.image_encoder, held["file"], meta, rows, resolve_workers(cfg.data.workers))
    else:
        image_emb = embed_images(network, held["image"], meta, rows)
    metrics = retrieval_metrics(image_emb, embed_texts(network, texts, meta), texts)
    if meta.get("classes") and held["label"] is not None:
        prompts = [caption(meta["prompt"], name) for name in meta["classes"]]
        metrics["zero_shot_acc"] = zero_shot_accuracy(
            image_emb, embed_texts(network, prompts, meta), meta["classes"], [held["label"][i] for i in rows])
    metrics["temperature"] = float(1.0 / network.scale().asnumpy())
    return {**metrics, "examples": len(rows)}


def exports(network: nn.Cell, meta: dict, cfg) -> dict:
    rng = np.random.default_rng(0)
    size = meta["image_size"]
    image = rng.standard_normal((1, meta["channels"], size, size)).astype(np.float32)
    tokens = rng.integers(2, len(meta["vocab"]), (1, meta["max_tokens"])).astype(np.int32)
    tokens[:, meta["max_tokens"] // 2:] = 0  # padded like a real caption
    return {"image_encoder": (network.image_encoder, (Tensor(image),)),
            "text_encoder": (network.text_encoder, (Tensor(tokens),))}


def capabilities(cfg) -> Capabilities:
    return Capabilities(grad_accum="approximate",
                        reason="contrastive loss: each micro-batch sees only its own negatives, so k micro-batches "
                               "of b train like k batches of b, not like one batch of k*b (raise train.batch_size "
                               "or add devices for more negatives)")


TASK = Task(name="multimodal", load_data=load_data, build_model=build_model, evaluate=evaluate,
            monitor="i2t_r1", mode="max", exports=exports, capabilities=capabilities,
            fixed_data=("image_size", "channels", "max_tokens"))
