"""Your data loaders. Name one in config/config.yaml:

    data:
      path: custom.data:digits

``load()`` returns ``(images, labels)``, or ``(images, labels, class names)``: images (N, H, W[, C])
uint8 0-255 or float in [0, 1], labels the class indices 0, 1, ... The task checks them, resizes
them to ``data.image_size`` with ``data.channels``, holds out ``data.eval_fraction`` and normalises,
as it does an .npz file (for image files on disk, point ``data.path`` at a class-per-folder tree: the
folders feature).
"""

import numpy as np


def digits():
    """The embedded 8x8 digits with their names: an example to replace (read yours from anywhere)."""
    with np.load("data/digits.npz") as arrays:
        return arrays["images"], arrays["labels"], [f"digit {i}" for i in range(10)]
