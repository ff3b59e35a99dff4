"""Stochastic depth (Huang et al. 2016; ``model.drop_path``), as timm: in training, a block's
residual branch is dropped for a whole example and kept (scaled by 1 / keep) otherwise, with a
probability rising linearly from 0 at the first block to ``model.drop_path`` at the last."""

from __future__ import annotations

from mindspore import nn, ops


def block_rates(drop_path: float, blocks: int) -> list[float]:
    """Each of ``blocks`` residual blocks' drop probability: 0 at the first, ``drop_path`` at the last."""
    return [drop_path * i / max(blocks - 1, 1) for i in range(blocks)]


class DropPath(nn.Cell):
    """A residual branch kept per example with probability 1 - ``p`` (scaled by 1 / keep) in
    training; the identity in evaluation and export. Its masks come from MindSpore's generator,
    like dropout's: a resumed run does not redraw them exactly."""

    def __init__(self, p: float = 0.0):
        super().__init__()
        self.p = p

    def construct(self, x):  # (B, ...): one draw per example
        if not self.training or self.p == 0:
            return x
        keep = 1 - self.p
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)
        mask = ops.floor(keep + ops.rand(shape, dtype=x.dtype))  # 1 with probability keep
        return x * mask / keep
