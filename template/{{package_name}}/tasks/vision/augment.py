"""Train-time augmentation (the ``recipes`` feature): every random number drawn on the host, the
pixel ops on the device.

A Python op per image in ``mindspore.dataset`` holds the GIL, so an augmented input pipeline
stops scaling with ``data.workers``. Here the pipeline runs MindSpore's C++ ops only (decode,
shorter side to ``base``, centre square), and ``Recipe.draw`` turns (seed, epoch, image) into
one float32 row of ``PARAMS`` numbers, a column of the batch; ``Augment`` applies a whole
batch's rows at once, inside the compiled train step: one affine resampling (``grid_sample``)
for the random resized crop (from the centre square) and the flip, then normalisation with the
run's mean/std.

``recipes.py`` (RandAugment / TrivialAugment, ``color_jitter``, ``random_erase``) and ``mixing.py``
(mixup/cutmix) go further: ``FullRecipe`` fills more of the row from the same random stream, and
their cells augment and mix on the device.

Where the pixels go is a cost trade (``Recipe.on_device``): on an accelerator they are nearly
free; on a CPU, resampling costs about 1.8 ms an image and RandAugment's colour ops 3 ms more
(128 x 128, 2 cores), so image files with a crop and flip alone keep the cheaper Python crop of
``images/files.py`` (same (seed, epoch, image) rule). A resumed run, any number of workers
and any rank see the same images either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from ...engine.arrays import normalise
from ...images.rng import image_rng

# The row of one image: affine (6), colour (7), erase (on, y0, y1, x0, x1), mix (kind, lam, y0, y1, x0, x1);
# colour, erase and mix are the recipes feature's (recipes.py): neutral here.
THETA, COLOUR, ERASE, MIX, PARAMS = 0, 6, 13, 18, 24
NEUTRAL_COLOUR = (1.0, 1.0, 1.0, 1.0, 256.0, 2.0, 0.0)  # brightness .. autocontrast factors that change nothing
RATIOS = (3 / 4, 4 / 3)  # crop aspect ratios, log-uniform (torchvision's RandomResizedCrop)


@dataclass(frozen=True)
class Recipe:
    """What ``data.*`` asks of training images of ``size`` cut from a ``base`` square."""

    size: int
    base: int
    crop: bool = False
    flip: bool = False
    min_crop: float = 0.25
    auto_augment: str = "none"
    magnitude: int = 9
    color_jitter: float = 0.0
    random_erase: float = 0.0
    mixup: float | None = None
    cutmix: float | None = None
    mix_prob: float = 1.0
    mix_switch_prob: float = 0.5
    seed: int = 0
    files: bool = False  # image files: a crop and flip alone stay in the input pipeline (see on_device)

    @classmethod
    def of(cls, cfg, augment: str, base: int, files: bool = False) -> Recipe:
        d = cfg.data
        return cls(d.image_size, base, augment in ("crop", "crop_flip"), augment == "crop_flip", d.min_crop,
                   d.auto_augment, d.auto_augment_magnitude, d.color_jitter, d.random_erase, d.mixup, d.cutmix,
                   d.mix_prob, d.mix_switch_prob, cfg.seed, files)

    @property
    def on_device(self) -> bool:
        """Whether ``Augment`` does the pixels. Image files with a crop and flip only keep them in
        the input pipeline (``images/files.py``): per image, that Python op costs less on a
        CPU (about 0.2 ms) than resampling on it (about 1.8 ms, ``benchmarks/bench_augment.py``)."""
        heavy = self.auto_augment != "none" or self.color_jitter > 0 or self.random_erase > 0
        return heavy or (not self.files and (self.crop or self.flip))

    @property
    def geometric(self) -> bool:
        return self.crop or self.flip or self.auto_augment != "none" or self.base != self.size

    @property
    def colour(self) -> bool:
        return self.auto_augment != "none" or self.color_jitter > 0

    @property
    def full(self) -> bool:
        """Whether it needs the recipes feature (``recipes.py``): more than a crop and a flip."""
        return self.auto_augment != "none" or self.color_jitter > 0 or self.random_erase > 0 or self.mixing

    @property
    def mixing(self) -> bool:
        return (self.mixup is not None or self.cutmix is not None) and self.mix_prob > 0

    @property
    def active(self) -> bool:
        """Whether training images need a parameter row at all."""
        return self.on_device or self.mixing

    def draw(self, index: int, epoch: int) -> np.ndarray:
        """The (PARAMS,) float32 row of image ``index`` in ``epoch``: the same every time."""
        rng = image_rng(self.seed, epoch, index, "augment")
        row = np.zeros(PARAMS, np.float32)
        row[COLOUR:ERASE], row[MIX + 1] = NEUTRAL_COLOUR, 1.0  # no colour op; an unmixed image weighs 1
        affine = self.more(rng, row, self._crop(rng))
        row[THETA:THETA + 6] = affine[:2].ravel()
        return row

    def more(self, rng, row: np.ndarray, affine: np.ndarray) -> np.ndarray:
        """RandAugment, jitter, erasing and mixing: ``recipes.py``'s ``FullRecipe`` draws them here."""
        return affine

    def _crop(self, rng) -> np.ndarray:
        """Output coordinates (-1..1) -> base-image coordinates: the crop (and flip) as a 3x3 affine."""
        if self.crop:
            area = rng.uniform(self.min_crop, 1.0)
            ratio = math.exp(rng.uniform(math.log(RATIOS[0]), math.log(RATIOS[1])))  # width / height
            w, h = min(math.sqrt(area * ratio), 1.0), min(math.sqrt(area / ratio), 1.0)  # fractions of the base
            left, top = rng.uniform(0, 1 - w), rng.uniform(0, 1 - h)
        else:  # the centre, as evaluation crops it
            w = h = self.size / self.base
            left = top = (1 - w) / 2
        flip = -1.0 if self.flip and rng.random() < 0.5 else 1.0
        return np.array([[w * flip, 0, 2 * left + w - 1], [0, h, 2 * top + h - 1], [0, 0, 1]])


class Augment(nn.Cell):
    """(B, C, base, base) images (float in [0, 1], or uint8 pixels) + their (B, PARAMS) rows ->
    (B, C, size, size) float32, normalised."""

    def __init__(self, recipe: Recipe, mean, std):
        super().__init__()
        self.size, self.geometric = recipe.size, recipe.geometric
        self.mean = Tensor(np.asarray(mean, np.float32).reshape(1, -1, 1, 1))
        self.std = Tensor(np.asarray(std, np.float32).reshape(1, -1, 1, 1))

    def construct(self, image, params):
        return (self.resample(image, params) - self.mean) / self.std

    def resample(self, image, params):
        """The crop and flip (and the recipes' geometric ops): one affine resampling of the base square."""
        b, c = image.shape[0], image.shape[1]
        x = image.astype(ms.float32) / 255 if image.dtype == ms.uint8 else image
        if self.geometric:
            grid = ops.affine_grid(params[:, THETA:THETA + 6].reshape(b, 2, 3), (b, c, self.size, self.size),
                                   align_corners=False)
            x = ops.grid_sample(x, grid, "bilinear", "zeros", False)
        return x


class RecipeLoss(nn.Cell):
    """Mean cross-entropy against smoothed targets, in float32: ``(1 - e) * one_hot + e / classes``
    (``train.label_smoothing``: the formula of ``torch.nn.functional.cross_entropy(label_smoothing=e)``).
    With ``augment``, the images arrive raw (in [0, 1], at the recipe's base size) with a row of
    augmentation numbers each (``Augment``), and are augmented and normalised here, inside the
    train step. ``recipes.py``'s ``MixingLoss`` mixes the batch too."""

    def __init__(self, network: nn.Cell, classes: int, smoothing: float = 0.0, augment: nn.Cell | None = None):
        super().__init__()
        self.network, self.augment, self.mixing, self.classes = network, augment, False, classes
        self.on = Tensor(1.0 - smoothing + smoothing / classes, ms.float32)
        self.off = Tensor(smoothing / classes, ms.float32)

    def construct(self, image, label, params=None):  # (B, C, H, W), (B,) int32, (B, PARAMS) float32
        x = image if self.augment is None else self.augment(image, params)
        target = ops.one_hot(label, self.classes, self.on, self.off)  # (B, classes)
        if self.mixing:
            x, target = self.mix(x, target, params[0, MIX:MIX + 6])
        logits = self.network(x)
        return ops.mean(-(target * ops.log_softmax(logits, -1)).sum(-1))

    def mix(self, x, target, row):  # recipes.py's MixingLoss mixes
        return x, target


class AugmentedArrays:
    """Images in memory (raw in [0, 1] when the device augments, else normalised) with their
    augmentation rows: a ``TrainSource``."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, recipe: Recipe, meta: dict):
        self.images = images if recipe.on_device else normalise(images, meta)
        self.labels, self.recipe = labels, recipe

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, indices: np.ndarray, epoch: int) -> tuple[np.ndarray, ...]:
        rows = np.stack([self.recipe.draw(int(i), epoch) for i in indices])
        return self.images[indices], self.labels[indices], rows
