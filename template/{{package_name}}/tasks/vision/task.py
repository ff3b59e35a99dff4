"""The vision task as the engine sees it: data, model + loss, evaluation, exports."""

from __future__ import annotations

import numpy as np
from mindspore import Tensor, nn, ops

from ...engine import checkpoint
from ...engine.arrays import budget, normalise, predict
from ...engine.errors import CheckpointError
from ...engine.task import Capabilities, Comm, Data, Model, Task
from .data import load_data
from .model import ClassificationLoss, Classifier


def build_model(cfg, meta: dict, comm: Comm) -> Model:
    m = cfg.model
    network = Classifier(meta["channels"], len(meta["classes"]), m.widths, m.blocks_per_stage, m.norm, m.dropout)
    if m.freeze_backbone:
        network.freeze_backbone()
    return Model(network=network, loss=ClassificationLoss(network))


def warm_start(network: Classifier, cfg) -> None:
    """``model.pretrained``: copy backbone weights from a checkpoint; the head stays fresh
    (the new data may have other classes)."""
    if not cfg.model.pretrained:
        return
    params, _ = checkpoint.read(cfg.model.pretrained)
    try:
        checkpoint.restore(params, network.backbone)
    except CheckpointError as exc:
        raise CheckpointError(f"model.pretrained={cfg.model.pretrained}: {exc}") from None


def evaluate(network: nn.Cell, data: Data, cfg) -> dict[str, float]:
    """Accuracy and loss over the eval images of the budget, normalised batch by batch."""
    rows = budget(len(data.eval["label"]), cfg.eval.max_examples, cfg.seed)
    logits = predict(network, data.eval["image"], rows=rows, prepare=lambda batch: normalise(batch, data.meta))
    labels = data.eval["label"][rows]
    loss = float(ops.cross_entropy(Tensor(logits), Tensor(labels)).asnumpy())
    return {"accuracy": float((logits.argmax(1) == labels).mean()), "loss": loss, "examples": len(rows)}


def exports(network: nn.Cell, meta: dict, cfg) -> dict:
    size = meta["image_size"]
    sample = np.random.default_rng(0).standard_normal((1, meta["channels"], size, size)).astype(np.float32)
    return {"classifier": (network, (Tensor(sample),))}


def capabilities(cfg) -> Capabilities:
    if cfg.model.norm == "batch":
        return Capabilities(grad_accum="approximate",
                            reason="BatchNorm statistics come from each micro-batch, not the whole batch")
    return Capabilities()


TASK = Task(name="vision", load_data=load_data, build_model=build_model, evaluate=evaluate,
            monitor="accuracy", mode="max", exports=exports,
            warm_start=warm_start, capabilities=capabilities,
            fixed_data=("image_size", "channels"))
