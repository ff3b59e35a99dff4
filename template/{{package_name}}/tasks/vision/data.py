"""Vision data: an ImageFolder listed and streamed, or an .npz held in memory; split and normalised.

An ImageFolder is only listed here (paths + labels): files are decoded, resized and
normalised batch by batch in ``mindspore.dataset`` workers (``images/files.py``), so
memory does not grow with the number of images. An ``.npz`` (e.g. the embedded digits) is
small: it is decoded once and batched from memory, the fastest path for small data.

Augmented training (``augment.py``): both kinds hand the train step raw images (a folder's as
uint8 pixels at the shorter side ``round(image_size / eval_crop)``, centre square; an .npz's in
[0, 1]) plus one row of augmentation numbers per image, drawn from (seed, epoch, index); the
step augments them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...engine import checkpoint, seams
from ...engine.arrays import normalise, stratified_split
from ...engine.config import read_yaml
from ...engine.errors import DataError
from ...engine.pipeline import resolve_workers
from ...engine.seams import is_spec
from ...engine.task import Data
from ...images.decode import IMAGE_SUFFIXES, image_arrays, open_image, read_npz
from ...images.files import STREAM_SUFFIXES, ImageFiles, ImageTransform, statistics
from .augment import Recipe


def load_data(cfg) -> Data:
    kind, examples, labels, classes = read_examples(cfg)
    check_classes(classes, cfg)
    if kind == "image":
        check_every_class(labels, cfg.data.path)
    else:
        check_not_the_digits_settings(examples[0], cfg)
    train_idx, eval_idx = stratified_split(labels, len(labels), cfg.data.eval_fraction, cfg.seed)
    d = cfg.data
    if kind == "image":  # an .npz, decoded: normalised in memory
        images = examples
        mean, std = normalisation(cfg, lambda: (float(images[train_idx].mean()), float(images[train_idx].std()) or 1.0))
    else:  # an image folder, listed: streamed and transformed batch by batch
        mean, std = normalisation(cfg, lambda: statistics(examples[train_idx], d.image_size, d.channels, d.stats_sample,
                                                          cfg.seed, resolve_workers(d.workers), d.eval_crop))
    augment = d.augment if d.augment != "auto" else "none" if kind == "image" else "crop_flip"
    # An .npz is never cropped: its eval view (what predict and eval.py make of an image file) is the
    # whole image, resized; a folder's is the centre crop the pipeline takes.
    meta = {"classes": classes, "image_size": d.image_size, "channels": d.channels, "mean": mean, "std": std,
            "eval_crop": d.eval_crop if kind == "file" else 1.0, "data_path": d.path, "augment": augment}
    recipe = train_recipe(cfg, meta)
    if kind == "image":
        # On the device, raw [0, 1] images; else normalised here once.
        train_images = images[train_idx] if recipe.on_device else normalise(images[train_idx], meta)
        train = {"image": train_images, "label": labels[train_idx]}
        if recipe.active:  # + a row of augmentation numbers per image
            train = AugmentedArrays(train_images, labels[train_idx], recipe)
    else:
        if recipe.on_device:  # the shorter side to base, centre square, uint8: Augment does the rest
            transform = ImageTransform(recipe.base, d.channels, eval_crop=1.0, raw=True)
        else:  # crop + flip (if any) in the pipeline, as the eval transform otherwise
            transform = ImageTransform.of(meta, augment=augment, min_crop=d.min_crop, seed=cfg.seed)
        train = ImageFiles(examples[train_idx], {"label": labels[train_idx]}, transform)
        if recipe.active:
            train = AugmentedFiles(train, recipe)
    # Eval stays raw (images in [0, 1], or a listing): evaluate() prepares it with the meta in
    # force, which is the training run's own when eval.py scores a checkpoint on other data.
    return Data(train=train, eval={kind: examples[eval_idx], "label": labels[eval_idx]}, meta=meta)


def load_eval_data(cfg, meta: dict) -> Data:
    """What ``eval.py`` scores, read for a checkpoint of ``meta``: nothing is measured and
    ``model.pretrained`` is not read (the checkpoint carries its weights and normalisation).

    - ``data.path`` is the data the checkpoint was trained on (``meta["data_path"]``, compared
      as resolved paths): its held-out split, exactly as the evaluations during training;
    - any other data: every example of it. A folder's classes are matched by name to the
      checkpoint's (any subset of them; an unknown one is refused); an .npz's labels are
      class indices, as in training.
    """
    kind, examples, labels, classes = read_examples(cfg)
    if kind == "file":
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
    if path.is_dir():
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


def train_recipe(cfg, meta: dict) -> Recipe:
    """The augmentation of this run's training images (``meta["augment"]``: data.augment resolved;
    a folder's images come at the eval resize, an .npz's at image_size)."""
    path = str(meta.get("data_path") or "")  # a meta built in code may lack the keys
    files = not (path.endswith(".npz") or is_spec(path))  # image files, not arrays in memory
    base = round(meta["image_size"] / meta.get("eval_crop", 1.0)) if files else meta["image_size"]
    recipe = Recipe.of(cfg, meta.get("augment", "none"), base, files)
    if recipe.full:  # the recipes feature (the config refused its keys without it)
        from .recipes import FullRecipe

        recipe = FullRecipe.of(cfg, meta.get("augment", "none"), base, files)
    return recipe


class AugmentedFiles:
    """An ``ImageFiles`` with the augmentation row as a last column. When the device augments,
    the files decode to raw base squares (uint8 RGB): a pipeline of C++ ops only (it scales with workers)."""

    def __init__(self, images: ImageFiles, recipe: Recipe):
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


class AugmentedArrays:
    """Decoded images (an .npz; raw when the device augments) with their augmentation rows: a ``TrainSource``."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, recipe: Recipe):
        self.images, self.labels, self.recipe = images, labels, recipe

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, indices: np.ndarray, epoch: int) -> tuple[np.ndarray, ...]:
        rows = np.stack([self.recipe.draw(int(i), epoch) for i in indices])
        return self.images[indices], self.labels[indices], rows


def labels_by_name(labels: np.ndarray, classes: list[str], known: list[str], path: str) -> np.ndarray:
    """Folder labels (positions in ``classes``) -> positions in ``known``, a checkpoint's classes."""
    unknown = [name for name in classes if name not in known]
    if unknown:
        listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
        raise DataError(f"data.path={path!r}: class {unknown[0]!r} is not one of the checkpoint's "
                        f"{len(known)} classes ({listed})")
    return np.asarray([known.index(name) for name in classes], np.int32)[labels]


def check_every_class(labels: np.ndarray, path: str) -> None:
    """An .npz's classes are 0 to its largest label: one with no example is a numbering mistake."""
    if (empty := np.flatnonzero(np.bincount(labels) == 0)).size:
        raise DataError(f"{path}: labels has no example of class {empty[0]} (labels run 0-{labels.max()}, "
                        f"{empty.size} class(es) empty): number the classes 0 to K-1 without gaps")


# The embedded digits' data.image_size and data.channels, the generated config's defaults.
DIGITS_SETTINGS = (8, 1)


def check_not_the_digits_settings(first: str, cfg) -> None:
    """A folder of photos with the digits' 8x8 grey settings left in the config would train on
    8x8 grey thumbnails without a word: refused, saying what to set (``--set`` them to keep them)."""
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


def check_classes(classes: list[str], cfg) -> None:
    if len(classes) < 2:
        raise DataError(f"data.path={cfg.data.path!r} has {len(classes)} class ({', '.join(classes)}): "
                        "a classifier needs at least two")


def normalisation(cfg, measure: Callable[[], tuple]) -> tuple:
    """Mean and std to standardise with: a pretrained backbone's own (e.g. ImageNet's per-channel
    values for imported weights), so it sees inputs as it was trained on; else ``data.mean`` and
    ``data.std`` when given; else ``measure()`` of this data's training images."""
    if cfg.model.pretrained:
        _, pretrained = checkpoint.read(cfg.model.pretrained)
        return pretrained["task_meta"]["mean"], pretrained["task_meta"]["std"]
    if cfg.data.mean is not None and cfg.data.std is not None:
        return cfg.data.mean, cfg.data.std
    return measure()


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
