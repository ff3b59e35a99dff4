"""The loss of the training recipe: device augmentation, mixup/cutmix and label smoothing.

Targets are distributions: ``(1 - e) * one_hot + e / classes`` (``train.label_smoothing``: the
formula of ``torch.nn.functional.cross_entropy(label_smoothing=e)``), and a mixed batch pairs
image i with image B-1-i (the batch reversed, timm's default), pixels and targets with the same
weight: mixup blends whole images with a Beta(alpha, alpha) weight; cutmix pastes a box and
weighs by its area. Which of them a batch gets, and its weight and box, are the mixing numbers of
the batch's first image (``augment.Recipe.draw``, from (seed, epoch, image)): resumed runs and
any number of workers mix identically.

Exactness: a batch is mixed with itself, so ``train.grad_accum_steps`` k micro-batches are k
separately mixed batches, not one mixed batch of k * b (and under msrun each rank mixes its own
batch): the task declares accumulation approximate, as for BatchNorm.
"""

from __future__ import annotations

import mindspore as ms
from mindspore import Tensor, nn, ops

from .augment import MIX, Augment


class RecipeLoss(nn.Cell):
    """Mean cross-entropy against smoothed, optionally mixed targets, in float32. With
    ``augment``, the images arrive raw (in [0, 1], at the recipe's base size) with a row of
    augmentation numbers each, and are augmented and normalised here, inside the train step."""

    def __init__(self, network: nn.Cell, classes: int, smoothing: float = 0.0, augment: Augment | None = None,
                 mixing: bool = False, size: int = 0):
        super().__init__()
        self.network, self.augment, self.mixing, self.classes = network, augment, mixing, classes
        self.on = Tensor(1.0 - smoothing + smoothing / classes, ms.float32)
        self.off = Tensor(smoothing / classes, ms.float32)
        self.pixels = Tensor(list(range(size)) or [0], ms.float32)

    def construct(self, image, label, params=None):  # (B, C, H, W), (B,) int32, (B, PARAMS) float32
        x = image if self.augment is None else self.augment(image, params)
        target = ops.one_hot(label, self.classes, self.on, self.off)  # (B, classes)
        if self.mixing:
            x, target = self.mix(x, target, params[0, MIX:MIX + 6])
        logits = self.network(x)
        return ops.mean(-(target * ops.log_softmax(logits, -1)).sum(-1))

    def mix(self, x, target, row):
        """``row``: kind (0 none, 1 mixup, 2 cutmix), weight of the batch itself, box y0, y1, x0, x1."""
        kind, lam = row[0], row[1]
        rows, cols = self.pixels.reshape(1, 1, -1, 1), self.pixels.reshape(1, 1, 1, -1)
        box = ((rows >= row[2]) & (rows < row[3]) & (cols >= row[4]) & (cols < row[5])).astype(ms.float32)
        # Per pixel, the weight of the partner image (the reversed batch): 1 - lam everywhere, or the box.
        partner = (kind == 1).astype(ms.float32) * (1 - lam) + (kind == 2).astype(ms.float32) * box
        x = x * (1 - partner) + ops.flip(x, (0,)) * partner
        target = lam * target + (1 - lam) * ops.flip(target, (0,))
        return x, target
