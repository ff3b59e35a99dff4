"""Image files streamed through ``mindspore.dataset``: listed up front, decoded in the workers.

``ImageFiles`` is an ``ExampleSource``: the engine reads its ``files``' bytes in C++; ``read`` checks
each file once (MindSpore's decoder crashes on some) and draws its crop from (seed, epoch, index),
so a resumed run and any number of workers see the same crops.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from mindspore import Tensor
from mindspore.dataset import vision
from PIL import Image

from ..engine import pipeline
from ..engine.errors import DataError
from .decode import BMP, JPEG, PNG, open_image
from .rng import image_rng

# What MindSpore's decoder reads (GIF and WebP are not among them: convert those first).
STREAM_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp"}
# Crop aspect ratios are drawn log-uniformly from this range (as torchvision's RandomResizedCrop).
RATIOS = (3 / 4, 4 / 3)


@dataclass(frozen=True)
class ImageTransform:
    """How a file becomes a float32 (C, size, size) array (``raw``: not normalised; RGB as uint8 pixels)."""

    size: int
    channels: Literal[1, 3]
    mean: tuple[float, ...] = (0.0,)  # in [0, 1] units: one value, or one per channel
    std: tuple[float, ...] = (1.0,)
    # none: resize + centre crop (eval); crop (+ flip): a random resized crop; flip: the eval view, mirrored
    augment: Literal["none", "crop", "crop_flip", "flip"] = "none"
    min_crop: float = 0.25  # the smallest random crop, as a fraction of the image's area
    seed: int = 0
    # Without augmentation: shorter side to round(size / eval_crop), then the centre (0.875: 224 from 256)
    eval_crop: float = 1.0
    # uint8, for the device to augment and normalise: 4x fewer bytes to batch and to copy there
    raw: bool = False
    # how resizing samples: bicubic is Pillow's (an imported CLIP's processor resizes with it)
    interpolation: Literal["bilinear", "bicubic"] = "bilinear"

    @classmethod
    def of(cls, meta: dict, **augmentation) -> ImageTransform:
        """The transform ``meta`` describes (``eval_crop``, ``interpolation``: optional), augmented if asked."""
        return cls(meta["image_size"], meta["channels"], tuple(np.atleast_1d(meta["mean"]).tolist()),
                   tuple(np.atleast_1d(meta["std"]).tolist()), eval_crop=meta.get("eval_crop", 1.0),
                   interpolation=meta.get("interpolation", "bilinear"), **augmentation)


class ImageFiles:
    """Image ``files`` and, per file, a row of each ``extra`` column (label, tokens...)."""

    crop_stream = "crop"  # names the crops' draws: a subclass's own stream stays independent

    def __init__(self, files: Sequence[str], extra: dict[str, np.ndarray], transform: ImageTransform):
        self.files = np.asarray(files, dtype=str)
        self.extra = extra
        self.transform = transform
        self.augmented = transform.augment != "none"
        # "file": the row's position in files (GeneratorDataset needs a column even when nothing else is read)
        self.columns = ("file", *(["crop"] if self.augmented else []), *extra)
        self.outputs = ("image", *extra)
        self.checked: set[int] = set()  # files read_bytes has passed, in this process

    def __len__(self) -> int:
        return len(self.files)

    def read(self, index: int, epoch: int) -> tuple[np.ndarray, ...]:
        if index not in self.checked:  # before its bytes reach Decode (the engine zips them on after this)
            read_bytes(self.files[index])
            self.checked.add(index)
        return (np.int32(index), *([self.crop(index, epoch)] if self.augmented else []),
                *(column[index] for column in self.extra.values()))

    def crop(self, index: int, epoch: int) -> np.ndarray:
        """The five numbers of the image's random crop in ``epoch`` (``CropAndFlip`` reads them)."""
        rng = image_rng(self.transform.seed, epoch, index, self.crop_stream)
        return np.array([rng.random() for _ in range(5)], np.float32)

    def operations(self) -> list[tuple[list, list[str], list[str]]]:
        t = self.transform
        inter = vision.Inter.PILCUBIC if t.interpolation == "bicubic" else vision.Inter.BILINEAR
        steps = [([vision.Decode()], ["image"], ["image"])]  # -> (H, W, 3) uint8, whatever the file's mode
        if t.augment in ("crop", "crop_flip"):
            steps.append(([CropAndFlip(t.min_crop, t.augment == "crop_flip")], ["image", "crop"], ["image"]))
            resize = [vision.Resize((t.size, t.size), inter)]
        else:
            # The shorter side (longer side int(side * long / short)), then the centre.
            resize = [vision.Resize(round(t.size / t.eval_crop), inter), vision.CenterCrop(t.size)]
            if t.augment == "flip":  # that eval view, mirrored half of the time
                steps += [(resize, ["image"], ["image"]), ([CropAndFlip(1.0, True, crop=False)], ["image", "crop"],
                                                           ["image"])]
                resize = []
        # Normalize works on [0, 255] values; the statistics are kept in [0, 1] units.
        mean, std = [m * 255 for m in t.mean], [s * 255 for s in t.std]
        if t.channels == 1:  # ConvertColor (vision.Grayscale fails after Decode) drops the channel axis;
            # ToTensor (C++, unlike a Python op) restores it, in [0, 1] units: raw grey is float32
            tail = [vision.ConvertColor(vision.ConvertMode.COLOR_RGB2GRAY), vision.ToTensor(),
                    *([] if t.raw else [vision.Normalize(t.mean[:1], t.std[:1], is_hwc=False)])]
        else:
            tail = [*([] if t.raw else [vision.Normalize(mean * (3 // len(mean)), std * (3 // len(std)))]),
                    vision.HWC2CHW()]
        steps.append((resize + tail, ["image"], ["image"]))
        return steps

    def check(self, index: int) -> None:
        file = self.files[index]
        read_bytes(file)
        open_image(Path(file))


class CropAndFlip:
    """The random resized crop drawn in ``read``: five numbers in [0, 1) -> area, aspect ratio, top, left,
    flip (``crop=False``: the flip alone)."""

    def __init__(self, min_crop: float, flip: bool, crop: bool = True):
        self.min_crop, self.flip, self.crop = min_crop, flip, crop

    def __call__(self, image: np.ndarray, crop: np.ndarray) -> np.ndarray:
        if not self.crop:
            return np.ascontiguousarray(image[:, ::-1]) if self.flip and crop[4] < 0.5 else image
        height, width = image.shape[:2]
        area = (self.min_crop + (1 - self.min_crop) * crop[0]) * height * width
        ratio = np.exp(np.log(RATIOS[0]) + (np.log(RATIOS[1]) - np.log(RATIOS[0])) * crop[1])  # width / height
        w = int(np.clip(round(np.sqrt(area * ratio)), 1, width))
        h = int(np.clip(round(np.sqrt(area / ratio)), 1, height))
        top, left = int(crop[2] * (height - h + 1)), int(crop[3] * (width - w + 1))
        out = image[top:top + h, left:left + w]
        if self.flip and crop[4] < 0.5:
            out = out[:, ::-1]
        return np.ascontiguousarray(out)


def read_bytes(file: str) -> np.ndarray:
    """A file's bytes, refused unless a whole image MindSpore decodes that passes libjpeg's checks:
    a bad JPEG header crashes MindSpore's decoder (SIGFPE, SIGSEGV) without a message."""
    try:
        data = np.fromfile(file, np.uint8)
    except OSError as exc:
        raise DataError(f"{file}: cannot read ({exc.strerror})") from None
    head = data[:8].tobytes()
    if not head.startswith((JPEG, PNG, BMP)):
        raise DataError(f"{file}: not a readable image (not a JPEG, PNG or BMP file)")
    if (head.startswith(JPEG) and not jpeg_complete(data.tobytes())) or (
            head.startswith(PNG) and b"IEND" not in data[-1024:].tobytes()):
        raise DataError(f"{file}: not a readable image (truncated)")
    if head.startswith(JPEG) and (problem := jpeg_problem(data.tobytes())):
        raise DataError(f"{file}: not a readable image (corrupt JPEG: {problem})")
    return data


def jpeg_problem(data: bytes) -> str | None:
    """What Pillow (libjpeg) finds wrong in a JPEG, or None; decoded at 1/8 scale (0.1 ms for 160 x 160)."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
            image.load()
    except Image.DecompressionBombError as exc:
        return str(exc).split(" could be")[0].rstrip(",")
    except (OSError, SyntaxError, ValueError) as exc:  # UnidentifiedImageError is an OSError
        return str(exc) or type(exc).__name__
    return None


def jpeg_complete(data: bytes) -> bool:
    """Whether a JPEG's headers are whole and an end-of-image marker (FF D9) follows its first scan;
    headers are skipped by length (an EXIF thumbnail has its own FF D9), bytes after it allowed."""
    at = 2  # after the start-of-image marker FF D8
    while at + 4 <= len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], int.from_bytes(data[at + 2:at + 4], "big")
        if marker == 0xDA:  # start of scan: the compressed data follows its header
            return data.find(b"\xff\xd9", at + 2 + length) >= 0
        at += 2 + length
    return False


def statistics(files: Sequence[str], size: int, channels: Literal[1, 3], sample: int, seed: int,
               workers: int, eval_crop: float = 1.0) -> tuple[list[float], list[float]]:
    """Per-channel mean and std in [0, 1] of at most ``sample`` files drawn with ``seed``, as eval sees them."""
    pick = np.sort(np.random.default_rng([seed, 0x57A7]).permutation(len(files))[:sample])
    source = ImageFiles([files[i] for i in pick], {}, ImageTransform(size, channels, eval_crop=eval_crop))
    total, squares, count = np.zeros(channels), np.zeros(channels), 0
    for (images,) in pipeline.batches(source, np.arange(len(pick)), 0, 64, workers, drop_remainder=False):
        pixels = images.transpose(1, 0, 2, 3).reshape(channels, -1).astype(np.float64)
        total, squares, count = total + pixels.sum(1), squares + (pixels ** 2).sum(1), count + pixels.shape[1]
    mean = total / count
    std = np.sqrt(np.maximum(squares / count - mean ** 2, 0))
    return [round(float(m), 6) for m in mean], [round(float(s), 6) or 1.0 for s in std]



def predict_files(cell, files: Sequence[str], meta: dict, rows: np.ndarray, workers: int,
                  batch_size: int = 128) -> np.ndarray:
    """``cell``'s float32 outputs on image files (``rows`` of them, in order) as ``meta`` prepares them."""
    source = ImageFiles(files, {}, ImageTransform.of(meta))
    outputs = [cell(Tensor(images)).asnumpy()
               for (images,) in pipeline.batches(source, rows, 0, batch_size, workers, drop_remainder=False)]
    return np.concatenate(outputs).astype(np.float32)
