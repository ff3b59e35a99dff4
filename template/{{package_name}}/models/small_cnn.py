"""``small_cnn``: a small ResNet-style backbone for small images, from scratch.

The stem brings larger inputs down to about 8x8 with strided convolutions, so the stages of
residual blocks (``model.widths``; each after the first halves H and W) cost the same at any size.
GroupNorm by default treats each example on its own: accumulation and data parallelism give exactly
one big batch's update (``model.norm: batch``: BatchNorm, and the engine warns it is approximate).
"""

from __future__ import annotations

import math

from mindspore import nn, ops

STAGE_INPUT = 8  # the side length the stem reduces images to


def norm_layer(kind: str, channels: int) -> nn.Cell:
    return nn.BatchNorm2d(channels) if kind == "batch" else nn.GroupNorm(min(8, channels), channels)


def conv_norm_relu(in_ch: int, out_ch: int, stride: int, norm: str, conv=nn.Conv2d) -> list[nn.Cell]:
    return [conv(in_ch, out_ch, 3, stride=stride, pad_mode="same", has_bias=False),
            norm_layer(norm, out_ch), nn.ReLU()]


class ResidualBlock(nn.Cell):
    """conv-norm-ReLU-conv-norm (``drop``: its stochastic depth) plus a shortcut (1x1 conv if the shape changes)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, norm: str, conv=nn.Conv2d, drop=None):
        super().__init__()
        self.drop_path = drop if drop is not None else nn.Identity()
        self.body = nn.SequentialCell(
            conv(in_ch, out_ch, 3, stride=stride, pad_mode="same", has_bias=False),
            norm_layer(norm, out_ch), nn.ReLU(),
            conv(out_ch, out_ch, 3, pad_mode="same", has_bias=False),
            norm_layer(norm, out_ch),
        )
        self.shortcut = nn.Identity() if stride == 1 and in_ch == out_ch else nn.SequentialCell(
            conv(in_ch, out_ch, 1, stride=stride, has_bias=False), norm_layer(norm, out_ch))
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.drop_path(self.body(x)) + self.shortcut(x))


def stem_halvings(image_size: int) -> int:
    """Strided stem convolutions that bring ``image_size`` down to about ``STAGE_INPUT``."""
    return max(0, math.ceil(math.log2(image_size / STAGE_INPUT)))


class SmallCNN(nn.Cell):
    def __init__(self, channels: int, image_size: int, widths: list[int], blocks_per_stage: int, norm: str,
                 conv=nn.Conv2d, drop_path: float = 0.0):
        super().__init__()
        blocks = len(widths) * blocks_per_stage
        if drop_path:  # model.drop_path: the recipes feature's stochastic depth
            from .drop_path import drop_paths
        drops = iter(drop_paths(drop_path, blocks) if drop_path else [None] * blocks)
        layers = conv_norm_relu(channels, widths[0], 1, norm, conv)
        for _ in range(stem_halvings(image_size)):
            layers += conv_norm_relu(widths[0], widths[0], 2, norm, conv)
        in_ch, self.stem_cells = widths[0], len(layers)
        for stage, width in enumerate(widths):
            for block in range(blocks_per_stage):
                layers.append(ResidualBlock(in_ch, width, 2 if stage > 0 and block == 0 else 1, norm, conv,
                                            next(drops)))
                in_ch = width
        self.layers = nn.SequentialCell(layers)
        self.out_features = in_ch
        self.num_layers = len(layers) - self.stem_cells + 1  # optim.layer_decay: stem 0, blocks 1..n, head n + 1

    def layer_id(self, name: str) -> int:
        """The layer of a parameter (its name here): the stem's convolutions 0, residual block i i + 1."""
        return max(int(name.split(".")[1]) - self.stem_cells + 1, 0)  # "layers.<cell>.<...>"

    def construct(self, x):  # (B, C, H, W) -> (B, F)
        return ops.mean(self.layers(x), axis=(2, 3))
