"""The finetune feature: start from a checkpoint's backbone (``model.pretrained``) and train only
the head (``model.freeze_backbone``). The task calls these only when the config sets them; a
project without this file refuses both keys at config load (``msscaffold add finetune``).

    python train.py --set model.pretrained=runs/<run>/best.ckpt --set model.freeze_backbone=true
"""

from __future__ import annotations

from mindspore import nn

from ...engine import checkpoint
from ...engine.errors import CheckpointError, ConfigError
from ...models.backbones import backbone
from .config import ModelConfig


def warm_start(network: nn.Cell, cfg) -> None:
    """``model.pretrained``: copy backbone weights from a checkpoint (one trained here or made by
    convert_weights.py); the head stays fresh (the new data may have other classes)."""
    params, meta = checkpoint.read(cfg.model.pretrained)
    try:
        check_backbone_fits(meta, cfg)
        checkpoint.restore(params, network.backbone)
    except CheckpointError as exc:
        raise CheckpointError(f"model.pretrained={cfg.model.pretrained}: {exc}") from None


def pretrained_normalisation(cfg) -> tuple:
    """The mean and std the ``model.pretrained`` backbone was trained with (e.g. ImageNet's per-channel
    values for imported weights), so it sees inputs as it was trained on."""
    meta = checkpoint.read_meta(cfg.model.pretrained)  # not its weights
    return meta["task_meta"]["mean"], meta["task_meta"]["std"]


def check_backbone_fits(meta: dict, cfg) -> None:
    """Refuse a backbone of another shape. Names alone would not catch all of them: a
    resnet34 file holds every name of a resnet18, a BatchNorm one every name of a GroupNorm one."""
    saved = meta["config"]["model"]
    keys = ["arch"] + {"small_cnn": ["widths", "blocks_per_stage", "norm"]}.get(cfg.model.arch, [])
    for key in keys:
        if saved.get(key) != getattr(cfg.model, key):
            raise CheckpointError(f"its backbone has model.{key}={saved.get(key)!r}, this run "
                                  f"model.{key}={getattr(cfg.model, key)!r}; set them equal")
    if cfg.model.arch.startswith("vit"):
        from ...models.vit_layout import vit_sizes

        theirs, ours = vit_sizes(ModelConfig(**saved)), vit_sizes(cfg.model)
        if theirs != ours:
            raise CheckpointError(f"its ViT has (patch, layers, heads, width, mlp) {theirs}, this run {ours}; set "
                                  "model.patch_size, vit_layers, vit_heads, vit_width, vit_mlp_dim equal")
    if backbone(cfg.model.arch).fixed_size and meta["task_meta"]["image_size"] != cfg.data.image_size:
        raise CheckpointError(f"its ViT has positions for {meta['task_meta']['image_size']}-pixel images; "
                              f"set data.image_size={meta['task_meta']['image_size']}")
    if meta["task_meta"]["channels"] != cfg.data.channels:
        raise CheckpointError(f"its backbone takes {meta['task_meta']['channels']}-channel images; "
                              f"set data.channels={meta['task_meta']['channels']}")


def freeze_backbone(network: nn.Cell, cfg) -> None:
    """``model.freeze_backbone``: train all but ``network.backbone``, whose BatchNorm keeps its
    statistics (set_train would not last). Your own arch needs a ``backbone`` Cell attribute."""
    if not isinstance(getattr(network, "backbone", None), nn.Cell):
        raise ConfigError(f"model.freeze_backbone: {type(network).__name__} (model.arch={cfg.model.arch}) has no "
                          "backbone Cell to freeze; give it a `backbone` attribute or set "
                          "model.freeze_backbone: false")
    for param in network.backbone.get_parameters():
        param.requires_grad = False
    for _, cell in network.backbone.cells_and_names():
        if isinstance(cell, nn.BatchNorm2d):
            cell.use_batch_statistics = False
