"""Vision: image classification with a small ResNet-style CNN; metric: accuracy.

Default data: the 8x8 handwritten digits embedded in ``data/digits.npz``. Your own data:
an ``.npz`` with ``images`` (N, H, W[, C]) and ``labels`` (N,), your own loader (``data.path:
module:function``) or, with the ``folders`` feature, a folder of photos (one sub-folder per class).
"""

from .config import TaskConfig


def load():
    from .task import TASK  # imports MindSpore: only after the runtime is set up

    return TASK


__all__ = ["TaskConfig", "load"]
