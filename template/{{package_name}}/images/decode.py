"""Image files decoded with Pillow (no MindSpore): what training's pipeline refuses or keeps
(16-bit grey), and the evaluation view ``predict`` serves, with errors that name the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..engine.errors import DataError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp"}
JPEG, PNG, BMP = b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"BM"  # how the files MindSpore decodes begin


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


def eval_view(file: Path, meta: dict) -> np.ndarray:
    """The evaluation view of an image file, without MindSpore (``python -m <package> predict``),
    as ``files.ImageFiles`` prepares it for training's evaluations and eval.py: the shorter side
    resized to round(size / eval_crop) (the longer to int(short * long / shorter)), the centre
    size x size kept (offsets (side - size) // 2, as MindSpore's CenterCrop), grey after that
    (ITU-R 601 luma), in [0, 1], normalised with the meta's mean and std -> float32 (C, size, size).
    Resampling is the pipeline's: bilinear as MindSpore's (OpenCV's fixed point, not Pillow's
    antialiasing one: ``resize_bilinear``, within 1/255), bicubic as Pillow's (MindSpore's
    PILCUBIC is Pillow's). EXIF orientation is ignored here as MindSpore's decoder ignores it."""
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
    """(H, W, C) uint8 -> (height, width, C) uint8 as MindSpore's ``Inter.BILINEAR`` (OpenCV's
    INTER_LINEAR): half-pixel centres, edges clamped, two taps a side (no antialiasing), its
    11-bit fixed-point weights and rounding. Measured within one level of it, up and down."""
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
