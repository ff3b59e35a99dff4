"""Train-time augmentation: every random number drawn on the host, the pixel ops on the device.

A Python op per image in ``mindspore.dataset`` holds the GIL, so an augmented input pipeline
stops scaling with ``data.workers``. Here the pipeline runs MindSpore's C++ ops only (decode,
shorter side to ``base``, centre square), and ``Recipe.draw`` turns (seed, epoch, image) into
one float32 row of ``PARAMS`` numbers, a column of the batch; ``Augment`` applies a whole
batch's rows at once, inside the compiled train step:

1. one affine resampling (``grid_sample``) composing the random resized crop (from the centre
   square), the flip and the geometric ops of RandAugment / TrivialAugment (shear, translate,
   rotate; black fill, as torchvision's default);
2. colour ops in a fixed order: brightness, saturation, contrast (RandAugment's and
   ``color_jitter``'s factors multiply: each op composes with itself exactly), sharpness,
   posterize, solarize, autocontrast; torchvision's Equalize is left out (a per-image histogram);
3. normalisation with the run's mean/std, then random erasing (to 0, the mean, as torchvision).

Where the pixels go is a cost trade (``Recipe.on_device``): on an accelerator they are nearly
free; on a CPU, resampling costs about 1.8 ms an image and RandAugment's colour ops 3 ms more
(128 x 128, 2 cores), so image files with a crop and flip alone keep the cheaper Python crop of
``images/files.py`` (same (seed, epoch, image) rule). A resumed run, any number of workers
and any rank see the same images either way. Mixing (mixup/cutmix) is drawn here too, per
image; ``mixing.py`` uses the first row of a batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from ...images.files import image_rng

# The row of one image: affine (6), colour (7), erase (on, y0, y1, x0, x1), mix (kind, lam, y0, y1, x0, x1).
THETA, BRIGHTNESS, SATURATION, CONTRAST, SHARPNESS, LEVELS, SOLARIZE, AUTOCONTRAST = 0, 6, 7, 8, 9, 10, 11, 12
ERASE, MIX, PARAMS = 13, 18, 24
RATIOS = (3 / 4, 4 / 3)  # crop aspect ratios, log-uniform (torchvision's RandomResizedCrop)
BINS = 31  # magnitude bins (torchvision)
# op: (RandAugment's largest magnitude, TrivialAugment's), as torchvision: translate is a fraction of
# the image for RandAugment, pixels (32) for TrivialAugmentWide.
SPACE = {"identity": (0, 0), "shear_x": (0.3, 0.99), "shear_y": (0.3, 0.99), "translate_x": (150 / 331, 32.0),
         "translate_y": (150 / 331, 32.0), "rotate": (30.0, 135.0), "brightness": (0.9, 0.99),
         "saturation": (0.9, 0.99), "contrast": (0.9, 0.99), "sharpness": (0.9, 0.99),
         "posterize": (4, 6), "solarize": (1.0, 1.0), "autocontrast": (0, 0)}
OPS = tuple(SPACE)


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
        affine = self._crop(rng)
        colour = {"brightness": 1.0, "saturation": 1.0, "contrast": 1.0, "sharpness": 1.0, "levels": 256.0,
                  "solarize": 2.0, "autocontrast": 0.0}
        for op, magnitude in self._ops(rng):
            affine = affine @ _geometry(op, magnitude)
            _colour(op, magnitude, colour)
        j = self.color_jitter
        for key in ("brightness", "contrast", "saturation"):
            colour[key] *= rng.uniform(max(0.0, 1 - j), 1 + j) if j else 1.0
        row[THETA:THETA + 6] = affine[:2].ravel()
        row[BRIGHTNESS:AUTOCONTRAST + 1] = [colour[k] for k in ("brightness", "saturation", "contrast", "sharpness",
                                                                "levels", "solarize", "autocontrast")]
        row[ERASE:ERASE + 5] = self._erase(rng)
        row[MIX:MIX + 6] = self._mix(rng)
        return row

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

    def _ops(self, rng) -> list[tuple[str, float]]:
        """RandAugment: 2 ops at bin ``magnitude``; TrivialAugment: 1 op at a random bin; signed at random."""
        if self.auto_augment == "none":
            return []
        wide = self.auto_augment == "trivialaugment"
        count, fixed_bin = (1, None) if wide else (2, self.magnitude)
        chosen = []
        for _ in range(count):
            op = OPS[rng.randrange(len(OPS))]
            level = (rng.randrange(BINS) if fixed_bin is None else fixed_bin) / (BINS - 1)  # 0..1
            magnitude = SPACE[op][wide] * level
            if wide and op.startswith("translate"):  # pixels -> a fraction of the image
                magnitude /= self.size
            if op not in ("posterize", "solarize") and rng.random() < 0.5:
                magnitude = -magnitude
            chosen.append((op, magnitude))
        return chosen

    def _erase(self, rng) -> list[float]:
        """torchvision's RandomErasing (area 2-33 %, aspect 0.3-3.3, 10 tries) in output pixels."""
        if not self.random_erase or rng.random() >= self.random_erase:
            return [0, 0, 0, 0, 0]
        for _ in range(10):
            area = rng.uniform(0.02, 0.33) * self.size ** 2
            ratio = math.exp(rng.uniform(math.log(0.3), math.log(3.3)))
            h, w = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
            if h < self.size and w < self.size:
                top, left = rng.randrange(self.size - h + 1), rng.randrange(self.size - w + 1)
                return [1, top, top + h, left, left + w]
        return [0, 0, 0, 0, 0]

    def _mix(self, rng) -> list[float]:
        """kind (0 none, 1 mixup, 2 cutmix), the first image's weight, cutmix's box (timm's rand_bbox)."""
        if not self.mixing or rng.random() >= self.mix_prob:
            return [0, 1, 0, 0, 0, 0]
        cut = self.cutmix is not None and (self.mixup is None or rng.random() < self.mix_switch_prob)
        lam = rng.betavariate(self.cutmix, self.cutmix) if cut else rng.betavariate(self.mixup, self.mixup)
        if not cut:
            return [1, lam, 0, 0, 0, 0]
        side = int(self.size * math.sqrt(1 - lam))
        cy, cx = rng.randrange(self.size), rng.randrange(self.size)
        y0, y1 = np.clip([cy - side // 2, cy + side // 2], 0, self.size)
        x0, x1 = np.clip([cx - side // 2, cx + side // 2], 0, self.size)
        return [2, 1 - (y1 - y0) * (x1 - x0) / self.size ** 2, y0, y1, x0, x1]  # lam: the box's true area


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


class Augment(nn.Cell):
    """(B, C, base, base) images (float in [0, 1], or uint8 pixels) + their (B, PARAMS) rows ->
    (B, C, size, size) float32, normalised."""

    def __init__(self, recipe: Recipe, mean, std):
        super().__init__()
        self.size, self.geometric, self.colour = recipe.size, recipe.geometric, recipe.colour
        self.erase = recipe.random_erase > 0
        self.mean = Tensor(np.asarray(mean, np.float32).reshape(1, -1, 1, 1))
        self.std = Tensor(np.asarray(std, np.float32).reshape(1, -1, 1, 1))
        self.gray = Tensor(np.array([0.299, 0.587, 0.114], np.float32).reshape(1, 3, 1, 1))
        smooth = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13  # PIL's SMOOTH, as torchvision
        self.smooth = Tensor(np.tile(smooth, (3, 1, 1, 1)))
        inner = np.zeros((1, 1, recipe.size, recipe.size), np.float32)
        inner[..., 1:-1, 1:-1] = 1
        self.inner = Tensor(inner)  # sharpness blurs the inner pixels only; the border stays (torchvision)
        self.pixels = Tensor(np.arange(recipe.size, dtype=np.float32))

    def construct(self, image, params):
        b, c = image.shape[0], image.shape[1]
        x = image.astype(ms.float32) / 255 if image.dtype == ms.uint8 else image
        if self.geometric:
            grid = ops.affine_grid(params[:, THETA:THETA + 6].reshape(b, 2, 3), (b, c, self.size, self.size),
                                   align_corners=False)
            x = ops.grid_sample(x, grid, "bilinear", "zeros", False)
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
