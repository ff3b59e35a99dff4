"""Load images + labels from an .npz file or an ImageFolder directory; split and normalise."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...engine import checkpoint
from ...engine.arrays import normalise, stratified_split
from ...engine.errors import DataError
from ...engine.images import IMAGE_SUFFIXES, open_image, read_npz, to_array
from ...engine.task import Data
from .config import DataConfig


def load_data(cfg) -> Data:
    images, labels, classes = read_images(cfg.data)
    if len(classes) < 2:
        raise DataError(f"data.path={cfg.data.path!r} has {len(classes)} class ({', '.join(classes)}): "
                        "a classifier needs at least two")
    train_idx, eval_idx = stratified_split(labels, len(labels), cfg.data.eval_fraction, cfg.seed)
    mean, std = normalisation(cfg, images[train_idx])
    meta = {"classes": classes, "image_size": cfg.data.image_size, "channels": cfg.data.channels,
            "mean": mean, "std": std}
    # Eval images stay raw: evaluate() normalises them with the meta in force, which is the
    # training run's own when eval.py scores a checkpoint on other data.
    return Data(train={"image": normalise(images[train_idx], meta), "label": labels[train_idx]},
                eval={"image": images[eval_idx], "label": labels[eval_idx]}, meta=meta)


def normalisation(cfg, train_images: np.ndarray) -> tuple:
    """Mean and std to standardise with: a pretrained backbone's own (e.g. ImageNet's per-channel
    values for imported weights), so it sees inputs as it was trained on; else this data's."""
    if cfg.model.pretrained:
        _, pretrained = checkpoint.read(cfg.model.pretrained)
        return pretrained["task_meta"]["mean"], pretrained["task_meta"]["std"]
    return float(train_images.mean()), float(train_images.std()) or 1.0


def read_images(cfg: DataConfig) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Return images as float32 (N, C, H, W) in [0, 1], int32 labels and class names."""
    path = Path(cfg.path)
    if path.is_dir():
        images, labels, classes = _read_folder(path, cfg)
    elif path.suffix == ".npz" and path.is_file():
        images, labels, classes = _read_npz(path, cfg)
    else:
        raise DataError(f"data.path={cfg.path!r}: expected an .npz file or an image folder")
    if len(images) == 0:
        raise DataError(f"data.path={cfg.path!r} holds no images")
    return images, labels, classes


def _read_folder(root: Path, cfg: DataConfig):
    classes = sorted(d.name for d in root.iterdir() if d.is_dir())
    if not classes:
        raise DataError(f"{root}: an image folder needs one sub-folder per class")
    images, labels = [], []
    for label, name in enumerate(classes):
        for file in sorted((root / name).iterdir()):
            if file.suffix.lower() in IMAGE_SUFFIXES:
                images.append(to_array(open_image(file), cfg.image_size, cfg.channels))
                labels.append(label)
    return np.stack(images) if images else np.zeros((0,)), np.asarray(labels, np.int32), classes


def _read_npz(path: Path, cfg: DataConfig):
    images, labels = read_npz(path, cfg.image_size, cfg.channels)
    return images, labels, [str(c) for c in range(int(labels.max()) + 1)]
