"""ResNet-18/34/50 as torchvision defines them (He et al. 2015, "v1.5": the stride sits in the
3x3 convolution of a bottleneck), with torchvision's module names: ``conv1``, ``bn1``,
``layer1.0.conv1``, ``layer2.0.downsample.0``... So importing published weights is a renaming
table (``convert_weights.py``), not code per layer.

BatchNorm, as published: its statistics come from each micro-batch, so gradient accumulation
and data parallelism are approximate (the task says so when you use them).

``drop_path`` (``model.drop_path``): stochastic depth on each block's residual branch
(``drop_path.py``).

``conv``: the convolution class, ``nn.Conv2d`` or ``fast_conv.FastConv2d`` (same parameter
names, faster backward on CPU; ``model.fast_conv``).
"""

from __future__ import annotations

import re
from functools import partial

from mindspore import nn, ops
from mindspore.common.initializer import HeNormal

from .drop_path import DropPath, block_rates
from .fast_conv import conv_class
from .registry import Backbone, Options


def conv(in_ch: int, out_ch: int, kernel: int, stride: int = 1, cls=nn.Conv2d) -> nn.Conv2d:
    # Explicit symmetric padding: MindSpore's "same" pads stride-2 convolutions on one side
    # only, which would not compute what the published weights were trained with.
    return cls(in_ch, out_ch, kernel, stride=stride, pad_mode="pad", padding=kernel // 2,
                     has_bias=False, weight_init=HeNormal(mode="fan_out", nonlinearity="relu"))


class BasicBlock(nn.Cell):
    """Two 3x3 convolutions (ResNet-18/34)."""

    expansion = 1

    def __init__(self, in_ch: int, width: int, stride: int, cls=nn.Conv2d, drop: float = 0.0):
        super().__init__()
        self.drop_path = DropPath(drop)
        self.conv1, self.bn1 = conv(in_ch, width, 3, stride, cls), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = conv(width, width, 3, 1, cls), nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.downsample = shortcut(in_ch, width, stride, cls)

    def construct(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(self.drop_path(out) + self.downsample(x))


class Bottleneck(nn.Cell):
    """1x1 reduce, 3x3 (strided), 1x1 expand x4 (ResNet-50)."""

    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int, cls=nn.Conv2d, drop: float = 0.0):
        super().__init__()
        self.drop_path = DropPath(drop)
        out_ch = width * self.expansion
        self.conv1, self.bn1 = conv(in_ch, width, 1, 1, cls), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = conv(width, width, 3, stride, cls), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = conv(width, out_ch, 1, 1, cls), nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU()
        self.downsample = shortcut(in_ch, out_ch, stride, cls)

    def construct(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(self.drop_path(out) + self.downsample(x))


def shortcut(in_ch: int, out_ch: int, stride: int, cls=nn.Conv2d) -> nn.Cell:
    """Identity, or a strided 1x1 conv + BatchNorm where the shape changes (``downsample.0/1``)."""
    if stride == 1 and in_ch == out_ch:
        return nn.Identity()
    return nn.SequentialCell(conv(in_ch, out_ch, 1, stride, cls), nn.BatchNorm2d(out_ch))


class StemPool(nn.Cell):
    """torchvision's stem max pool (3x3, stride 2, 1-pixel padding) of a map after a ReLU.

    Training pools with MindSpore's padded MaxPool2d: forward + backward 44 ms on a 32 x 64 x 32
    x 32 map against 92 with an explicit ``ops.pad`` first (PadV3 was 6 % of a ResNet-18 step;
    2-core CPU), and a training run on one folder of photos that hung inside the backward of
    pad + pool (a CPU kernel spinning, at the same step every time) finishes with it. Evaluation
    and export pad with zeros, then pool (the same numbers: the inputs are >= 0), because the
    padded pool's MINDIR does not reload with a dynamic batch."""

    def __init__(self):
        super().__init__()
        self.padded = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="pad", padding=1)
        self.unpadded = nn.MaxPool2d(kernel_size=3, stride=2)

    def construct(self, x):
        if self.training:
            return self.padded(x)
        return self.unpadded(ops.pad(x, (1, 1, 1, 1)))


# arch -> (block, blocks per stage)
ARCHS = {
    "resnet18": (BasicBlock, (2, 2, 2, 2)),
    "resnet34": (BasicBlock, (3, 4, 6, 3)),
    "resnet50": (Bottleneck, (3, 4, 6, 3)),
}


class ResNet(nn.Cell):
    """Everything but torchvision's ``fc``: (B, C, H, W) -> pooled features (B, out_features).
    Any input size works (global average pooling); the published weights saw 224x224."""

    def __init__(self, arch: str, channels: int = 3, conv_cls=nn.Conv2d, drop_path: float = 0.0):
        super().__init__()
        block, depths = ARCHS[arch]
        drops = iter(block_rates(drop_path, sum(depths)))
        self.conv1, self.bn1 = conv(channels, 64, 7, 2, conv_cls), nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = StemPool()
        in_ch, stages = 64, []
        for stage, (width, depth) in enumerate(zip((64, 128, 256, 512), depths)):
            blocks = []
            for i in range(depth):
                blocks.append(block(in_ch, width, 2 if stage > 0 and i == 0 else 1, conv_cls, next(drops)))
                in_ch = width * block.expansion
            stages.append(nn.SequentialCell(blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.out_features = in_ch
        self.depths = depths
        self.num_layers = sum(depths) + 1  # optim.layer_decay: stem 0, blocks 1..n, the head n + 1

    def layer_id(self, name: str) -> int:
        """The layer of a parameter (its name here): the stem 0, block b of stage s its place in
        all the blocks + 1 (as timm's ResNet group_matcher, per block)."""
        match = re.match(r"layer(\d)\.(\d+)\.", name)
        return 1 + sum(self.depths[:int(match[1]) - 1]) + int(match[2]) if match else 0

    def construct(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))  # (B, 64, H/4, W/4)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))  # (B, F, H/32, W/32)
        return ops.mean(x, axis=(2, 3))


def build(arch: str, o: Options) -> ResNet:
    return ResNet(arch, o.channels, conv_class(o.fast_conv), o.drop_path)


# The registry's entries (backbones.py): BatchNorm, so accumulation and msrun are approximate.
BACKBONES = {arch: Backbone(partial(build, arch), batch_norm=True) for arch in ARCHS}
