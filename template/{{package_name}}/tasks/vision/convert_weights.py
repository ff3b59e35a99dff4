"""Import torchvision/timm ResNet weights (``.safetensors``) as a checkpoint of this project.

    python convert_weights.py resnet18.safetensors --out weights/resnet18.ckpt
    python convert_weights.py resnet50.safetensors --out weights/r50.ckpt --classes names.txt --verify
    python eval.py --checkpoint weights/resnet18.ckpt --set data.path=my_images/
    python train.py --set model.arch=resnet18 --set model.pretrained=weights/resnet18.ckpt \\
        --set data.channels=3 --set data.image_size=224 --set data.path=my_images/

The arch (resnet18/34/50) is read off the file. Our ResNet uses torchvision's module names
(``resnet.py``), so the table is short: torchvision's ``fc`` is our ``head``, everything else
lives under ``backbone``, and BatchNorm's weight/bias/running_mean/running_var are
MindSpore's gamma/beta/moving_mean/moving_variance. Convolution and linear weights have the
same layout in both. The checkpoint carries the source's head and classes (``class_<i>``, or
one name per line from ``--classes``) and ImageNet's mean/std, which fine-tuning reuses.

``--verify`` (needs PyTorch) runs the file in a plain PyTorch ResNet (``reference_resnet.py``)
and the converted network on the same random images and fails if their logits differ.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn

import numpy as np

from ...engine.errors import CheckpointError, UserError
from ...run.cli import DEFAULT_CONFIG, guarded

IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BATCHNORM = {"gamma": "weight", "beta": "bias", "moving_mean": "running_mean", "moving_variance": "running_var"}
TOLERANCE = 1e-4  # --verify: max |logit difference| relative to the largest reference logit


def source_name(ours: str) -> str:
    """``backbone.layer1.0.bn1.gamma`` -> ``layer1.0.bn1.weight``; ``head.bias`` -> ``fc.bias``."""
    module, _, leaf = ours.rpartition(".")
    module = "fc" if module == "head" else module.removeprefix("backbone.")
    return f"{module}.{BATCHNORM.get(leaf, leaf)}"


def ignored(name: str) -> bool:
    return name.endswith(".num_batches_tracked")  # a PyTorch training counter, not a weight


def detect_arch(tensors: dict[str, np.ndarray]) -> str:
    from .resnet import ARCHS, Bottleneck

    if "layer1.0.conv1.weight" not in tensors:
        raise CheckpointError(f"no tensor 'layer1.0.conv1.weight': not a torchvision/timm ResNet "
                              f"(its first tensor is {next(iter(tensors))!r})")
    depths = tuple(len({name.split(".")[1] for name in tensors if name.startswith(f"layer{stage}.")})
                   for stage in (1, 2, 3, 4))
    bottleneck = "layer1.0.conv3.weight" in tensors
    for arch, (block, arch_depths) in ARCHS.items():
        if arch_depths == depths and (block is Bottleneck) == bottleneck:
            return arch
    raise CheckpointError(f"a ResNet with {depths} {'bottleneck' if bottleneck else 'basic'} blocks per stage "
                          f"is none of {', '.join(ARCHS)}")


def class_names(path: str | None, count: int) -> list[str]:
    if path is None:
        return [f"class_{i}" for i in range(count)]
    try:
        names = [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--classes {path}: cannot read it ({exc.__class__.__name__})") from None
    if len(names) != count:
        raise UserError(f"--classes {path} names {len(names)} classes; the file's head has {count}")
    return names


def convert(src: str, out: str, *, classes: str | None = None, image_size: int = 224,
            config: str = DEFAULT_CONFIG, verify: bool = False) -> dict:
    """Read ``src``, check it, optionally verify it against PyTorch, write ``out``; return a summary."""
    from ...engine import runtime
    from ...tasks import load_config

    if not out.endswith(".ckpt"):
        raise UserError(f"--out {out}: name the checkpoint *.ckpt")
    if image_size <= 0:
        raise UserError(f"--image-size {image_size}: must be > 0")
    runtime.setup(load_config(config))  # the oneDNN cap must be set before MindSpore loads
    from ...deploy import weights
    from ...engine.task import Comm
    from .task import build_model

    tensors = weights.read_safetensors(src)
    try:
        arch = detect_arch(tensors)
        missing = next((name for name in ("conv1.weight", "fc.weight") if name not in tensors), None)
        if missing:
            raise CheckpointError(f"missing tensor {missing!r}")
        stem, head = tensors["conv1.weight"], tensors["fc.weight"]
        if stem.ndim != 4 or stem.shape[1] not in (1, 3) or head.ndim != 2:
            raise CheckpointError(f"tensor 'conv1.weight' {stem.shape} / 'fc.weight' {head.shape}: "
                                  "expected a 1- or 3-channel stem and a 2-D head")
        cfg = load_config(config, [f"model.arch={arch}", f"data.channels={stem.shape[1]}",
                                   f"data.image_size={image_size}", "model.pretrained=null",
                                   "model.freeze_backbone=false"])
        meta = {"classes": class_names(classes, head.shape[0]), "image_size": image_size,
                "channels": int(stem.shape[1]), "mean": IMAGENET_MEAN[:stem.shape[1]],
                "std": IMAGENET_STD[:stem.shape[1]], "eval_crop": cfg.data.eval_crop,
                "data_path": None}  # trained on no data here: eval.py scores all of any data.path
        network = build_model(cfg, meta, Comm()).network
        weights.load(network, weights.map_weights(network, tensors, source_name, ignored=ignored))
    except CheckpointError as exc:
        raise CheckpointError(f"{src}: {exc}") from None
    network.set_train(False)
    summary = {"arch": arch, "classes": head.shape[0], "out": out}
    if verify:
        summary["max_abs_logit_diff"] = verify_against_pytorch(network, arch, tensors, meta)
    weights.save_imported(out, network, cfg, meta, {"file": Path(src).name, "sha256": weights.sha256(src)})
    return summary


def verify_against_pytorch(network, arch: str, tensors: dict[str, np.ndarray], meta: dict) -> float:
    """Max |logit difference| between ``network`` and the PyTorch reference on random images."""
    try:
        from .reference_resnet import reference_logits
    except ImportError:
        raise UserError("--verify needs PyTorch (pip install torch); nothing was written") from None
    from mindspore import Tensor

    size = min(meta["image_size"], 64)  # the mapping shows at any size; 64 keeps this quick
    images = np.random.default_rng(0).standard_normal((2, meta["channels"], size, size)).astype(np.float32)
    expected = reference_logits(arch, tensors, images)
    diff = float(np.abs(network(Tensor(images)).asnumpy() - expected).max())
    if diff > TOLERANCE * float(np.abs(expected).max()):
        raise CheckpointError(f"--verify: logits differ from PyTorch's by up to {diff:.3g}; nothing was written")
    return diff


def main() -> NoReturn:
    p = argparse.ArgumentParser(description="Import torchvision/timm ResNet weights (.safetensors) "
                                            "as a checkpoint of this project.")
    p.add_argument("src", help="a .safetensors file of a torchvision/timm resnet18, resnet34 or resnet50")
    p.add_argument("--out", required=True, help="the checkpoint to write (*.ckpt)")
    p.add_argument("--classes", help="class names, one per line, in the head's order (default: class_<i>)")
    p.add_argument("--image-size", type=int, default=224, help="data.image_size to record (default: %(default)s)")
    p.add_argument("--config", default=DEFAULT_CONFIG, help="the config to record (default: %(default)s)")
    p.add_argument("--verify", action="store_true", help="compare logits with PyTorch's (needs torch)")
    args = p.parse_args()

    def run():
        summary = convert(args.src, args.out, classes=args.classes, image_size=args.image_size,
                          config=args.config, verify=args.verify)
        diff = f", max |logit diff| vs PyTorch {summary['max_abs_logit_diff']:.2e}" if args.verify else ""
        print(f"{args.src}: {summary['arch']}, {summary['classes']} classes -> {summary['out']}{diff}")

    guarded(run)
