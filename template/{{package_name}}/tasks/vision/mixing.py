"""Mixup and cutmix (the optional ``recipes`` feature, with ``recipes.py``): ``draw`` picks a
batch's mixing, ``MixingLoss`` applies it.

A mixed batch pairs image i with image B-1-i (the batch reversed, timm's default), pixels and
targets with the same weight: mixup blends whole images with a Beta(alpha, alpha) weight; cutmix
pastes a box and weighs by its area. Which of them a batch gets, and its weight and box, are the
mixing numbers of the batch's first image (drawn by ``recipes.FullRecipe`` from (seed, epoch,
image)): resumed runs and any number of workers mix identically.

Exactness: a batch is mixed with itself, so ``train.grad_accum_steps`` k micro-batches are k
separately mixed batches, not one mixed batch of k * b (and under msrun each rank mixes its own
batch): the task declares accumulation approximate, as for BatchNorm.
"""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import Tensor, ops

from .augment import MIX, Recipe, RecipeLoss


def draw(recipe: Recipe, rng, row: np.ndarray) -> None:
    """``row``'s mix columns: kind (0 none, 1 mixup, 2 cutmix), the first image's weight, cutmix's box
    (timm's rand_bbox)."""
    if rng.random() >= recipe.mix_prob:
        return  # the row's default: unmixed
    size = recipe.size
    cut = recipe.cutmix is not None and (recipe.mixup is None or rng.random() < recipe.mix_switch_prob)
    lam = rng.betavariate(recipe.cutmix, recipe.cutmix) if cut else rng.betavariate(recipe.mixup, recipe.mixup)
    if not cut:
        row[MIX:MIX + 6] = [1, lam, 0, 0, 0, 0]
        return
    side = int(size * math.sqrt(1 - lam))
    cy, cx = rng.randrange(size), rng.randrange(size)
    y0, y1 = np.clip([cy - side // 2, cy + side // 2], 0, size)
    x0, x1 = np.clip([cx - side // 2, cx + side // 2], 0, size)
    row[MIX:MIX + 6] = [2, 1 - (y1 - y0) * (x1 - x0) / size ** 2, y0, y1, x0, x1]  # lam: the box's true area


class MixingLoss(RecipeLoss):
    """``RecipeLoss`` with each batch mixed by its first row's mix columns."""

    def __init__(self, network, classes: int, smoothing: float = 0.0, augment=None, size: int = 0):
        super().__init__(network, classes, smoothing, augment)
        self.mixing = True
        self.pixels = Tensor(list(range(size)) or [0], ms.float32)

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
