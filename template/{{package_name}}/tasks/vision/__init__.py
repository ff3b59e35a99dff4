"""Vision: image classification with a small ResNet-style CNN; metric: accuracy.

Default data: the 8x8 handwritten digits embedded in ``data/digits.npz``. Your own data:
an ImageFolder directory (one sub-folder per class, PNG/JPEG) or an ``.npz`` with
``images`` (N, H, W[, C]) and ``labels`` (N,).
"""

from .config import TaskConfig


def load():
    from .task import TASK  # imports MindSpore: only after the runtime is set up

    return TASK


__all__ = ["TaskConfig", "load"]
