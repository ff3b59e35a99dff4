"""Config sections of the multimodal task (``data:`` and ``model:`` in config.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt

from ...engine.schema import Config, DataSection, Section

NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


class DataConfig(DataSection):
    path: str = "data/digits.npz"  # .npz (images, labels) or a folder of images with metadata.jsonl
    image_size: int = Field(8, gt=0)  # images are resized to image_size x image_size
    channels: Literal[1, 3] = 1  # 1: grayscale, 3: RGB
    eval_fraction: float = Field(0.2, gt=0, lt=1)  # held out for evaluation (stratified when labelled)
    prompt: str = "a handwritten digit {}"  # caption of class {} (.npz) and zero-shot prompt
    class_names: list[str] = NUMBER_WORDS  # .npz: the name of label i in captions and prompts
    attributes: bool = False  # labelled .npz: add stroke thickness, slant and width measured from each image
    max_tokens: int = Field(16, gt=0)  # captions are cut to this many words


class ModelConfig(Section):
    embed_dim: int = Field(64, gt=0)  # size of the shared image-text space
    image_tower: Literal["mlp", "cnn"] = "mlp"
    image_widths: list[PositiveInt] = Field([256, 256], min_length=1)  # mlp: hidden widths; cnn: conv channels
    text_width: int = Field(64, gt=0)  # word embedding size
    text_hidden: int = Field(128, gt=0)  # hidden width of the MLP after mean pooling
    init_temperature: float = Field(0.07, ge=0.01, le=1.0)  # softmax temperature at step 0 (learned)


class TaskConfig(Config):
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
