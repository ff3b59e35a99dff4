"""The classifier: a backbone chosen by ``model.arch`` (the registry, ``models/backbones.py``),
dropout and a linear head; and its loss.

Every arch has the same two parts, ``backbone`` and ``head``, so fine-tuning (load a backbone,
train a new head, optionally with the backbone frozen) works alike for all of them.
"""

from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops

from ...models.backbones import Options, build_backbone
from ...models.vit_layout import vit_sizes


def backbone_for(model_cfg, channels: int, image_size: int) -> nn.Cell:
    """``model.arch``'s backbone from the registry (``models/backbones.py``), built from this task's keys."""
    vit = vit_sizes(model_cfg) if model_cfg.arch.startswith("vit") else None
    return build_backbone(model_cfg.arch, Options(
        channels, image_size, fast_conv=model_cfg.fast_conv, widths=tuple(model_cfg.widths),
        blocks_per_stage=model_cfg.blocks_per_stage, norm=model_cfg.norm, drop_path=model_cfg.drop_path,
        vit_sizes=vit, dropout=model_cfg.dropout))


class Classifier(nn.Cell):
    def __init__(self, backbone: nn.Cell, num_classes: int, dropout: float = 0.0):
        super().__init__()
        self.backbone = backbone
        self.dropout = nn.Dropout(p=dropout)
        self.head = nn.Dense(backbone.out_features, num_classes)
        self.num_layers = backbone.num_layers  # the head's layer (optim.layer_decay)

    def layer_id(self, name: str) -> int:
        """A parameter's layer for optim.layer_decay: the backbone's own count, the head last."""
        inner = name.removeprefix("backbone.")
        return self.backbone.layer_id(inner) if inner != name else self.num_layers

    def freeze_backbone(self) -> None:
        """Train only the head: backbone weights get no gradient, and BatchNorm layers (if any)
        normalise with their stored statistics and never update them, in training too.
        (Putting the backbone in eval mode would not last: ``set_train`` on any Cell above it
        sets every Cell below it.)"""
        for param in self.backbone.get_parameters():
            param.requires_grad = False
        for _, cell in self.backbone.cells_and_names():
            if isinstance(cell, nn.BatchNorm2d):
                cell.use_batch_statistics = False

    def construct(self, x):  # (B, C, H, W) -> logits (B, num_classes), float32 under mixed precision too
        return self.head(self.dropout(self.backbone(x))).astype(ms.float32)


class ClassificationLoss(nn.Cell):
    """Mean cross-entropy, in float32 under mixed precision too: the logits arrive in float32
    and the loss is a function, not a Cell that amp would cast to float16. (Not the fused
    ``SparseSoftmaxCrossEntropyWithLogits`` primitive: with it, MindSpore 2.10's frontend
    thread spins through every step of a small CNN and takes a core from the kernels, 20-30 %
    slower on 2 cores; bench_versions.py.)"""

    def __init__(self, network: nn.Cell):
        super().__init__()
        self.network = network

    def construct(self, image, label):  # (B, C, H, W), (B,) int32
        return ops.cross_entropy(self.network(image), label)
