"""Stochastic depth (Huang et al. 2016; ``model.drop_path``) as timm: in training, a residual branch
dropped per example, with a rate rising linearly from 0 at the first block to the last's."""

from __future__ import annotations

from mindspore import nn, ops


def block_rates(drop_path: float, blocks: int) -> list[float]:
    """Each of ``blocks`` residual blocks' drop probability: 0 at the first, ``drop_path`` at the last."""
    return [drop_path * i / max(blocks - 1, 1) for i in range(blocks)]


def drop_paths(drop_path: float, blocks: int) -> list[nn.Cell]:
    """Each of ``blocks`` residual blocks' ``DropPath``, at ``block_rates``."""
    return [DropPath(rate) for rate in block_rates(drop_path, blocks)]


class DropPath(nn.Cell):
    """A residual branch kept per example with probability 1 - ``p`` (scaled by 1 / keep), in training
    only; like dropout's, its masks are not redrawn exactly on resume."""

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
