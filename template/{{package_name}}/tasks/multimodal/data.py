"""Image-caption pairs: read them, caption labelled images, split, build the word vocabulary.

Two sources (``data.path``):
- an ``.npz`` with ``images`` (N, H, W[, C]) and integer ``labels`` (N,): each image is
  captioned ``data.prompt`` filled with its class name ("a handwritten digit seven"); with
  ``data.attributes`` the caption also says how the digit is drawn, measured from the pixels
  ("a handwritten digit seven, thick, leaning right"), so retrieval is more than classification;
- a folder of images with ``metadata.jsonl``, one JSON object a line:
  ``{"file_name": "img/001.png", "text": "a red square"}`` (the Hugging Face imagefolder
  convention); an optional ``"label"`` (a class name) enables zero-shot accuracy. An image
  may have several lines, one per caption (the COCO / Flickr30k layout). Its training images
  are cropped (``data.min_crop``) and, with ``data.flip``, mirrored in the pipeline workers
  (``images/files.py``, as the vision task's folders); evaluation resizes and centre-crops.

Splits and batches go by image, never by caption line: an image and all of its captions are
either trained on or held out, and a training epoch shows each image once, with one of its
captions drawn from (seed, epoch, index), so a contrastive batch never holds one image twice
(whose other caption would count as a negative).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...engine.arrays import normalise, stratified_split
from ...engine.errors import DataError
from ...engine.runtime import resolve_workers
from ...engine.task import Data
from ...images.arrays import read_npz
from ...images.files import ImageFiles, ImageTransform, statistics
from ...images.rng import image_rng
from .captions import build_vocab, encode, words
from .config import DataConfig

# Attribute words for the low and high third of each measurement (per class); the middle third says nothing.
STATS_SAMPLE = 500  # a folder's normalisation is measured on at most this many training images (seeded)
ATTRIBUTES = {"ink": ("thin", "thick"), "slant": ("leaning left", "leaning right"), "width": ("narrow", "wide")}


def load_data(cfg, known: dict | None = None) -> Data:
    """``known``: a checkpoint's meta whose CLIP tokenizer (if any) tokenises the captions."""
    path = Path(cfg.data.path)
    if path.is_dir():
        return _folder_data(path, cfg, known)
    if path.suffix == ".npz" and path.is_file():
        return _array_data(path, cfg, known)
    raise DataError(f"data.path={cfg.data.path!r}: expected an .npz file or a folder with metadata.jsonl")


def load_eval_data(cfg, meta: dict) -> Data:
    """What ``eval.py`` scores for a checkpoint of ``meta``: the held-out split of ``data.path``,
    its captions tokenised as the checkpoint's (an imported CLIP's BPE needs no ``model.pretrained``)."""
    return load_data(cfg, meta)


def _array_data(path: Path, cfg, known: dict | None = None) -> Data:
    """An .npz: small, decoded once and batched from memory; one caption per image."""
    images, texts, labels, classes = _read_npz(path, cfg.data)
    image_of = np.arange(len(images))
    train_idx, eval_idx = split_by_image(image_of, labels, cfg.data.eval_fraction, cfg.seed)
    measured = (float(images[train_idx].mean()), float(images[train_idx].std()) or 1.0)
    meta = {"image_size": cfg.data.image_size, "channels": cfg.data.channels, **image_inputs(cfg, lambda: measured),
            "classes": classes, "prompt": cfg.data.prompt, "max_tokens": cfg.data.max_tokens}
    if cfg.data.attributes:
        cuts = attribute_cuts(images[train_idx], labels[train_idx], len(classes))
        texts = [describe(text, image, label, cuts) for text, image, label in zip(texts, images, labels)]
    train_texts = _vocabulary(meta, texts, train_idx, cfg.model, known)
    train = {"image": normalise(images[train_idx], meta), "tokens": encode(train_texts, meta)}
    # Eval keeps raw images and texts: evaluate() prepares them with the checkpoint's own meta.
    return Data(train=train, eval=_held_out(images, labels, classes, texts, image_of, eval_idx), meta=meta)


def _folder_data(root: Path, cfg, known: dict | None = None) -> Data:
    """A metadata.jsonl folder: listed here, its images streamed through mindspore.dataset
    workers (``images/files.py``); only the captions, which are small, are tokenised now."""
    paths, texts, line_labels, classes = read_listing(root)  # one entry per caption line
    if cfg.data.attributes:
        raise DataError(f"data.attributes=true measures every image's pixels up front: it applies to an .npz, "
                        f"not to the streamed folder {root}")
    number: dict[str, int] = {}  # images numbered in order of first appearance
    image_of = np.asarray([number.setdefault(path, len(number)) for path in paths])
    files = np.asarray(list(number))
    labels = None if line_labels is None else line_labels[np.unique(image_of, return_index=True)[1]]
    train_lines, eval_lines = split_by_image(image_of, labels, cfg.data.eval_fraction, cfg.seed)
    d = cfg.data
    train_images = image_of[train_lines]  # grouped: each image's captions are consecutive
    starts = np.flatnonzero(np.r_[True, train_images[1:] != train_images[:-1]])
    inputs = image_inputs(cfg, lambda: statistics(files[train_images[starts]], d.image_size, d.channels, STATS_SAMPLE,
                                                  cfg.seed, resolve_workers(d.workers)))
    meta = {"image_size": d.image_size, "channels": d.channels, **inputs,
            "classes": classes, "prompt": d.prompt, "max_tokens": d.max_tokens}
    tokens = encode(_vocabulary(meta, texts, train_lines, cfg.model, known), meta)
    crop = d.min_crop < 1
    augment = ("crop_flip" if d.flip else "crop") if crop else "flip" if d.flip else "none"
    transform = ImageTransform.of(meta, augment=augment, min_crop=d.min_crop, seed=cfg.seed)  # eval: of(meta)
    train = CaptionedImages(files[train_images[starts]], tokens, starts, transform, cfg.seed)
    held = _held_out(files, labels, classes, texts, image_of, eval_lines, key="file")
    return Data(train=train, eval=held, meta=meta)


def split_by_image(image_of: np.ndarray, labels: np.ndarray | None, eval_fraction: float, seed: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Hold out ``eval_fraction`` of the images (stratified by their ``labels``) with all their
    captions: line j is a caption of image ``image_of[j]``. Returns (the training lines, grouped
    by image, the images in a seeded shuffled order; the held-out lines, sorted)."""
    n_images = int(image_of.max()) + 1
    train_images, _ = stratified_split(labels, n_images, eval_fraction, seed)
    position = np.full(n_images, -1)
    position[train_images] = np.arange(len(train_images))
    line_position = position[image_of]  # -1: a held-out image's line
    train = np.flatnonzero(line_position >= 0)
    return train[np.argsort(line_position[train], kind="stable")], np.flatnonzero(line_position < 0)


class CaptionedImages(ImageFiles):
    """Training images, each once per epoch with one of its captions, drawn from (seed, epoch,
    index): caption rows ``starts[i]`` up to ``starts[i + 1]`` of ``tokens`` describe image i.
    The crop and flip come from their own stream of (seed, epoch, index): independent of the caption."""

    crop_stream = "caption-crop"

    def __init__(self, files: np.ndarray, tokens: np.ndarray, starts: np.ndarray, transform: ImageTransform,
                 seed: int):
        super().__init__(files, {"tokens": tokens[starts]}, transform)  # one row per image: columns, shapes
        self.tokens, self.seed = tokens, seed
        self.bounds = np.r_[starts, len(tokens)]

    def read(self, index: int, epoch: int) -> tuple[np.ndarray, ...]:
        low, high = self.bounds[index], self.bounds[index + 1]
        pick = low + image_rng(self.seed, epoch, index, "caption").randrange(high - low)
        return (*super().read(index, epoch)[:-1], self.tokens[pick])  # "tokens" is the last column


def _vocabulary(meta: dict, texts: list[str], train_idx: np.ndarray, model_cfg, known: dict | None) -> list[str]:
    """The training captions; their words (or, ``model.text_tower: clip``, the pretrained CLIP's
    tokenizer) and distinct captions go into ``meta``."""
    train_texts = [texts[i] for i in train_idx]
    meta["vocab"] = build_vocab(train_texts)
    if known and "tokenizer" in known:
        meta.update({key: known[key] for key in ("tokenizer", "eos_id", "vocab_size")})
    elif model_cfg.text_tower == "clip":
        from .clip import clip_meta

        if not model_cfg.pretrained:
            raise DataError("model.text_tower=clip takes its tokenizer from model.pretrained: set it to an "
                            "imported CLIP checkpoint (convert_weights.py)")
        meta.update(clip_meta(model_cfg.pretrained))
    meta["captions"] = sorted(set(train_texts))  # the known captions retrieve.py ranks for an image
    return train_texts


def _held_out(images, labels, classes, texts, image_of, eval_lines, key="image") -> dict:
    """Each held-out image once (``key``: arrays or files; ``label``: class names) and all their
    captions (``text``): caption j describes image ``image_of[j]``."""
    shown, image_of = np.unique(image_of[eval_lines], return_inverse=True)
    return {key: images[shown], "text": [texts[i] for i in eval_lines], "image_of": image_of,
            "label": None if labels is None else [classes[labels[i]] for i in shown]}


# -- reading ------------------------------------------------------------------------------
def _read_npz(path: Path, cfg: DataConfig):
    array, labels = read_npz(path, cfg.image_size, cfg.channels)
    if labels.min() < 0 or labels.max() >= len(cfg.class_names):
        raise DataError(f"{path}: labels run from {labels.min()} to {labels.max()} but data.class_names "
                        f"names {len(cfg.class_names)} classes")
    classes = list(cfg.class_names)
    texts = [caption(cfg.prompt, classes[label]) for label in labels]
    return array, texts, labels, classes


def read_listing(root: Path) -> tuple[np.ndarray, list[str], np.ndarray | None, list[str] | None]:
    """metadata.jsonl of ``root``, one entry per line (an image with several captions has several):
    image paths, captions, int32 labels and class names (both None without labels). Files are
    checked to exist, not read."""
    listing = root / "metadata.jsonl"
    if not listing.is_file():
        raise DataError(f"data.path={str(root)!r}: no metadata.jsonl in this folder "
                        '(one line per image: {"file_name": ..., "text": ...})')
    files, texts, names, label_of = [], [], [], {}
    for number, line in enumerate(listing.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{listing} line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected a JSON object")
        for key in ("file_name", "text"):
            if not isinstance(record.get(key), str) or not record[key].strip():
                raise DataError(f"{where}: missing or empty {key!r}")
        if not words(record["text"]):
            raise DataError(f"{where}: 'text' has no words")
        file = root / record["file_name"]
        if not file.is_file():
            raise DataError(f"{where}: image {record['file_name']!r} not found in {root}")
        name = label_of.setdefault(str(file), record.get("label"))  # an image's first line names its label
        if record.get("label") != name:
            raise DataError(f"{where}: label {record.get('label')!r}, but an earlier caption of "
                            f"{record['file_name']!r} has {name!r} (one label per image)")
        files.append(str(file))
        texts.append(record["text"].strip())
        names.append(name)
    if not files:
        raise DataError(f"{listing} lists no images")
    if all(name is None for name in names):
        return np.asarray(files), texts, None, None
    if any(name is None for name in names):
        missing = names.index(None) + 1
        raise DataError(f"{listing}: entry {missing} has no 'label' while others do (give all or none)")
    classes = sorted({str(name) for name in names})
    labels = np.asarray([classes.index(str(name)) for name in names], np.int32)
    return np.asarray(files), texts, labels, classes


def image_inputs(cfg, measure) -> dict:
    """``mean``/``std`` (and resizing) for the images: a CLIP image tower's own when it starts from
    ``model.pretrained`` (its weights saw only those inputs, as its processor prepares them), else
    the data's, ``measure()``."""
    if cfg.model.pretrained and cfg.model.image_tower == "vit":
        from .clip import image_inputs as clip_inputs

        return clip_inputs(cfg.model.pretrained)
    mean, std = measure()
    return {"mean": mean, "std": std}


# -- captions -----------------------------------------------------------------------------
def caption(prompt: str | list[str], name: str) -> str:
    """Class ``name`` in ``prompt`` (of a list of templates, the first)."""
    prompt = templates(prompt)[0]
    return prompt.format(name) if "{}" in prompt else f"{prompt} {name}"


def templates(prompt: str | list[str]) -> list[str]:
    return [prompt] if isinstance(prompt, str) else list(prompt)


def measure(images: np.ndarray) -> np.ndarray:
    """(N, C, H, W) in [0, 1] -> (N, 3): ink (mean intensity), slant (x drift per row upwards,
    from intensity-weighted second moments) and width (horizontal spread)."""
    ink = images.mean(axis=1)  # (N, H, W)
    mass = ink.sum(axis=(1, 2)) + 1e-6
    ys, xs = np.mgrid[0:ink.shape[1], 0:ink.shape[2]].astype(np.float32)
    mx = (ink * xs).sum(axis=(1, 2)) / mass
    my = (ink * ys).sum(axis=(1, 2)) / mass
    dx, dy = xs - mx[:, None, None], ys - my[:, None, None]
    var_x = (ink * dx * dx).sum(axis=(1, 2)) / mass
    var_y = (ink * dy * dy).sum(axis=(1, 2)) / mass + 1e-6
    slant = -(ink * dx * dy).sum(axis=(1, 2)) / mass / var_y  # > 0: the top leans right (y grows downwards)
    return np.stack([ink.mean(axis=(1, 2)), slant, np.sqrt(var_x)], axis=1)


def attribute_cuts(images: np.ndarray, labels: np.ndarray, n_classes: int) -> np.ndarray:
    """(classes, 3 attributes, 2): the 1/3 and 2/3 quantiles of each measurement within each class,
    so an attribute says how this seven differs from other sevens, not which digit it is."""
    values = measure(images)
    cuts = np.zeros((n_classes, values.shape[1], 2))
    for c in range(n_classes):
        if np.any(labels == c):
            cuts[c] = np.quantile(values[labels == c], [1 / 3, 2 / 3], axis=0).T
    return cuts


def describe(text: str, image: np.ndarray, label: int, cuts: np.ndarray) -> str:
    values = measure(image[None])[0]
    extra = []
    for (low, high), value, (lo_cut, hi_cut) in zip(ATTRIBUTES.values(), values, cuts[label]):
        if value < lo_cut:
            extra.append(low)
        elif value > hi_cut:
            extra.append(high)
    return ", ".join([text, *extra])
