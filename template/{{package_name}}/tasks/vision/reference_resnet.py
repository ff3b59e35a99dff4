"""The same ResNets in plain PyTorch, with torchvision's names: the reference that
``convert_weights.py --verify`` runs on the same file and input as the converted network.

Only ``--verify`` imports this module; the project itself never needs PyTorch.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

DEPTHS = {"resnet18": (False, (2, 2, 2, 2)), "resnet34": (False, (3, 4, 6, 3)), "resnet50": (True, (3, 4, 6, 3))}


class Block(nn.Module):
    def __init__(self, in_ch: int, width: int, stride: int, bottleneck: bool):
        super().__init__()
        out_ch = width * 4 if bottleneck else width
        if bottleneck:  # 1x1 reduce, 3x3 with the stride, 1x1 expand
            self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.conv3, self.bn3 = nn.Conv2d(width, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch)
        else:
            self.conv1 = nn.Conv2d(in_ch, width, 3, stride, 1, bias=False)
            self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn1, self.bn2 = nn.BatchNorm2d(width), nn.BatchNorm2d(width)
        self.bottleneck = bottleneck
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.bottleneck:
            out = self.bn3(self.conv3(torch.relu(out)))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    def __init__(self, arch: str, num_classes: int, channels: int = 3):
        super().__init__()
        bottleneck, depths = DEPTHS[arch]
        self.conv1, self.bn1 = nn.Conv2d(channels, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        in_ch = 64
        for stage, (width, depth) in enumerate(zip((64, 128, 256, 512), depths), start=1):
            blocks = []
            for i in range(depth):
                blocks.append(Block(in_ch, width, 2 if stage > 1 and i == 0 else 1, bottleneck))
                in_ch = width * 4 if bottleneck else width
            setattr(self, f"layer{stage}", nn.Sequential(*blocks))
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x):
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(x.mean((2, 3)))


def reference_logits(arch: str, tensors: dict[str, np.ndarray], images: np.ndarray) -> np.ndarray:
    """Logits of the PyTorch ResNet holding ``tensors`` (eval mode) for (N, C, H, W) ``images``."""
    model = ResNet(arch, tensors["fc.weight"].shape[0], tensors["conv1.weight"].shape[1])
    state = {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [name for name in missing if not name.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise ValueError(f"reference ResNet: missing {missing[:1]}, unexpected {unexpected[:1]}")
    with torch.no_grad():
        return model.eval()(torch.from_numpy(images)).numpy()
