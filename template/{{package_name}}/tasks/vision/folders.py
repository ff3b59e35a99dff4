"""The ``folders`` feature: train, evaluate and predict on a folder of photos, one sub-folder per class
(``data.path: my/photos``). A folder is only listed here: ``mindspore.dataset`` workers decode its files
batch by batch (``images/files.py``), so memory does not grow with the number of images.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...engine.config import read_yaml
from ...engine.errors import DataError
from ...engine.runtime import resolve_workers
from ...images.decode import IMAGE_SUFFIXES, open_image
from ...images.files import STREAM_SUFFIXES, ImageFiles, ImageTransform, predict_files, statistics


def measure(files: np.ndarray, cfg) -> tuple[list[float], list[float]]:
    """Per-channel mean and std of a seeded sample (``data.stats_sample``) of the training files, as eval sees them."""
    d = cfg.data
    return statistics(files, d.image_size, d.channels, d.stats_sample, cfg.seed, resolve_workers(d.workers),
                      d.eval_crop)


def train_files(files: np.ndarray, labels: np.ndarray, meta: dict, recipe, cfg) -> ImageFiles | AugmentedFiles:
    """The training files as an ``ExampleSource``, with a row of augmentation numbers each when the
    recipes feature's ``recipe`` needs one (None: crop and flip in the pipeline)."""
    d = cfg.data
    if recipe is not None and recipe.on_device:  # shorter side to base, centre square, uint8: Augment does the rest
        transform = ImageTransform(recipe.base, d.channels, eval_crop=1.0, raw=True)
    else:  # crop + flip (if any) in the pipeline, as the eval transform otherwise
        transform = ImageTransform.of(meta, augment=meta["augment"], min_crop=d.min_crop, seed=cfg.seed)
    images = ImageFiles(files, {"label": labels}, transform)
    return images if recipe is None or not recipe.active else AugmentedFiles(images, recipe)


def folder_logits(forward, files: np.ndarray, meta: dict, rows: np.ndarray, cfg) -> np.ndarray:
    """``evaluate`` of image files: ``forward`` on ``files[rows]`` through the eval transform."""
    return predict_files(forward, files, meta, rows, resolve_workers(cfg.data.workers))


class AugmentedFiles:
    """An ``ImageFiles`` with the augmentation row as a last column (device augmentation: raw uint8 squares)."""

    def __init__(self, images: ImageFiles, recipe):  # recipe: augment.Recipe (the recipes feature)
        self.images, self.recipe, self.files = images, recipe, images.files
        self.columns, self.outputs = (*images.columns, "augment"), (*images.outputs, "augment")

    def __len__(self) -> int:
        return len(self.images)

    def read(self, index: int, epoch: int) -> tuple[np.ndarray, ...]:
        return (*self.images.read(index, epoch), self.recipe.draw(index, epoch))

    def operations(self) -> list:
        return self.images.operations()

    def check(self, index: int) -> None:
        self.images.check(index)


def labels_by_name(labels: np.ndarray, classes: list[str], known: list[str], path: str) -> np.ndarray:
    """Folder labels (positions in ``classes``) -> positions in ``known``, a checkpoint's classes."""
    unknown = [name for name in classes if name not in known]
    if unknown:
        listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
        raise DataError(f"data.path={path!r}: class {unknown[0]!r} is not one of the checkpoint's "
                        f"{len(known)} classes ({listed})")
    return np.asarray([known.index(name) for name in classes], np.int32)[labels]


# The embedded digits' data.image_size and data.channels, the generated config's defaults.
DIGITS_SETTINGS = (8, 1)


def check_not_the_digits_settings(first: str, cfg) -> None:
    """Refuse a folder of photos with the digits' 8x8 grey settings left in the config (not ``--set``)."""
    if (cfg.data.image_size, cfg.data.channels) != DIGITS_SETTINGS or not cfg.origin.get("files"):
        return  # (no files: a config rebuilt from a checkpoint, whose run passed this check)
    chosen = {item.partition("=")[0] for item in cfg.origin.get("overrides", [])}
    for layer in cfg.origin["files"][1:]:  # an experiment file over config.yaml that sets them chose them
        chosen |= {f"data.{key}" for key in (read_yaml(Path(layer)).get("data") or {})}
    if chosen & {"data.image_size", "data.channels"}:
        return
    with open_image(Path(first)) as image:
        colour, (w, h) = image.mode not in ("1", "L", "LA", "I", "I;16", "F"), image.size
    if colour or min(w, h) > 2 * DIGITS_SETTINGS[0]:
        size = min(64, min(w, h))
        raise DataError(f"data.path={cfg.data.path!r} holds {'colour' if colour else 'grey'} images ({first}: {w}x{h}) "
                        f"but data.image_size=8 and data.channels=1 are the embedded digits' settings: set yours, "
                        f"e.g. --set data.image_size={size} --set data.channels={3 if colour else 1} "
                        "(--set them to 8 and 1 to train on 8x8 grey as they are)")


def list_folder(root: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Image paths (sorted per class), int32 labels and class names (the sub-folder names, sorted)."""
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))  # not .ipynb_*
    if not classes:
        raise DataError(f"{root}: an image folder needs one sub-folder per class")
    files, labels = [], []
    for label, name in enumerate(classes):
        before = len(files)
        for file in sorted((root / name).iterdir()):
            suffix = file.suffix.lower()
            if suffix in IMAGE_SUFFIXES - STREAM_SUFFIXES:
                raise DataError(f"{file}: {suffix} images are not read here; convert them to PNG or JPEG")
            if suffix in STREAM_SUFFIXES:
                files.append(str(file))
                labels.append(label)
        if len(files) == before:  # a class the model could never learn: a mistake, not a class
            raise DataError(f"{root / name}: a class folder with no images ({', '.join(sorted(STREAM_SUFFIXES))}); "
                            "fill it or remove it")
    return np.asarray(files), np.asarray(labels, np.int32), classes
