"""Vision data: an .npz (e.g. the embedded digits) or your own loader's arrays, decoded once and
batched from memory (the fastest path for small data), or a folder of photos (the ``folders`` feature:
``folders.py``); split and normalised. Augmentation on the device: the ``recipes`` feature's ``augment.py``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...engine import seams
from ...engine.arrays import normalise, stratified_split
from ...engine.errors import DataError
from ...engine.seams import is_spec
from ...engine.task import Data
from ...images.arrays import image_arrays, read_npz


def load_data(cfg) -> Data:
    kind, examples, labels, classes = read_examples(cfg)
    check_classes(classes, cfg)
    d = cfg.data
    if kind == "file":  # a folder of photos, listed (the folders feature: folders.py)
        from .folders import check_not_the_digits_settings, measure, train_files

        check_not_the_digits_settings(examples[0], cfg)
    else:
        check_every_class(labels, d.path)
    train_idx, eval_idx = stratified_split(labels, len(labels), d.eval_fraction, cfg.seed)
    if kind == "file":  # streamed and transformed batch by batch
        mean, std = normalisation(cfg, lambda: measure(examples[train_idx], cfg))
    else:  # an .npz, decoded: normalised in memory
        images = examples
        mean, std = normalisation(cfg, lambda: (float(images[train_idx].mean()), float(images[train_idx].std()) or 1.0))
    augment = d.augment if d.augment != "auto" else "none" if kind == "image" else "crop_flip"
    # An .npz is never cropped: its eval view (what predict and eval.py make of an image file) is the
    # whole image, resized; a folder's is the centre crop the pipeline takes.
    meta = {"classes": classes, "image_size": d.image_size, "channels": d.channels, "mean": mean, "std": std,
            "eval_crop": d.eval_crop if kind == "file" else 1.0, "data_path": d.path, "augment": augment}
    recipe = train_recipe(cfg, meta)  # None: no augmentation on the device, nothing mixed
    if kind == "file":
        train = train_files(examples[train_idx], labels[train_idx], meta, recipe, cfg)
    elif recipe is None:
        train = {"image": normalise(images[train_idx], meta), "label": labels[train_idx]}
    else:  # the recipes feature: + a row of augmentation numbers per image
        from .augment import AugmentedArrays

        train = AugmentedArrays(images[train_idx], labels[train_idx], recipe, meta)
    # Eval stays raw (images in [0, 1], or a listing): evaluate() prepares it with the meta in
    # force, which is the training run's own when eval.py scores a checkpoint on other data.
    return Data(train=train, eval={kind: examples[eval_idx], "label": labels[eval_idx]}, meta=meta)


def load_eval_data(cfg, meta: dict) -> Data:
    """What ``eval.py`` scores for a checkpoint of ``meta`` (which carries its normalisation: nothing is
    measured): the held-out split of the data it was trained on (``meta["data_path"]``, as resolved
    paths), else every example. A folder's classes match the checkpoint's by name, an .npz's by index."""
    kind, examples, labels, classes = read_examples(cfg)
    if kind == "file":  # the folders feature
        from .folders import labels_by_name

        labels = labels_by_name(labels, classes, meta["classes"], cfg.data.path)
    elif (beyond := np.flatnonzero(labels >= len(meta["classes"]))).size:
        raise DataError(f"{cfg.data.path}: labels[{beyond[0]}] = {labels[beyond[0]]} is not one of the checkpoint's "
                        f"{len(meta['classes'])} classes (0-{len(meta['classes']) - 1})")
    trained_on = meta.get("data_path", cfg.data.path)  # absent: a checkpoint from before data_path was kept
    if trained_on is not None and Path(trained_on).resolve() == Path(cfg.data.path).resolve():
        rows = stratified_split(labels, len(labels), cfg.data.eval_fraction, cfg.seed)[1]
    else:
        rows = np.arange(len(labels))
    return Data(train={}, eval={kind: examples[rows], "label": labels[rows]}, meta=meta)


def read_examples(cfg) -> tuple[str, np.ndarray, np.ndarray, list[str]]:
    """``("image", images, labels, classes)`` of an .npz (float32 (N, C, H, W) in [0, 1]) or
    ``("file", paths, labels, classes)`` of an image folder (listed, nothing decoded)."""
    path = Path(cfg.data.path)
    if path.is_dir():  # the folders feature (the config refuses a folder without it)
        from .folders import list_folder

        return ("file", *list_folder(path))
    if path.suffix == ".npz" and path.is_file():
        images, labels = read_npz(path, cfg.data.image_size, cfg.data.channels)
        return "image", images, labels, [str(c) for c in range(int(labels.max()) + 1)]
    if is_spec(cfg.data.path):
        return ("image", *your_arrays(cfg))
    raise DataError(f"data.path={cfg.data.path!r}: expected an .npz file, an image folder or your own "
                    "loader as module:function")


def your_arrays(cfg) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``data.path: my_code:load``: ``load()`` returns ``(images, labels)`` as an .npz holds them
    (images (N, H, W[, C]) uint8 0-255 or float in [0, 1], labels class indices), or
    ``(images, labels, class names)``; checked and resized as an .npz is."""
    spec = cfg.data.path
    try:
        arrays = seams.load("data.path", spec, function=True)()
    except TypeError as exc:  # a loader that needs arguments
        raise DataError(f"data.path={spec}: {exc}; a loader takes no arguments") from None
    if not isinstance(arrays, tuple) or len(arrays) not in (2, 3):
        raise DataError(f"data.path={spec}: returned {type(arrays).__name__}; return (images, labels) or "
                        "(images, labels, class names)")
    images, labels = image_arrays(f"data.path={spec}", *arrays[:2], cfg.data.image_size, cfg.data.channels)
    classes = [str(c) for c in range(int(labels.max()) + 1)]
    if len(arrays) == 3:
        if len(arrays[2]) != len(classes):
            raise DataError(f"data.path={spec}: {len(arrays[2])} class names for labels 0..{len(classes) - 1}")
        classes = [str(name) for name in arrays[2]]
    return images, labels, classes


def train_recipe(cfg, meta: dict):
    """The recipes feature's ``Recipe`` of this run's training images, or None when they need none
    (without the feature, the config refused every value that needs one)."""
    if not seams.present("tasks.vision.recipes"):
        return None
    from .recipes import recipe_of

    return recipe_of(cfg, meta)


def check_every_class(labels: np.ndarray, path: str) -> None:
    """An .npz's classes are 0 to its largest label: one with no example is a numbering mistake."""
    if (empty := np.flatnonzero(np.bincount(labels) == 0)).size:
        raise DataError(f"{path}: labels has no example of class {empty[0]} (labels run 0-{labels.max()}, "
                        f"{empty.size} class(es) empty): number the classes 0 to K-1 without gaps")


def check_classes(classes: list[str], cfg) -> None:
    if len(classes) < 2:
        raise DataError(f"data.path={cfg.data.path!r} has {len(classes)} class ({', '.join(classes)}): "
                        "a classifier needs at least two")


def normalisation(cfg, measure: Callable[[], tuple]) -> tuple:
    """Mean and std to standardise with: a pretrained backbone's own (the finetune feature's
    ``model.pretrained``); else ``data.mean`` and ``data.std`` when given; else ``measure()`` of
    this data's training images."""
    if cfg.model.pretrained:
        from .finetune import pretrained_normalisation

        return pretrained_normalisation(cfg)
    if cfg.data.mean is not None and cfg.data.std is not None:
        return cfg.data.mean, cfg.data.std
    return measure()
