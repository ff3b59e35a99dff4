"""Image reading for the tasks that take pictures: decoding, resizing and the ``.npz`` layout
in one place, with errors that name the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..engine.errors import DataError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp"}


def open_image(file: Path) -> Image.Image:
    """A decoded image; 16-bit grey as the training pipeline decodes it (the high byte: MindSpore's
    ``vision.Decode``), never clipped at 255 as Pillow's ``convert`` would."""
    try:
        image = Image.open(file)
        image.load()
    except FileNotFoundError:
        raise DataError(f"{file}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{file}: a folder, not an image file") from None
    except Image.DecompressionBombError as exc:  # a header claiming billions of pixels
        raise DataError(f"{file}: not read ({str(exc).split(' could be')[0].rstrip(',')})") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise DataError(f"{file}: not a readable image (corrupt or unsupported format)") from None
    if image.mode.startswith("I;16") or image.mode == "I":
        image = Image.fromarray((np.asarray(image, np.uint32) >> 8).clip(0, 255).astype(np.uint8), "L")
    return image


def to_array(image: Image.Image, size: int, channels: int) -> np.ndarray:
    """One PIL image -> float32 (C, size, size) in [0, 1]: grayscale (C=1) or RGB (C=3)."""
    image = image.convert("L" if channels == 1 else "RGB").resize((size, size))
    array = np.asarray(image, dtype=np.float32) / 255.0
    return array[None] if channels == 1 else array.transpose(2, 0, 1)


def eval_view(file: Path, meta: dict) -> np.ndarray:
    """The evaluation view of an image file, with Pillow alone (``python -m <package> predict``),
    as ``files.ImageFiles`` prepares it: the shorter side resized to round(size / eval_crop)
    (Pillow's resampling, not MindSpore's), the centre size x size kept, then grey (as there,
    after the resize), in [0, 1], normalised with the task meta's mean and std -> float32
    (C, size, size)."""
    size, channels = meta["image_size"], meta["channels"]
    image = open_image(file).convert("RGB")
    short = round(size / meta.get("eval_crop", 1.0))
    scale = short / min(image.size)
    width, height = max(short, int(image.width * scale)), max(short, int(image.height * scale))
    resample = Image.BICUBIC if meta.get("interpolation") == "bicubic" else Image.BILINEAR
    if (width, height) != image.size:
        image = image.resize((width, height), resample)
    left, top = (width - size) // 2, (height - size) // 2
    image = image.crop((left, top, left + size, top + size))
    array = np.asarray(image.convert("L") if channels == 1 else image, dtype=np.float32) / 255.0
    array = array[None] if channels == 1 else array.transpose(2, 0, 1)
    mean = np.asarray(meta["mean"], np.float32).reshape(-1, 1, 1)
    std = np.asarray(meta["std"], np.float32).reshape(-1, 1, 1)
    return (array - mean) / std


def read_npz(path: Path, size: int, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """``images`` (N, H, W[, C], uint8 or float in [0, 1]) and ``labels`` (N,) from an .npz
    file -> float32 (N, C, size, size) in [0, 1] and int32 labels."""
    try:
        with np.load(path) as arrays:
            images, labels = arrays["images"], arrays["labels"].astype(np.int32)
    except (OSError, ValueError, KeyError) as exc:
        raise DataError(f"{path}: cannot read 'images' and 'labels' arrays ({exc})") from None
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4 or len(images) != len(labels) or len(images) == 0:
        raise DataError(f"{path}: images must be (N, H, W[, C]) with one label each, N > 0")
    if images.dtype != np.uint8:  # floats are taken to be in [0, 1]
        images = (np.clip(images, 0, 1) * 255).round().astype(np.uint8)
    arrays = [to_array(Image.fromarray(img[..., 0] if img.shape[-1] == 1 else img), size, channels)
              for img in images]
    return np.stack(arrays), labels
