"""Image files decoded with Pillow (no MindSpore) as training decodes them: the view ``predict`` serves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..engine.errors import DataError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp"}
JPEG, PNG, BMP = b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"BM"  # how the files MindSpore decodes begin


def open_image(file: Path) -> Image.Image:
    """A decoded image; 16-bit grey keeps its high byte as MindSpore's ``vision.Decode`` (not clipped)."""
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


def eval_view(file: Path, meta: dict) -> np.ndarray:
    """An image file's eval view as ``files.ImageFiles`` makes it: shorter side to round(size / eval_crop),
    centre crop, grey, normalised -> float32 (C, size, size). Bilinear as MindSpore's (``resize_bilinear``),
    bicubic as Pillow's; EXIF orientation ignored, as MindSpore's decoder does."""
    size, channels = meta["image_size"], meta["channels"]
    image = open_image(file)
    if image.format not in ("JPEG", "PNG", "BMP"):  # as training refuses it (files.read_bytes)
        raise DataError(f"{file}: not a readable image (not a JPEG, PNG or BMP file)")
    image = image.convert("RGB")
    short = round(size / meta.get("eval_crop", 1.0))
    w, h = image.size
    width, height = (short, int(short * h / w)) if w <= h else (int(short * w / h), short)
    if (width, height) == image.size:
        pixels = np.asarray(image)
    elif meta.get("interpolation") == "bicubic":
        pixels = np.asarray(image.resize((width, height), Image.BICUBIC))
    else:
        pixels = resize_bilinear(np.asarray(image), height, width)
    top, left = (height - size) // 2, (width - size) // 2
    pixels = pixels[top:top + size, left:left + size]
    array = (np.asarray(Image.fromarray(pixels).convert("L")) if channels == 1 else pixels).astype(np.float32) / 255
    array = array[None] if channels == 1 else array.transpose(2, 0, 1)
    mean = np.asarray(meta["mean"], np.float32).reshape(-1, 1, 1)
    std = np.asarray(meta["std"], np.float32).reshape(-1, 1, 1)
    return (array - mean) / std


def resize_bilinear(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """(H, W, C) uint8 -> (height, width, C) as MindSpore's ``Inter.BILINEAR`` (OpenCV's 11-bit fixed
    point, no antialiasing); measured within one level of it."""
    def taps(n_out: int, n_in: int):
        x = ((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5).astype(np.float32)
        lo = np.floor(x).astype(np.int64)
        frac = np.where(lo < 0, 0, x - lo).astype(np.float32)
        lo = np.maximum(lo, 0)
        frac, lo = np.where(lo >= n_in - 1, 0, frac).astype(np.float32), np.minimum(lo, n_in - 1)
        return (lo, np.minimum(lo + 1, n_in - 1), np.rint((1 - frac) * np.float32(2048)).astype(np.int64),
                np.rint(frac * np.float32(2048)).astype(np.int64))

    y0, y1, b0, b1 = taps(height, pixels.shape[0])
    x0, x1, a0, a1 = taps(width, pixels.shape[1])
    p = pixels.astype(np.int64)
    rows = p[:, x0] * a0[None, :, None] + p[:, x1] * a1[None, :, None]  # (H, width, C), x 2048
    top, bottom = rows[y0] >> 4, rows[y1] >> 4
    out = (((b0[:, None, None] * top) >> 16) + ((b1[:, None, None] * bottom) >> 16) + 2) >> 2
    return np.clip(out, 0, 255).astype(np.uint8)
