"""The vision task as the engine sees it: data, model + loss, evaluation, exports."""

from __future__ import annotations

import numpy as np
from mindspore import Tensor, nn, ops

from ...engine.arrays import budget, compiled, normalise, predict
from ...engine.errors import DataError
from ...engine.seams import is_spec, your_metrics
from ...engine.task import Capabilities, Comm, Data, Model, Task
from ...models.backbones import backbone
from .data import load_data, load_eval_data, train_recipe
from .model import ClassificationLoss, Classifier, CriterionLoss, backbone_for, your_criterion, your_network


def build_model(cfg, meta: dict, comm: Comm) -> Model:
    """``model.arch``: a built-in backbone + head (``Classifier``), or your own class (``model.py``)."""
    classes, channels, size = len(meta["classes"]), meta["channels"], meta["image_size"]
    if is_spec(cfg.model.arch):
        network = your_network(cfg, classes, channels, size)
    else:
        network = Classifier(backbone_for(cfg.model, channels, size), classes, cfg.model.dropout)
    if cfg.model.freeze_backbone:  # the finetune feature's (the config refuses it without)
        from .finetune import freeze_backbone

        freeze_backbone(network, cfg)
    layered = callable(getattr(network, "layer_id", None)) and getattr(network, "num_layers", None) is not None
    return Model(network=network, loss=build_loss(network, cfg, meta),
                 layer_id=network.layer_id if layered else None, num_layers=network.num_layers if layered else 0,
                 no_decay=("class_token", "pos_embedding"))  # ViT's, as timm


def build_loss(network: nn.Cell, cfg, meta: dict) -> nn.Cell:
    """Cross-entropy (``train.label_smoothing``) or your ``train.loss``; with augmentation on the
    device or mixing, the recipes feature's loss (``augment.py``), which does them in the step."""
    recipe = train_recipe(cfg, meta)
    if recipe is not None:
        from .recipes import recipe_loss

        return recipe_loss(network, cfg, meta, recipe)
    if cfg.train.loss:
        return CriterionLoss(network, your_criterion(cfg))
    return ClassificationLoss(network, cfg.train.label_smoothing)


def warm_start(network: nn.Cell, cfg) -> None:
    """``model.pretrained``, the finetune feature's (the config refuses it without): backbone weights."""
    if cfg.model.pretrained:
        from .finetune import warm_start as copy_backbone

        copy_backbone(network, cfg)


def evaluate(network: nn.Cell, data: Data, cfg) -> dict[str, float]:
    """Accuracy and loss over the eval images of the budget, prepared batch by batch: image
    files stream through the eval transform (resize + centre crop, ``data.eval_crop``) in
    ``data.workers`` workers."""
    if data.eval["label"].max() >= len(data.meta["classes"]):
        raise DataError(f"the eval data has {data.eval['label'].max() + 1} classes; "
                        f"the model knows {len(data.meta['classes'])}")
    rows = budget(len(data.eval["label"]), cfg.eval.max_examples, cfg.seed)
    forward = compiled(network, cfg.train.jit)  # compiled once per network, reused by every evaluation
    if "file" in data.eval:  # a folder of photos (the folders feature)
        from .folders import folder_logits

        logits = folder_logits(forward, data.eval["file"], data.meta, rows, cfg)
    else:
        logits = predict(forward, data.eval["image"], rows=rows, prepare=lambda batch: normalise(batch, data.meta))
    labels = data.eval["label"][rows]
    loss = float(ops.cross_entropy(Tensor(logits), Tensor(labels)).asnumpy())
    return {"accuracy": float((logits.argmax(1) == labels).mean()), "loss": loss,
            **your_metrics(cfg, logits, labels), "examples": len(rows)}


def exports(network: nn.Cell, meta: dict, cfg) -> dict:
    size = meta["image_size"]
    sample = np.random.default_rng(0).standard_normal((1, meta["channels"], size, size)).astype(np.float32)
    return {"classifier": (network, (Tensor(sample),))}


def capabilities(cfg) -> Capabilities:
    reasons = []
    built_in = not is_spec(cfg.model.arch)  # your network: BatchNorm in it is yours to know (model.py)
    if built_in and backbone(cfg.model.arch).batch_norm or cfg.model.norm == "batch" and cfg.model.arch == "small_cnn":
        reasons.append("BatchNorm statistics come from each micro-batch (and, under msrun, each rank's batch), "
                       "not the whole batch")
    if (cfg.data.mixup is not None or cfg.data.cutmix is not None) and cfg.data.mix_prob > 0:
        reasons.append("mixup/cutmix pair images within each micro-batch (and rank), not across the whole batch")
    if reasons:
        return Capabilities(grad_accum="approximate", reason="; ".join(reasons))
    return Capabilities()


TASK = Task(name="vision", load_data=load_data, build_model=build_model, evaluate=evaluate,
            monitor="accuracy", mode="max", metrics=("accuracy", "loss"), exports=exports,
            metric_inputs="logits (N, classes) float32, labels (N,) int32", loss_inputs="logits, labels",
            warm_start=warm_start, capabilities=capabilities, load_eval_data=load_eval_data,
            fixed_data=("image_size", "channels", "eval_crop"),
            outputs={"classifier": ("logits", "logits over meta.classes (softmax: probabilities)")})
