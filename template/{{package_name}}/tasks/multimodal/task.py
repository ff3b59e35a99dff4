"""The multimodal task as the engine sees it: data, model + loss, evaluation, exports."""

from __future__ import annotations

import numpy as np
from mindspore import Tensor, nn

from ...engine import checkpoint
from ...engine.arrays import budget, compiled
from ...engine.errors import CheckpointError
from ...engine.runtime import resolve_workers
from ...engine.task import Capabilities, Comm, Data, Model, Task
from ...images.files import predict_files
from ...models.backbones import BACKBONES
from ...models.transformer import Softmax32
from .captions import encode
from .data import load_data, load_eval_data
from .model import ClampLogitScale, ContrastiveLoss, build_network
from .retrieval import class_embeddings, embed_images, embed_texts, retrieval_metrics, zero_shot_accuracy


def build_model(cfg, meta: dict, comm: Comm) -> Model:
    network = build_network(cfg, meta)
    if cfg.model.freeze_image_tower:  # fine-tune the text side (and the temperature) only
        for param in network.image_encoder.get_parameters():
            param.requires_grad = False
    # The ViT image tower's class token and position embedding are not decayed, as in the vision task (timm).
    return Model(network=network, loss=ContrastiveLoss(network, comm), constrain=ClampLogitScale(network),
                 no_decay=("class_token", "pos_embedding"), float32_cells=(Softmax32,))


def warm_start(network: nn.Cell, cfg) -> None:
    """``model.pretrained``: the image tower's backbone from a vision checkpoint (trained, or
    imported by the vision task's convert_weights.py); the projection and the text tower stay
    fresh. (The backbone then sees this task's image scaling, not the vision run's mean/std.)"""
    if not cfg.model.pretrained:
        return
    if cfg.model.image_tower == "vit" or cfg.model.text_tower == "clip":
        return warm_start_clip(network, cfg)
    try:
        params, meta = checkpoint.read(cfg.model.pretrained, tasks=("vision",))
        check_backbone_fits(meta, cfg)
        # The vision Classifier's "backbone.*" is this network's "image_encoder.tower.backbone.*".
        renamed = {f"image_encoder.tower.{name}": p for name, p in params.items() if name.startswith("backbone.")}
        checkpoint.restore(renamed, network.image_encoder.tower.backbone)
    except CheckpointError as exc:
        raise CheckpointError(f"model.pretrained={cfg.model.pretrained}: {exc}") from None


def warm_start_clip(network: nn.Cell, cfg) -> None:
    """``model.pretrained`` for CLIP's towers: a checkpoint of this task (e.g. imported by
    convert_weights.py) of the same sizes starts the whole network."""
    try:
        params, meta = checkpoint.read(cfg.model.pretrained, tasks=("multimodal",))
        saved = meta["config"]["model"]
        for key in ("image_tower", "text_tower", "embed_dim", "vit_patch_size", "vit_layers", "vit_heads",
                    "vit_width", "text_width", "text_layers", "text_heads"):
            if saved.get(key) != getattr(cfg.model, key):
                raise CheckpointError(f"its model.{key} is {saved.get(key)!r}; "
                                      f"this run has {getattr(cfg.model, key)!r}")
        checkpoint.restore(params, network)
    except CheckpointError as exc:
        raise CheckpointError(f"model.pretrained={cfg.model.pretrained}: {exc}") from None


def check_backbone_fits(meta: dict, cfg) -> None:
    saved, m = meta["config"], cfg.model
    fits = {"task": (saved["task"], "vision"), "model.arch": (saved["model"].get("arch"), m.image_tower),
            "data.channels": (meta["task_meta"].get("channels"), cfg.data.channels)}
    if m.image_tower == "small_cnn":  # the tower's fixed choices (see model.build_image_tower)
        fits.update({"model.widths": (saved["model"].get("widths"), m.image_widths),
                     "model.blocks_per_stage": (saved["model"].get("blocks_per_stage"), 1),
                     "model.norm": (saved["model"].get("norm"), "group")})
    for key, (theirs, ours) in fits.items():
        if theirs != ours:
            raise CheckpointError(f"its {key} is {theirs!r}; this image tower needs {ours!r}")


def evaluate(network: nn.Cell, data: Data, cfg) -> dict[str, float]:
    """Retrieval among the held-out images of the eval budget, each embedded once, and all of
    their captions; zero-shot accuracy (per image) when the data has class labels."""
    meta, held, jit = data.meta, data.eval, cfg.train.jit  # encoders compiled once per network
    images = held["file"] if "file" in held else held["image"]
    rows = budget(len(images), cfg.eval.max_examples, cfg.seed)  # images, sorted
    lines = np.flatnonzero(np.isin(held["image_of"], rows))  # all captions of those images
    texts = [held["text"][j] for j in lines]
    if "file" in held:  # a folder: its images stream through the eval transform
        workers = resolve_workers(cfg.data.workers)
        image_emb = predict_files(compiled(network.image_encoder, jit), images, meta, rows, workers)
    else:
        image_emb = embed_images(network, images, meta, rows, jit)
    image_of = np.searchsorted(rows, held["image_of"][lines])  # caption -> its image among rows
    metrics = retrieval_metrics(image_emb, embed_texts(network, texts, meta, jit=jit), texts, image_of)
    if held["label"] is not None:
        # An imported CLIP knows no classes: zero-shot over the eval data's own, with data.prompt (the
        # checkpoint's: a trained model's captions, an imported CLIP's "a photo of a {}."; --set changes it).
        classes = meta.get("classes") or sorted(set(held["label"]))
        metrics["zero_shot_acc"] = zero_shot_accuracy(image_emb, class_embeddings(network, classes, cfg.data.prompt,
                                                                                  meta, jit),
                                                      classes, [held["label"][i] for i in rows])
    metrics["temperature"] = float(1.0 / network.scale().asnumpy())
    return {**metrics, "examples": len(rows)}


def exports(network: nn.Cell, meta: dict, cfg) -> dict:
    rng = np.random.default_rng(0)
    size = meta["image_size"]
    image = rng.standard_normal((1, meta["channels"], size, size)).astype(np.float32)
    if "tokenizer" in meta:  # CLIP: a caption of start, text, end-of-text padding
        tokens = encode(["a photo"], meta)
    else:
        tokens = rng.integers(2, len(meta["vocab"]), (1, meta["max_tokens"])).astype(np.int32)
        tokens[:, meta["max_tokens"] // 2:] = 0  # padded like a real caption
    return {"image_encoder": (network.image_encoder, (Tensor(image),)),
            "text_encoder": (network.text_encoder, (Tensor(tokens),))}


def capabilities(cfg) -> Capabilities:
    reason = ("contrastive loss: each micro-batch sees only its own negatives, so k micro-batches of b train like "
              "k batches of b, not like one batch of k*b (raise train.batch_size or add devices for more negatives)")
    if cfg.model.image_tower in BACKBONES and BACKBONES[cfg.model.image_tower].batch_norm:
        reason += "; and the ResNet's BatchNorm statistics come from each micro-batch (under msrun, each rank's)"
    return Capabilities(grad_accum="approximate", reason=reason)


TASK = Task(name="multimodal", load_data=load_data, build_model=build_model, evaluate=evaluate,
            monitor="i2t_r1", mode="max", metrics=("i2t_r1", "i2t_r5", "t2i_r1", "t2i_r5", "temperature"),
            exports=exports, warm_start=warm_start, capabilities=capabilities, load_eval_data=load_eval_data,
            fixed_data=("image_size", "channels", "max_tokens"),
            outputs={"image_encoder": ("embedding", "the L2-normalised image embedding (cosine = dot product with "
                                                    "a text embedding)"),
                     "text_encoder": ("embedding", "the L2-normalised caption embedding (cosine = dot product "
                                                   "with an image embedding)")})
