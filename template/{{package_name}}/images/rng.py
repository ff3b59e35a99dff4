"""One image's random stream, which the crops of image files (``files.py``) and the recipes feature's
augmentations draw from: the same draws in any worker, rank or resume."""

import random


def image_rng(seed: int, epoch: int, index: int, stream: str) -> random.Random:
    """One image's random draws in ``stream``, from (seed, epoch, index) alone. ``random.Random``
    takes ~5 us to make, NumPy's ``default_rng`` ~50 us."""
    return random.Random(f"{seed}/{epoch}/{index}/{stream}")
