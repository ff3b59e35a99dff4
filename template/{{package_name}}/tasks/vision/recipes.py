"""The training recipes of timm and torchvision beyond a crop and a flip (the optional ``recipes``
feature): RandAugment, TrivialAugment, colour jitter, random erasing, mixup and cutmix.

``augment.py`` draws an image's crop and flip; ``FullRecipe`` continues from the same random
stream and fills the rest of the row, and the cells here apply it inside the compiled train step:

1. one affine resampling (``grid_sample``) composing the crop and flip with the geometric ops of
   RandAugment / TrivialAugment (shear, translate, rotate; black fill, as torchvision's default);
2. colour ops in a fixed order: brightness, saturation, contrast (RandAugment's and
   ``color_jitter``'s factors multiply: each op composes with itself exactly), sharpness,
   posterize, solarize, autocontrast; torchvision's Equalize is left out (a per-image histogram);
3. normalisation with the run's mean/std, then random erasing (to 0, the mean, as torchvision).

Mixup and cutmix: ``mixing.py`` (drawn last, from the same stream).
"""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from ...engine.seams import is_spec
from .augment import COLOUR, ERASE, Augment, Recipe, RecipeLoss
from .mixing import MixingLoss
from .mixing import draw as draw_mix
from .model import CriterionLoss, your_criterion

BRIGHTNESS, SATURATION, CONTRAST, SHARPNESS, LEVELS, SOLARIZE, AUTOCONTRAST = range(COLOUR, COLOUR + 7)
BINS = 31  # magnitude bins (torchvision)
# op: (RandAugment's largest magnitude, TrivialAugment's), as torchvision: translate is a fraction of
# the image for RandAugment, pixels (32) for TrivialAugmentWide.
SPACE = {"identity": (0, 0), "shear_x": (0.3, 0.99), "shear_y": (0.3, 0.99), "translate_x": (150 / 331, 32.0),
         "translate_y": (150 / 331, 32.0), "rotate": (30.0, 135.0), "brightness": (0.9, 0.99),
         "saturation": (0.9, 0.99), "contrast": (0.9, 0.99), "sharpness": (0.9, 0.99),
         "posterize": (4, 6), "solarize": (1.0, 1.0), "autocontrast": (0, 0)}
OPS = tuple(SPACE)


class FullRecipe(Recipe):
    """A ``Recipe`` whose rows also hold RandAugment / TrivialAugment, jitter, erasing and mixing."""

    def more(self, rng, row: np.ndarray, affine: np.ndarray) -> np.ndarray:
        """After the crop, from the same ``rng``: the ops, jitter, erasing, then the mixing."""
        affine = draw(self, rng, row, affine)
        if self.mixing:
            draw_mix(self, rng, row)
        return affine


def draw(recipe: Recipe, rng, row: np.ndarray, affine: np.ndarray) -> np.ndarray:
    """Fill ``row``'s colour and erase columns from ``rng``; return ``affine`` (the crop) with the geometric ops."""
    colour = {"brightness": 1.0, "saturation": 1.0, "contrast": 1.0, "sharpness": 1.0, "levels": 256.0,
              "solarize": 2.0, "autocontrast": 0.0}
    for op, magnitude in _ops(recipe, rng):
        affine = affine @ _geometry(op, magnitude)
        _colour(op, magnitude, colour)
    j = recipe.color_jitter
    for key in ("brightness", "contrast", "saturation"):
        colour[key] *= rng.uniform(max(0.0, 1 - j), 1 + j) if j else 1.0
    row[BRIGHTNESS:AUTOCONTRAST + 1] = [colour[k] for k in ("brightness", "saturation", "contrast", "sharpness",
                                                            "levels", "solarize", "autocontrast")]
    row[ERASE:ERASE + 5] = _erase(recipe, rng)
    return affine


def _ops(recipe: Recipe, rng) -> list[tuple[str, float]]:
    """RandAugment: 2 ops at bin ``magnitude``; TrivialAugment: 1 op at a random bin; signed at random."""
    if recipe.auto_augment == "none":
        return []
    wide = recipe.auto_augment == "trivialaugment"
    count, fixed_bin = (1, None) if wide else (2, recipe.magnitude)
    chosen = []
    for _ in range(count):
        op = OPS[rng.randrange(len(OPS))]
        level = (rng.randrange(BINS) if fixed_bin is None else fixed_bin) / (BINS - 1)  # 0..1
        magnitude = SPACE[op][wide] * level
        if wide and op.startswith("translate"):  # pixels -> a fraction of the image
            magnitude /= recipe.size
        if op not in ("posterize", "solarize") and rng.random() < 0.5:
            magnitude = -magnitude
        chosen.append((op, magnitude))
    return chosen


def _erase(recipe: Recipe, rng) -> list[float]:
    """torchvision's RandomErasing (area 2-33 %, aspect 0.3-3.3, 10 tries) in output pixels."""
    size = recipe.size
    if not recipe.random_erase or rng.random() >= recipe.random_erase:
        return [0, 0, 0, 0, 0]
    for _ in range(10):
        area = rng.uniform(0.02, 0.33) * size ** 2
        ratio = math.exp(rng.uniform(math.log(0.3), math.log(3.3)))
        h, w = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
        if h < size and w < size:
            top, left = rng.randrange(size - h + 1), rng.randrange(size - w + 1)
            return [1, top, top + h, left, left + w]
    return [0, 0, 0, 0, 0]


def _geometry(op: str, m: float) -> np.ndarray:
    """Where an output point of the op reads from (3x3, normalised coordinates); signs are random.
    Shears pivot on the top-left corner (-1, -1), as torchvision's RandAugment (``center=[0, 0]``)."""
    g = np.eye(3)
    if op == "shear_x":
        g[0, 1] = g[0, 2] = m
    elif op == "shear_y":
        g[1, 0] = g[1, 2] = m
    elif op == "translate_x":
        g[0, 2] = 2 * m
    elif op == "translate_y":
        g[1, 2] = 2 * m
    elif op == "rotate":
        c, s = math.cos(math.radians(m)), math.sin(math.radians(m))
        g[:2, :2] = [[c, -s], [s, c]]
    return g


def _colour(op: str, m: float, colour: dict) -> None:
    if op in ("brightness", "saturation", "contrast", "sharpness"):
        colour[op] *= 1 + m
    elif op == "posterize":
        colour["levels"] = min(colour["levels"], 2.0 ** (8 - round(m)))  # bits 8 - m
    elif op == "solarize":
        colour["solarize"] = min(colour["solarize"], 1 - m)  # invert pixels >= threshold
    elif op == "autocontrast":
        colour["autocontrast"] = 1.0


class RecipeAugment(Augment):
    """``Augment`` with the colour ops and random erasing of the row (same input and output)."""

    def __init__(self, recipe: Recipe, mean, std):
        super().__init__(recipe, mean, std)
        self.colour, self.erase = recipe.colour, recipe.random_erase > 0
        self.gray = Tensor(np.array([0.299, 0.587, 0.114], np.float32).reshape(1, 3, 1, 1))
        smooth = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13  # PIL's SMOOTH, as torchvision
        self.smooth = Tensor(np.tile(smooth, (3, 1, 1, 1)))
        inner = np.zeros((1, 1, recipe.size, recipe.size), np.float32)
        inner[..., 1:-1, 1:-1] = 1
        self.inner = Tensor(inner)  # sharpness blurs the inner pixels only; the border stays (torchvision)
        self.pixels = Tensor(np.arange(recipe.size, dtype=np.float32))

    def construct(self, image, params):
        b = image.shape[0]
        x = self.resample(image, params)
        if self.colour:
            x = self.colour_ops(x, params)
        x = (x - self.mean) / self.std
        if self.erase:
            x = x * (1 - self.box(params[:, ERASE + 1:ERASE + 5]) * params[:, ERASE].reshape(b, 1, 1, 1))
        return x

    def colour_ops(self, x, params):
        def factor(i):
            return params[:, i].reshape(-1, 1, 1, 1)

        x = ops.clamp(x * factor(BRIGHTNESS), 0.0, 1.0)
        if x.shape[1] == 3:
            gray = self.luma(x)
            x = ops.clamp(gray + factor(SATURATION) * (x - gray), 0.0, 1.0)
        gray = self.luma(x)
        mean = ops.mean(gray, (1, 2, 3), True)
        x = ops.clamp(mean + factor(CONTRAST) * (x - mean), 0.0, 1.0)
        c = x.shape[1]
        blurred = ops.pad(ops.conv2d(x, self.smooth[:c], groups=c), (1, 1, 1, 1))
        blurred = self.inner * blurred + (1 - self.inner) * x
        x = ops.clamp(blurred + factor(SHARPNESS) * (x - blurred), 0.0, 1.0)
        levels = factor(LEVELS)
        step = 256 / levels  # posterize: keep the top bits of the 8-bit pixel (256 levels: off)
        x = ops.where(levels < 256, ops.floor(ops.round(x * 255) / step) * step / 255, x)
        x = ops.where(x >= factor(SOLARIZE), 1 - x, x)
        low, high = ops.amin(x, (2, 3), True), ops.amax(x, (2, 3), True)
        stretched = ops.where(high > low, (x - low) / ops.maximum(high - low, 1e-6), x)
        auto = factor(AUTOCONTRAST)
        return auto * stretched + (1 - auto) * x

    def luma(self, x):
        return (x * self.gray).sum(1, keepdims=True) if x.shape[1] == 3 else x

    def box(self, bounds):
        """(B, 4) pixel bounds y0, y1, x0, x1 -> (B, 1, size, size) masks, 1 inside."""
        rows, cols = self.pixels.reshape(1, 1, -1, 1), self.pixels.reshape(1, 1, 1, -1)
        y0, y1, x0, x1 = (bounds[:, i].reshape(-1, 1, 1, 1) for i in range(4))
        return ((rows >= y0) & (rows < y1) & (cols >= x0) & (cols < x1)).astype(ms.float32)


def recipe_of(cfg, meta: dict) -> Recipe | None:
    """The recipe of this run's training images (``meta["augment"]``: data.augment resolved; a
    folder's images come at the eval resize, arrays at image_size), or None when they need none:
    a crop or flip of arrays needs one (a folder's are in its input pipeline), as do RandAugment,
    jitter, erasing and mixing."""
    d, files = cfg.data, reads_files(meta)
    mixing = (d.mixup is not None or d.cutmix is not None) and d.mix_prob > 0
    if not (not files and d.augment in ("crop", "crop_flip") or d.auto_augment != "none" or d.color_jitter > 0
            or d.random_erase > 0 or mixing):
        return None
    base = round(meta["image_size"] / meta.get("eval_crop", 1.0)) if files else meta["image_size"]
    kind = FullRecipe if Recipe.of(cfg, meta.get("augment", "none"), base, files).full else Recipe
    return kind.of(cfg, meta.get("augment", "none"), base, files)


def reads_files(meta: dict) -> bool:
    """Whether the run trains on image files (a folder), not arrays in memory."""
    path = str(meta.get("data_path") or "")  # a meta built in code may lack the keys
    return not (path.endswith(".npz") or is_spec(path))


def recipe_loss(network: nn.Cell, cfg, meta: dict, recipe: Recipe) -> nn.Cell:
    """The loss that augments (``Augment``, or ``RecipeAugment`` with colour and erasing), mixes
    (``mixing.py``) and smooths on the device; your ``train.loss`` after the augmentation."""
    cell = RecipeAugment if recipe.colour or recipe.random_erase > 0 else Augment
    augment = cell(recipe, meta["mean"], meta["std"]) if recipe.on_device else None
    if cfg.train.loss:  # the config refuses it with mixing or label smoothing (soft targets)
        return CriterionLoss(network, your_criterion(cfg), augment)
    if recipe.mixing:
        return MixingLoss(network, len(meta["classes"]), cfg.train.label_smoothing, augment, meta["image_size"])
    return RecipeLoss(network, len(meta["classes"]), cfg.train.label_smoothing, augment)
