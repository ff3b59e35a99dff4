"""A small ResNet: stages of residual blocks, global average pooling, a linear head.

Normalisation is GroupNorm by default: unlike BatchNorm it treats every example on its
own, so k accumulated micro-batches (or N data-parallel ranks) give exactly the update
of one big batch, and train and eval modes compute the same function. ``norm: batch``
restores BatchNorm (the engine then warns that accumulation is approximate).
"""

from __future__ import annotations

from mindspore import nn, ops


def norm_layer(kind: str, channels: int) -> nn.Cell:
    return nn.BatchNorm2d(channels) if kind == "batch" else nn.GroupNorm(min(8, channels), channels)


class ResidualBlock(nn.Cell):
    """conv-norm-ReLU-conv-norm plus a shortcut (1x1 conv when the shape changes)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, norm: str):
        super().__init__()
        self.body = nn.SequentialCell(
            nn.Conv2d(in_ch, out_ch, 3, stride=stride, pad_mode="same", has_bias=False),
            norm_layer(norm, out_ch), nn.ReLU(),
            nn.Conv2d(out_ch, out_ch, 3, pad_mode="same", has_bias=False),
            norm_layer(norm, out_ch),
        )
        self.shortcut = nn.Identity() if stride == 1 and in_ch == out_ch else nn.SequentialCell(
            nn.Conv2d(in_ch, out_ch, 1, stride=stride, has_bias=False), norm_layer(norm, out_ch))
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.body(x) + self.shortcut(x))


class Backbone(nn.Cell):
    def __init__(self, channels: int, widths: list[int], blocks_per_stage: int, norm: str):
        super().__init__()
        layers = [nn.Conv2d(channels, widths[0], 3, pad_mode="same", has_bias=False),
                  norm_layer(norm, widths[0]), nn.ReLU()]
        in_ch = widths[0]
        for stage, width in enumerate(widths):
            for block in range(blocks_per_stage):
                layers.append(ResidualBlock(in_ch, width, 2 if stage > 0 and block == 0 else 1, norm))
                in_ch = width
        self.layers = nn.SequentialCell(layers)
        self.out_features = in_ch

    def construct(self, x):  # (B, C, H, W) -> (B, F)
        return ops.mean(self.layers(x), axis=(2, 3))


class Classifier(nn.Cell):
    def __init__(self, channels: int, num_classes: int, widths: list[int], blocks_per_stage: int,
                 norm: str = "group", dropout: float = 0.0):
        super().__init__()
        self.backbone = Backbone(channels, widths, blocks_per_stage, norm)
        self.dropout = nn.Dropout(p=dropout)
        self.head = nn.Dense(self.backbone.out_features, num_classes)
        self.frozen = False

    def freeze_backbone(self) -> None:
        """Train only the head: backbone weights get no gradient, BatchNorm statistics (if any) stay fixed."""
        self.frozen = True
        for param in self.backbone.get_parameters():
            param.requires_grad = False
        self.backbone.set_train(False)

    def set_train(self, mode: bool = True):
        super().set_train(mode)
        if self.frozen:
            self.backbone.set_train(False)
        return self

    def construct(self, x):  # (B, C, H, W) -> logits (B, num_classes)
        return self.head(self.dropout(self.backbone(x)))


class ClassificationLoss(nn.Cell):
    def __init__(self, network: nn.Cell):
        super().__init__()
        self.network = network
        self.loss = nn.CrossEntropyLoss()

    def construct(self, image, label):
        return self.loss(self.network(image), label)
