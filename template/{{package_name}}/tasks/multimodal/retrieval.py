"""Embedding, ranking and the retrieval metrics (shared by evaluation and retrieve.py).

Recall@k over M images, each scored once, and the N captions that describe them (several per
image in COCO-style data), the standard image-text retrieval protocol:
- image -> text: the share of images with at least one of their captions among the k best
  of the *distinct* captions (so five copies of one caption cannot fill the top five);
- text -> image: the share of captions with their image among the k best images.
Captions are compared by text: a retrieved caption with the same text as one of the image's
own is a hit, and so is a retrieved image that has the query's text among its captions (ten
digit classes share ten captions). Rankings go through ``engine.arrays.top_k``: blocks of
scores with a running top-k, never an M x N similarity matrix.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...engine.arrays import compiled, normalise, predict
from ...engine.errors import DataError
from ...images.files import STREAM_SUFFIXES, predict_files, read_bytes
from .captions import check_known, encode
from .data import caption, templates
from .top_k import top_k


def embed_images(network, images: np.ndarray, meta: dict, rows: np.ndarray | None = None, jit: bool = True
                 ) -> np.ndarray:
    """Raw (N, C, H, W) images in [0, 1] (``rows`` of them) -> embeddings, normalised batch by
    batch as in training (the encoder compiled once, unless ``jit`` is false)."""
    encoder = compiled(network.image_encoder, jit)
    return predict(encoder, images, rows=rows, prepare=lambda batch: normalise(batch, meta))


def embed_texts(network, texts: list[str], meta: dict, strict: bool = False, jit: bool = True) -> np.ndarray:
    """Captions -> embeddings. ``strict``: refuse a caption without a single known word."""
    if strict:
        check_known(texts, meta)
    return predict(compiled(network.text_encoder, jit), encode(texts, meta))


def retrieval_metrics(image_emb: np.ndarray, text_emb: np.ndarray, texts: list[str],
                      image_of: np.ndarray | None = None, ks: tuple[int, ...] = (1, 5),
                      chunk: int = 2048) -> dict[str, float]:
    """Recall@k both ways for M images (``image_emb``) and N captions (``text_emb``, ``texts``):
    caption j describes image ``image_of[j]`` (default: N aligned pairs). Scores ``chunk`` x
    ``chunk`` blocks at a time."""
    image_of = np.arange(len(texts)) if image_of is None else np.asarray(image_of)
    _, first, caption = np.unique(np.asarray(texts, dtype=str), return_index=True, return_inverse=True)
    n_captions = len(first)
    # The (image, distinct caption) pairs that belong together, as sorted codes image * n_captions + caption.
    pairs = np.unique(image_of * n_captions + caption)
    i2t = top_k(image_emb, text_emb[first], max(ks), chunk)  # (M, k) indices into distinct captions
    t2i = top_k(text_emb, image_emb, max(ks), chunk)  # (N, k) indices into images
    i2t_hit = np.isin(np.arange(len(image_emb))[:, None] * n_captions + i2t, pairs)  # (M, k)
    t2i_hit = np.isin(t2i * n_captions + caption[:, None], pairs)  # (N, k)
    metrics = {}
    for k in ks:
        metrics[f"i2t_r{k}"] = float(np.mean(np.any(i2t_hit[:, :k], axis=1)))
        metrics[f"t2i_r{k}"] = float(np.mean(np.any(t2i_hit[:, :k], axis=1)))
    return metrics


def class_embeddings(network, classes: list[str], prompt: str | list[str], meta: dict, jit: bool = True
                     ) -> np.ndarray:
    """(C, D) unit vectors, one a class: its caption in each template of ``prompt``, embedded, averaged
    over the templates and normalised again (CLIP's prompt ensembling; one template: its embedding)."""
    forms = templates(prompt)
    emb = embed_texts(network, [caption(form, name) for form in forms for name in classes], meta, jit=jit)
    mean = emb.reshape(len(forms), len(classes), -1).mean(0)
    return mean / np.linalg.norm(mean, axis=1, keepdims=True)


def zero_shot_accuracy(image_emb: np.ndarray, prompt_emb: np.ndarray, classes: list[str],
                       labels: list[str], chunk: int = 2048) -> float:
    """Classify each image as the class whose prompt embedding is nearest; compare with its label."""
    predicted = np.asarray(classes)[top_k(image_emb, prompt_emb, 1, chunk)[:, 0]]
    return float(np.mean(predicted == np.asarray(labels)))


# -- inference (retrieve.py) --------------------------------------------------------------
def embed_files(network, paths: list[Path], meta: dict) -> np.ndarray:
    """Image files -> embeddings, prepared exactly as evaluation prepares them (shorter side, centre
    crop, the checkpoint's interpolation and mean/std; an imported CLIP: as its processor)."""
    for path in paths:
        if not path.is_file():
            raise DataError(f"{path}: no such image file")
        read_bytes(str(path))  # a JPEG, PNG or BMP file, whole: said in one line before the decoder sees it
    return predict_files(compiled(network.image_encoder), [str(p) for p in paths], meta, np.arange(len(paths)), 1)


def known_captions(meta: dict) -> list[str]:
    """The captions seen in training, plus one prompt per class (if the data had classes)."""
    prompts = [caption(meta["prompt"], name) for name in meta.get("classes") or []]
    return list(dict.fromkeys([*prompts, *meta["captions"]]))


def captions_for_image(network, meta: dict, image: Path, candidates: list[str] | None = None,
                       top: int = 5) -> list[tuple[float, str]]:
    """The ``top`` candidate captions (default: the known ones) for one image, best first."""
    candidates = candidates or known_captions(meta)
    query, keys = embed_files(network, [image], meta), embed_texts(network, candidates, meta, strict=True)
    return [(float(query[0] @ keys[i]), candidates[i]) for i in top_k(query, keys, top)[0]]


def images_for_text(network, meta: dict, text: str, folder: Path, top: int = 5) -> list[tuple[float, Path]]:
    """The ``top`` images of ``folder`` (not recursive) for a caption, best first."""
    query = embed_texts(network, [text], meta, strict=True)
    if not folder.is_dir():
        raise DataError(f"--images {folder}: not a folder")
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in STREAM_SUFFIXES)
    if not paths:
        raise DataError(f"--images {folder}: no image files ({', '.join(sorted(STREAM_SUFFIXES))})")
    keys = embed_files(network, paths, meta)
    return [(float(query[0] @ keys[i]), paths[i]) for i in top_k(query, keys, top)[0]]
