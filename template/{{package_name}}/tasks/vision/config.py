"""Config sections of the vision task (``data:`` and ``model:`` in config.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...engine.schema import Config, Section


class DataConfig(Section):
    path: str = "data/digits.npz"  # .npz (images, labels) or an ImageFolder directory
    image_size: int = Field(8, gt=0)  # images are resized to image_size x image_size
    channels: Literal[1, 3] = 1  # 1: grayscale, 3: RGB
    eval_fraction: float = Field(0.2, gt=0, lt=1)  # held out for evaluation (stratified)


class ModelConfig(Section):
    # small_cnn: small images, from scratch; resnet*: torchvision's ResNets (BatchNorm), weights importable
    arch: Literal["small_cnn", "resnet18", "resnet34", "resnet50"] = "small_cnn"
    widths: list[int] = [32, 64]  # small_cnn: channels per stage; each stage after the first halves H and W
    blocks_per_stage: int = Field(1, gt=0)  # small_cnn
    norm: Literal["group", "batch"] = "group"  # small_cnn; group: accumulation/data parallel exact
    dropout: float = Field(0.0, ge=0, lt=1)
    pretrained: str | None = None  # checkpoint to start from (backbone weights)
    freeze_backbone: bool = False  # fine-tune only the classifier head


class TaskConfig(Config):
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
