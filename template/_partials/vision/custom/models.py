"""Your networks. Name one in config/config.yaml:

    model:
      arch: custom.models:TinyCNN
      kwargs: {width: 32}

What a network must do ({{ package_name }}/tasks/vision/model.py): an ``nn.Cell`` class built as
``Class(num_classes=..., in_channels=..., image_size=..., **model.kwargs)`` that maps (B, C, H, W)
normalised float32 images to (B, num_classes) logits, in float32: end with ``.astype(ms.float32)``
(nothing in fp32; under mixed precision, evaluation and export then read float32, as the built-ins).
"""

import mindspore as ms
from mindspore import nn


class TinyCNN(nn.Cell):
    """Two 3x3 convolutions and a linear head over every pixel: for small images (the digits)."""

    def __init__(self, num_classes: int, in_channels: int, image_size: int, width: int = 32):
        super().__init__()
        self.features = nn.SequentialCell(
            nn.Conv2d(in_channels, width, 3, pad_mode="same"), nn.ReLU(),
            nn.Conv2d(width, width, 3, pad_mode="same"), nn.ReLU(),
        )
        self.flat = width * image_size * image_size
        self.head = nn.Dense(self.flat, num_classes)

    def construct(self, x):  # (B, C, H, W) -> (B, num_classes); -1: any batch, in an ONNX export too
        return self.head(self.features(x).reshape(-1, self.flat)).astype(ms.float32)
