"""Image backbones by name, (B, C, H, W) -> (B, ``out_features``): one dict, as timm's registry.
``small_cnn`` is always here; the others are the optional ``archs`` feature, imported when built."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mindspore import nn

from .small_cnn import SmallCNN

RESNETS = ("resnet18", "resnet34", "resnet50")  # models/resnet.py ARCHS
VITS = ("vit_tiny", "vit_b_16")  # models/vit_layout.py ARCHS


@dataclass(frozen=True)
class Options:
    """What a backbone is built from; each arch reads its own fields."""

    channels: int
    image_size: int
    fast_conv: bool | str = False  # the convolutional archs: FastConv2d (models/fast_conv.py)
    widths: tuple[int, ...] = (32, 64)  # small_cnn: channels per stage
    blocks_per_stage: int = 1  # small_cnn
    norm: str = "group"  # small_cnn: group | batch | none
    drop_path: float = 0.0  # stochastic depth of the last residual block (every arch: drop_path.py)
    vit_sizes: tuple[int, int, int, int, int] | None = None  # vit*: (patch, layers, heads, width, mlp_dim)
    dropout: float = 0.0  # vit*


@dataclass(frozen=True)
class Backbone:
    build: Callable[[Options], nn.Cell]
    module: str = "small_cnn"  # its module in models/ (the archs feature's may be absent)
    batch_norm: bool = False  # accumulation and msrun are then approximate
    fixed_size: bool = False  # evaluation and export at the training size only (a ViT)


def conv_class(setting: bool | str) -> type[nn.Conv2d]:
    """``model.fast_conv``: false is ``nn.Conv2d``; auto / true ask ``fast_conv.py`` (archs)."""
    if setting is False:
        return nn.Conv2d
    from .fast_conv import conv_class as fast

    return fast(setting)


def _small_cnn(o: Options) -> nn.Cell:
    return SmallCNN(o.channels, o.image_size, list(o.widths), o.blocks_per_stage, o.norm, conv_class(o.fast_conv),
                    o.drop_path)


def _resnet(arch: str) -> Callable[[Options], nn.Cell]:
    def build(o: Options) -> nn.Cell:
        from .resnet import ResNet

        return ResNet(arch, o.channels, conv_class(o.fast_conv), o.drop_path)

    return build


def _vit(o: Options) -> nn.Cell:
    from .vit import VisionTransformer

    patch, layers, heads, width, mlp_dim = o.vit_sizes
    return VisionTransformer(o.image_size, patch, layers, heads, width, mlp_dim, o.channels, o.dropout,
                             drop_path=o.drop_path)


BACKBONES: dict[str, Backbone] = {
    "small_cnn": Backbone(_small_cnn),  # BatchNorm only with norm: batch (the task checks its option)
    **{arch: Backbone(_resnet(arch), "resnet", batch_norm=True) for arch in RESNETS},
    **{arch: Backbone(_vit, "vit", fixed_size=True) for arch in VITS},  # Options.vit_sizes: the arch's or the config's
}


def backbone(name: str) -> Backbone:
    return BACKBONES[name]


def build_backbone(name: str, options: Options) -> nn.Cell:
    return BACKBONES[name].build(options)
