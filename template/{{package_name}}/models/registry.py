"""What the registry of image backbones (``backbones.py``) holds: per name a ``Backbone``, built from
``Options``. Each arch module declares its own entries with these; ``backbones.py`` collects them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mindspore import nn


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
    config: object = None  # the task's model section, for an arch's own keys (vit*: its sizes, dropout)


@dataclass(frozen=True)
class Backbone:
    build: Callable[[Options], nn.Cell]
    batch_norm: bool = False  # accumulation and msrun are then approximate
    fixed_size: bool = False  # evaluation and export at the training size only (a ViT)
