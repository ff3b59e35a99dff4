"""Config sections of the multimodal task (``data:`` and ``model:`` in config.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from ...engine.schema import Config, DataSection, Section

NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


class DataConfig(DataSection):
    path: str = "data/digits.npz"  # .npz (images, labels) or a folder of images with metadata.jsonl
    image_size: int = Field(8, gt=0)  # images are resized to image_size x image_size
    channels: Literal[1, 3] = 1  # 1: grayscale, 3: RGB
    eval_fraction: float = Field(0.2, gt=0, lt=1)  # of the images (each with all its captions) held out
    # caption of class {} (.npz) and zero-shot prompt; a list of templates: captions use the first, zero-shot
    # averages the class's embeddings over all of them (CLIP's prompt ensembling). An imported CLIP: "a photo of a {}."
    prompt: str | list[str] = Field("a handwritten digit {}", min_length=1)
    class_names: list[str] = NUMBER_WORDS  # .npz: the name of label i in captions and prompts
    attributes: bool = False  # labelled .npz: add stroke thickness, slant and width measured from each image
    max_tokens: int = Field(16, gt=0)  # captions are cut to this many words
    # Training augmentation of a metadata.jsonl folder (an .npz is not augmented; eval never is), every
    # random number from (seed, epoch, image): a random resized crop of at least min_crop of the area
    # (1.0 = none; 0.9 as OpenCLIP trains: a caption may name what a tighter crop cuts off; vision, timm: 0.08)
    min_crop: float = Field(0.9, gt=0, le=1)
    flip: bool = False  # mirror half the training images; off: a caption saying "left" would then be wrong


class ModelConfig(Section):
    embed_dim: int = Field(64, gt=0)  # size of the shared image-text space
    # mlp, cnn: this task's own; small_cnn, resnet*: the registry's backbones (models/) + a projection;
    # vit: CLIP's ViT (models/vit.py blocks, clip.py), importable from Hugging Face CLIPModel files
    image_tower: Literal["mlp", "cnn", "small_cnn", "resnet18", "resnet34", "resnet50", "vit"] = "mlp"
    image_widths: list[PositiveInt] = Field([256, 256], min_length=1)  # mlp: hidden widths; cnn, small_cnn: channels
    # bag of words + MLP | the LM's Transformer blocks | clip: CLIP's text transformer and BPE tokenizer
    # (trained from model.pretrained: an imported CLIP, whose tokenizer it uses)
    text_tower: Literal["bag", "transformer", "clip"] = "bag"
    text_width: int = Field(64, gt=0)  # word embedding size (transformer: model width)
    text_hidden: int = Field(128, gt=0)  # bag: hidden width of the MLP after mean pooling
    text_layers: int = Field(2, gt=0)  # transformer: blocks
    text_heads: int = Field(4, gt=0)  # transformer: attention heads
    vit_patch_size: PositiveInt = 4  # vit: data.image_size must be a multiple of it
    vit_layers: PositiveInt = 2  # vit: blocks
    vit_heads: PositiveInt = 4  # vit: attention heads (divide vit_width)
    vit_width: PositiveInt = 64  # vit: model width (its MLP: 4x)
    freeze_image_tower: bool = False  # true: the image tower (projection included) is not trained
    init_temperature: float = Field(0.07, ge=0.01, le=1.0)  # softmax temperature at step 0 (learned)
    # small_cnn, resnet* towers: convolutions whose weight gradient is a forward
    # convolution (models/fast_conv.py): auto = on CPU only | true | false = nn.Conv2d (default)
    fast_conv: Literal["auto"] | bool = False
    # small_cnn, resnet*: a vision checkpoint (trained, or made by the vision task's convert_weights.py)
    # whose backbone starts the image tower (its model.arch = image_tower); vit / clip: a checkpoint of
    # this task (e.g. made by this task's convert_weights.py from a CLIPModel) that starts the whole model
    pretrained: str | None = None

    @model_validator(mode="after")
    def _heads_divide_width(self):
        if self.pretrained and self.image_tower in ("mlp", "cnn"):
            raise ValueError(f"model.pretrained: the {self.image_tower} image tower has no vision backbone to "
                             "load; set model.image_tower to the checkpoint's model.arch")
        if self.text_tower in ("transformer", "clip") and self.text_width % self.text_heads:
            raise ValueError(f"model.text_width={self.text_width} must be divisible by "
                             f"model.text_heads={self.text_heads} (model.text_tower={self.text_tower})")
        if self.image_tower == "vit" and self.vit_width % self.vit_heads:
            raise ValueError(f"model.vit_width={self.vit_width} must be divisible by model.vit_heads={self.vit_heads}")
        return self


class TaskConfig(Config):
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()

    @model_validator(mode="after")
    def _patches_fit(self):
        if self.model.image_tower == "vit" and self.data.image_size % self.model.vit_patch_size:
            raise ValueError(f"data.image_size={self.data.image_size} must be a multiple of "
                             f"model.vit_patch_size={self.model.vit_patch_size}")
        return self
