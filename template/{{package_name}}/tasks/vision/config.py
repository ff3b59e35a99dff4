"""Config sections of the vision task (``data:`` and ``model:`` in config.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from ...engine.schema import Config, DataSection, Section, Train
from ...engine.seams import check_name, feature, is_spec


class DataConfig(DataSection):
    path: str = "data/digits.npz"  # .npz (images, labels), module:function (data.py) or a folder (folders feature)
    image_size: int = Field(8, gt=0)  # images are resized to image_size x image_size
    channels: Literal[1, 3] = 1  # 1: grayscale, 3: RGB
    eval_fraction: float = Field(0.2, gt=0, lt=1)  # held out for evaluation (stratified)
    # Random resized crop (+ flip); auto: crop_flip for folders (in their pipeline), none for arrays
    # (crop, crop_flip: on the device, the recipes feature's augment.py; digits: crop, a flip changes them).
    augment: Literal["auto", "none", "crop", "crop_flip"] = "auto"
    min_crop: float = Field(0.25, gt=0, le=1)  # smallest random crop, as a fraction of the image area
    auto_augment: Literal["none", "randaugment", "trivialaugment"] = "none"  # torchvision's op sets (no Equalize)
    auto_augment_magnitude: int = Field(9, ge=0, le=30)  # randaugment: magnitude bin of 31 (torchvision: 9)
    color_jitter: float = Field(0.0, ge=0, le=1)  # brightness, contrast, saturation factors in [1 - j, 1 + j]
    random_erase: float = Field(0.0, ge=0, le=1)  # probability of erasing a random rectangle (to the mean)
    mixup: PositiveFloat | None = None  # Beta(alpha, alpha); the batch with itself reversed (timm: 0.8)
    cutmix: PositiveFloat | None = None  # cutmix alpha (timm: 1.0)
    mix_prob: float = Field(1.0, ge=0, le=1)  # probability that a batch is mixed at all
    mix_switch_prob: float = Field(0.5, ge=0, le=1)  # both on: probability of cutmix instead of mixup
    eval_crop: float = Field(0.875, gt=0, le=1)  # eval: shorter side to image_size / eval_crop, centre crop
    # null = measured on stats_sample training images; or one value or one per channel, in [0, 1] units.
    mean: list[float] | None = None
    std: list[PositiveFloat] | None = None
    stats_sample: int = Field(500, gt=0)

    @field_validator("path")
    @classmethod
    def _folders_feature(cls, value: str) -> str:  # a folder of photos: the folders feature's
        if Path(value).is_dir():
            feature("tasks.vision.folders", "folders")
        return value

    FEATURES: ClassVar = {key: ("tasks.vision.recipes", "recipes")
                           for key in ("auto_augment", "color_jitter", "random_erase", "mixup", "cutmix")}

    @model_validator(mode="after")
    def _arrays_cropped_by_the_recipes_feature(self):
        if self.augment in ("crop", "crop_flip") and not Path(self.path).is_dir():
            feature("tasks.vision.augment", "recipes", f"data.augment={self.augment}")
        return self

    @model_validator(mode="after")
    def _one_value_or_one_per_channel(self):
        if (self.mean is None) != (self.std is None):
            raise ValueError("data.mean and data.std go together: give both or neither")
        for key in ("mean", "std"):
            values = getattr(self, key)
            if values is not None and len(values) not in (1, self.channels):
                raise ValueError(f"data.{key} needs 1 or data.channels={self.channels} values, not {len(values)}")
        return self


class ModelConfig(Section):
    # small_cnn, the archs feature's resnet*/vit*, or your nn.Cell as module:Class (tasks/vision/model.py)
    arch: str = "small_cnn"
    kwargs: dict[str, Any] = {}  # your own arch's keyword arguments
    widths: list[int] = [32, 64]  # small_cnn: channels per stage; each stage after the first halves H and W
    blocks_per_stage: int = Field(1, gt=0)  # small_cnn
    norm: Literal["group", "batch"] = "group"  # small_cnn; group: accumulation/data parallel exact
    dropout: float = Field(0.0, ge=0, lt=1)
    drop_path: float = Field(0.0, ge=0, lt=1)  # stochastic depth, last residual block (timm: 0.05-0.1); recipes
    pretrained: str | None = None  # checkpoint to start from (backbone weights); finetune feature
    freeze_backbone: bool = False  # fine-tune only the classifier head; finetune feature
    fast_conv: Literal["auto"] | bool = False  # models/fast_conv.py (archs): auto = on CPU
    # vit_*: sizes; null = the arch's (vit_tiny: 16, 12, 3, 192, 768; vit_b_16: 16, 12, 12, 768, 3072)
    patch_size: PositiveInt | None = None  # data.image_size must be a multiple of it
    vit_layers: PositiveInt | None = None
    vit_heads: PositiveInt | None = None  # must divide vit_width
    vit_width: PositiveInt | None = None
    vit_mlp_dim: PositiveInt | None = None

    ARCHS: ClassVar[tuple[str, ...]] = ("small_cnn", "resnet18", "resnet34", "resnet50", "vit_tiny", "vit_b_16")
    FEATURES: ClassVar = {"drop_path": ("models.drop_path", "recipes"), "fast_conv": ("models.fast_conv", "archs"),
                          "pretrained": ("tasks.vision.finetune", "finetune"),
                          "freeze_backbone": ("tasks.vision.finetune", "finetune")}

    @field_validator("arch")
    @classmethod
    def _arch(cls, value: str) -> str:
        if check_name(value, cls.ARCHS) != "small_cnn" and not is_spec(value):  # ResNet, ViT: the archs feature
            feature("models.resnet" if value.startswith("resnet") else "models.vit", "archs")
        return value

    @model_validator(mode="after")
    def _yours_or_built_in(self):
        if is_spec(self.arch):  # the built-in archs' options do not reach your class: refuse, never ignore
            for key, off in (("dropout", 0.0), ("drop_path", 0.0), ("fast_conv", False), ("pretrained", None)):
                if getattr(self, key) != off:
                    raise ValueError(f"model.{key} is for the built-in archs; with model.arch={self.arch} set "
                                     f"it to {'null' if off is None else str(off).lower()} (give your class its own "
                                     "option through model.kwargs)")
        elif self.kwargs:
            raise ValueError(f"model.kwargs is for your own arch (model.arch: module:Class); {self.arch} takes "
                             "the keys of this section")
        return self


class TrainConfig(Train):
    label_smoothing: float = Field(0.0, ge=0, lt=1)  # target = (1 - e) * one-hot + e / classes (timm: 0.1)


class TaskConfig(Config):
    train: TrainConfig = TrainConfig()
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()

    @model_validator(mode="after")
    def _loss_takes_hard_labels(self):
        mixing = (self.data.mixup is not None or self.data.cutmix is not None) and self.data.mix_prob > 0
        if self.train.loss and (mixing or self.train.label_smoothing):
            raise ValueError(f"train.loss={self.train.loss} takes class labels; mixup/cutmix and "
                             "train.label_smoothing make soft targets for the built-in loss: turn them off "
                             "(data.mixup, data.cutmix: null, train.label_smoothing: 0) or set train.loss: null")
        return self

    @model_validator(mode="after")
    def _vit_fits(self):
        if not is_spec(self.model.arch) and self.model.arch.startswith("vit"):  # the archs feature's
            from ...models.vit_layout import check_fits

            check_fits(self.model, self.data.image_size)
        return self
