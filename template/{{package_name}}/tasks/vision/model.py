"""The classifier, ``backbone`` (``model.arch``) + dropout + linear ``head``, and its loss.

Your network (``model.arch: my_code:MyCNN``): an ``nn.Cell`` class built as ``MyCNN(num_classes=...,
in_channels=..., image_size=..., **model.kwargs)``, mapping (B, C, H, W) normalised float32 images to
(B, num_classes) logits; end with ``.astype(ms.float32)`` so mixed precision reads float32. Some
features need more: ``model.freeze_backbone`` a ``backbone`` Cell attribute; ``optim.layer_decay``
``layer_id(name) -> int`` (0 = stem .. ``num_layers`` = head) and ``num_layers``. BatchNorm works
(per micro-batch; msrun averages its statistics). Your loss (``train.loss: my_code:SmoothCE``): an
``nn.Cell`` built with ``**train.loss_kwargs``, ``construct(logits, labels) -> scalar``."""

from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops

from ...engine import seams
from ...engine.errors import ConfigError
from ...models.backbones import Options, build_backbone


def backbone_for(model_cfg, channels: int, image_size: int) -> nn.Cell:
    """``model.arch``'s backbone from the registry (``models/backbones.py``), built from this task's keys."""
    return build_backbone(model_cfg.arch, Options(
        channels, image_size, fast_conv=model_cfg.fast_conv, widths=tuple(model_cfg.widths),
        blocks_per_stage=model_cfg.blocks_per_stage, norm=model_cfg.norm, drop_path=model_cfg.drop_path,
        config=model_cfg))


def your_network(cfg, num_classes: int, channels: int, image_size: int) -> nn.Cell:
    """``model.arch`` as module:Class, built and checked on one batch of zeros (before anything is written)."""
    spec = cfg.model.arch
    cls = seams.load("model.arch", spec, base=nn.Cell)
    network = seams.build("model.arch", spec, cls, num_classes=num_classes, in_channels=channels,
                          image_size=image_size, **cfg.model.kwargs)
    shape = tuple(network(ops.zeros((2, channels, image_size, image_size), ms.float32)).shape)
    if shape != (2, num_classes):
        raise ConfigError(f"model.arch={spec}: {cls.__name__} maps 2 images of {channels}x{image_size}x{image_size} "
                          f"to {shape}, not (2, {num_classes}) logits (num_classes={num_classes})")
    return network


def your_criterion(cfg) -> nn.Cell:
    """``train.loss`` as module:Class, built with ``train.loss_kwargs``."""
    spec = cfg.train.loss
    return seams.build("train.loss", spec, seams.load("train.loss", spec, base=nn.Cell), **cfg.train.loss_kwargs)


class Classifier(nn.Cell):
    def __init__(self, backbone: nn.Cell, num_classes: int, dropout: float = 0.0):
        super().__init__()
        self.backbone = backbone
        self.dropout = nn.Dropout(p=dropout)
        self.head = nn.Dense(backbone.out_features, num_classes)
        # The head's layer (optim.layer_decay); a registered backbone without a layer map has none.
        self.num_layers = getattr(backbone, "num_layers", None)

    def layer_id(self, name: str) -> int:
        """A parameter's layer for optim.layer_decay: the backbone's own count, the head last."""
        inner = name.removeprefix("backbone.")
        return self.backbone.layer_id(inner) if inner != name else self.num_layers

    def construct(self, x):  # (B, C, H, W) -> logits (B, num_classes), float32 under mixed precision too
        return self.head(self.dropout(self.backbone(x))).astype(ms.float32)


class CriterionLoss(nn.Cell):
    """train.loss: your criterion on the network's logits (after device augmentation, if any), in float32."""

    def __init__(self, network: nn.Cell, criterion: nn.Cell, augment: nn.Cell | None = None):
        super().__init__()
        self.network, self.criterion, self.augment = network, criterion, augment

    def construct(self, image, label, params=None):  # (B, C, H, W), (B,) int32, (B, PARAMS) float32
        x = image if self.augment is None else self.augment(image, params)
        return self.criterion(self.network(x).astype(ms.float32), label).astype(ms.float32)


class ClassificationLoss(nn.Cell):
    """Mean cross-entropy in float32 (a function amp does not cast; the fused op was 20-30 % slower),
    against targets ``(1 - e) * one_hot + e / classes`` with ``train.label_smoothing`` e (torch's)."""

    def __init__(self, network: nn.Cell, smoothing: float = 0.0):
        super().__init__()
        self.network, self.smoothing = network, smoothing

    def construct(self, image, label):  # (B, C, H, W), (B,) int32
        return ops.cross_entropy(self.network(image), label, label_smoothing=self.smoothing)
