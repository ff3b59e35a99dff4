"""Multimodal: CLIP-style image-text contrastive training; metrics: retrieval recall@k and
zero-shot accuracy.

Default data: the 8x8 handwritten digits embedded in ``data/digits.npz`` with captions
generated from their labels (optionally with attributes measured from each image). Your own
data: a folder of images with ``metadata.jsonl`` lines ``{"file_name": ..., "text": ...}``.
"""

from .config import TaskConfig


def load():
    from .task import TASK  # imports MindSpore: only after the runtime is set up

    return TASK


__all__ = ["TaskConfig", "load"]
