"""Image backbones by name, (B, C, H, W) -> (B, ``out_features``): one dict, as timm's registry.
``small_cnn`` is always here; the optional ``archs`` feature's modules, when present, add their own
``BACKBONES`` (``resnet.py``: resnet18/34/50, ``vit.py``: vit_tiny, vit_b_16)."""

from __future__ import annotations

from importlib.util import find_spec

from mindspore import nn

from .registry import Backbone, Options
from .small_cnn import SmallCNN


def _small_cnn(o: Options) -> nn.Cell:
    conv = nn.Conv2d
    if o.fast_conv is not False:  # model.fast_conv: the archs feature's FastConv2d (fast_conv.py)
        from .fast_conv import conv_class

        conv = conv_class(o.fast_conv)
    return SmallCNN(o.channels, o.image_size, list(o.widths), o.blocks_per_stage, o.norm, conv, o.drop_path)


BACKBONES: dict[str, Backbone] = {"small_cnn": Backbone(_small_cnn)}  # BatchNorm with norm: batch (the task checks)
if find_spec(f"{__package__}.resnet"):  # the archs feature (resnet.py and vit.py come together)
    from .resnet import BACKBONES as RESNETS
    from .vit import BACKBONES as VITS

    BACKBONES |= RESNETS | VITS


def backbone(name: str) -> Backbone:
    return BACKBONES[name]


def build_backbone(name: str, options: Options) -> nn.Cell:
    return BACKBONES[name].build(options)
