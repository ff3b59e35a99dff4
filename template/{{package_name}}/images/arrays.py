"""Images as arrays: ``.npz`` files (or your loader's arrays) read and checked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from ..engine.errors import DataError


def read_npz(path: Path, size: int, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """``images`` (N, H, W[, C]: uint8, or float in [0, 1]) and ``labels`` (N,) of an .npz file -> float32
    (N, C, size, size) in [0, 1] and int32 labels; a bad value is refused, naming the first."""
    try:
        with np.load(path) as arrays:
            images, labels = arrays["images"], arrays["labels"]
    except (OSError, ValueError, KeyError) as exc:
        raise DataError(f"{path}: cannot read 'images' and 'labels' arrays ({exc})") from None
    return image_arrays(path, images, labels, size, channels)


def image_arrays(path, images: np.ndarray, labels: np.ndarray, size: int, channels: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``read_npz`` of arrays in hand (``path`` names where they came from in errors)."""
    images, labels = np.asarray(images), np.asarray(labels)
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4 or labels.ndim != 1 or len(images) != len(labels) or len(images) == 0:
        raise DataError(f"{path}: images must be (N, H, W[, C]) with one label each, N > 0")
    labels = class_indices(path, labels)
    images = pixels_uint8(path, images)
    arrays = [to_array(Image.fromarray(img[..., 0] if img.shape[-1] == 1 else img), size, channels)
              for img in images]
    return np.stack(arrays), labels


def class_indices(path: Path, labels: np.ndarray) -> np.ndarray:
    """An .npz's ``labels`` as int32 class indices; a value that is not one is refused."""
    if labels.dtype.kind not in "iuf" and labels.dtype != bool:
        raise DataError(f"{path}: labels are {labels.dtype}, not class indices (integers 0, 1, ...)")
    whole = np.ones(len(labels), bool)
    if labels.dtype.kind == "f":
        whole = np.isfinite(labels) & (labels == np.round(labels))
    bad = np.flatnonzero(~whole | (labels < 0) | (labels > np.iinfo(np.int32).max))
    if len(bad):
        i = int(bad[0])
        raise DataError(f"{path}: labels[{i}] = {labels[i]} is not a class index (integers from 0); "
                        f"{len(bad)} such label(s)")
    return labels.astype(np.int32)


def pixels_uint8(path: Path, images: np.ndarray) -> np.ndarray:
    """An .npz's ``images`` as uint8: floats must be in [0, 1] (scaled by 255), other integers in 0-255."""
    if images.dtype == np.uint8:
        return images
    if images.dtype.kind not in "iuf":
        raise DataError(f"{path}: images are {images.dtype}; expected uint8 (0-255) or float (0-1)")
    low, high = (0.0, 1.0) if images.dtype.kind == "f" else (0, 255)
    flat = images.reshape(len(images), -1)
    finite = np.isfinite(flat) if images.dtype.kind == "f" else np.ones(flat.shape, bool)
    for wrong, what in ((~finite, "NaN or inf"), (finite & ((flat < low) | (flat > high)), None)):
        rows = np.flatnonzero(wrong.any(axis=1))
        if len(rows):
            i = int(rows[0])
            pixel = np.unravel_index(int(np.flatnonzero(wrong[i])[0]), images.shape[1:])
            value = what or f"{flat[i][np.ravel_multi_index(pixel, images.shape[1:])]}, outside {low}-{high}"
            hint = ("float images are read as 0-1: divide by 255, or store uint8" if images.dtype.kind == "f"
                    else "store uint8 0-255")
            raise DataError(f"{path}: images[{i}] at (H, W, C) {tuple(int(x) for x in pixel)} is {value} "
                            f"({images.dtype}; {hint}); {len(rows)} such image(s)")
    return (images * 255).round().astype(np.uint8) if images.dtype.kind == "f" else images.astype(np.uint8)


def to_array(image: Image.Image, size: int, channels: int) -> np.ndarray:
    """One PIL image -> float32 (C, size, size) in [0, 1]: grayscale (C=1) or RGB (C=3)."""
    image = image.convert("L" if channels == 1 else "RGB").resize((size, size))
    array = np.asarray(image, dtype=np.float32) / 255.0
    return array[None] if channels == 1 else array.transpose(2, 0, 1)
