"""Vision: image classification with a small ResNet-style CNN; metric: accuracy. Data: the 8x8 digits of
``data/digits.npz``, an ``.npz`` of ``images`` (N, H, W[, C]) and ``labels`` (N,), your own loader
(``data.path: module:function``) or, with the ``folders`` feature, a folder of photos."""

from .config import TaskConfig


def load():
    from .task import TASK  # imports MindSpore: only after the runtime is set up

    return TASK


__all__ = ["TaskConfig", "load"]
