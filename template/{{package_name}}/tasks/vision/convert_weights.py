"""Import ResNet or ViT weights (``.safetensors``) as a checkpoint of this project.

    python convert_weights.py resnet18.safetensors --out weights/resnet18.ckpt
    python convert_weights.py vit-base-patch16-224/model.safetensors --out weights/vit_b_16.ckpt --verify
    python convert_weights.py resnet50.safetensors --out weights/r50.ckpt --classes names.txt --verify
    python eval.py --checkpoint weights/resnet18.ckpt --set data.path=my_images/
    python train.py --set model.arch=resnet18 --set model.pretrained=weights/resnet18.ckpt \\
        --set data.channels=3 --set data.image_size=224 --set data.path=my_images/

The arch (resnet18/34/50) is read off the file. Our ResNet uses torchvision's module names
(``models/resnet.py``), so the table is short: torchvision's ``fc`` is our ``head``, everything else
lives under ``backbone``, and BatchNorm's weight/bias/running_mean/running_var are
MindSpore's gamma/beta/moving_mean/moving_variance. Convolution and linear weights have the
same layout in both. The checkpoint carries the source's head and classes (``class_<i>``, or
one name per line from ``--classes``) and ImageNet's mean/std, which fine-tuning reuses.

ViTs (``models/vit.py``): a torchvision ``VisionTransformer`` file has our names already (its
``heads.head`` is our ``head``); a Hugging Face ``ViTForImageClassification`` file is renamed
to them (``models/vit_layout.py``), its ``config.json`` (heads) and ``preprocessor_config.json``
(mean/std) read when they lie beside it. The arch is the one of the file's width (vit_tiny 192,
vit_b_16 768); its other sizes and the image size its positions are for are read off the file.

``--verify`` (needs PyTorch) runs the file in a plain PyTorch ResNet (``reference_resnet.py``)
or in transformers' own ``ViTForImageClassification`` (``reference_vit.py``) and the converted
network on the same random images, and fails if their logits differ.
"""

from __future__ import annotations

import argparse
import json
import math
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


def vit_source_name(ours: str) -> str:
    """``backbone.encoder.ln.gamma`` -> ``encoder.ln.weight``; ``head.bias`` -> ``heads.head.bias``."""
    module, _, leaf = ours.rpartition(".")
    module = "heads.head" if module == "head" else module.removeprefix("backbone").lstrip(".")
    leaf = BATCHNORM.get(leaf, leaf)  # LayerNorm's gamma/beta, as BatchNorm's
    return f"{module}.{leaf}" if module else leaf


def ignored(name: str) -> bool:
    return name.endswith(".num_batches_tracked")  # a PyTorch training counter, not a weight


def detect_arch(tensors: dict[str, np.ndarray]) -> str:
    from ...models.resnet import ARCHS, Bottleneck

    if "layer1.0.conv1.weight" not in tensors:
        raise CheckpointError(f"no tensor 'layer1.0.conv1.weight' or 'conv_proj.weight': not a torchvision/timm "
                              f"ResNet, a torchvision ViT or a Hugging Face ViT (its first tensor is "
                              f"{next(iter(tensors))!r})")
    depths = tuple(len({name.split(".")[1] for name in tensors if name.startswith(f"layer{stage}.")})
                   for stage in (1, 2, 3, 4))
    bottleneck = "layer1.0.conv3.weight" in tensors
    for arch, (block, arch_depths) in ARCHS.items():
        if arch_depths == depths and (block is Bottleneck) == bottleneck:
            return arch
    raise CheckpointError(f"a ResNet with {depths} {'bottleneck' if bottleneck else 'basic'} blocks per stage "
                          f"is none of {', '.join(ARCHS)}")


def beside(src: str, name: str) -> dict:
    """A Hugging Face JSON file next to ``src`` (config.json, preprocessor_config.json), or {}."""
    path = Path(src).with_name(name)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def vit_overrides(tensors: dict[str, np.ndarray], src: str, heads: int | None) -> tuple[list[str], int]:
    """Config overrides for the ViT in the (torchvision-named) file (the arch of its width, its
    sizes) and the image size its positions are for."""
    from ...models.vit_layout import ARCHS, layer_count

    for name in ("conv_proj.weight", "encoder.pos_embedding", "encoder.layers.encoder_layer_0.mlp.0.weight",
                 "heads.head.weight"):
        if name not in tensors:
            raise CheckpointError(f"missing tensor {name!r}: not a whole ViT classifier (torchvision's "
                                  "VisionTransformer or Hugging Face's ViTForImageClassification)")
    width, _, patch, _ = tensors["conv_proj.weight"].shape
    arch = next((a for a, sizes in ARCHS.items() if sizes[3] == width), None)
    if arch is None:
        known = ", ".join(f"{a} ({sizes[3]})" for a, sizes in ARCHS.items())
        raise CheckpointError(f"a ViT of width {width} is none of {known}")
    grid = math.isqrt(tensors["encoder.pos_embedding"].shape[1] - 1)
    if grid * grid + 1 != tensors["encoder.pos_embedding"].shape[1]:
        raise CheckpointError(f"tensor 'encoder.pos_embedding' {tensors['encoder.pos_embedding'].shape}: "
                              "not a square grid of patches plus the class token")
    heads = heads or beside(src, "config.json").get("num_attention_heads") or ARCHS[arch][2]
    layers = layer_count(tensors, r"encoder\.layers\.encoder_layer_(\d+)\.")
    mlp_dim = tensors["encoder.layers.encoder_layer_0.mlp.0.weight"].shape[0]
    return [f"model.arch={arch}", f"model.patch_size={patch}", f"model.vit_heads={heads}",
            f"model.vit_width={width}", f"model.vit_layers={layers}", f"model.vit_mlp_dim={mlp_dim}"], grid * patch


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


def convert(src: str, out: str, *, classes: str | None = None, image_size: int | None = None,
            config: str = DEFAULT_CONFIG, verify: bool = False, heads: int | None = None) -> dict:
    """Read ``src``, check it, optionally verify it against PyTorch, write ``out``; return a summary."""
    from ...engine import runtime
    from ...tasks import load_config

    if not out.endswith(".ckpt"):
        raise UserError(f"--out {out}: name the checkpoint *.ckpt")
    if image_size is not None and image_size <= 0:
        raise UserError(f"--image-size {image_size}: must be > 0")
    runtime.setup(load_config(config))  # the oneDNN cap must be set before MindSpore loads
    from ...deploy import weights
    from ...engine.task import Comm
    from ...models.vit_layout import from_hf, is_hf_vit
    from .task import build_model

    original = weights.read_safetensors(src)
    hf = is_hf_vit(original)
    tensors = from_hf(original) if hf else original  # a Hugging Face ViT under torchvision's names
    try:
        if "conv_proj.weight" in tensors:  # a ViT: its sizes, image size included, are read off the file
            (overrides, fixed), rename = vit_overrides(tensors, src, heads), vit_source_name
            head_name = "heads.head.weight"
            if image_size not in (None, fixed):
                raise UserError(f"--image-size {image_size}: this ViT's positions are for {fixed}-pixel images")
            image_size = fixed
        else:
            overrides, rename, head_name = [f"model.arch={detect_arch(tensors)}"], source_name, "fc.weight"
            image_size = image_size or 224
        stem_name = "conv_proj.weight" if rename is vit_source_name else "conv1.weight"
        missing = next((name for name in (stem_name, head_name) if name not in tensors), None)
        if missing:
            raise CheckpointError(f"missing tensor {missing!r}")
        stem, head = tensors[stem_name], tensors[head_name]
        if stem.ndim != 4 or stem.shape[1] not in (1, 3) or head.ndim != 2:
            raise CheckpointError(f"tensor {stem_name!r} {stem.shape} / {head_name!r} {head.shape}: "
                                  "expected a 1- or 3-channel stem and a 2-D head")
        channels = int(stem.shape[1])
        cfg = load_config(config, [*overrides, f"data.channels={channels}", f"data.image_size={image_size}",
                                   "model.pretrained=null", "model.freeze_backbone=false", "model.dropout=0.0",
                                   "model.kwargs={}"])
        mean, std = normalisation(src, hf, channels)
        meta = {"classes": class_names(classes, head.shape[0]), "image_size": image_size, "channels": channels,
                "mean": mean, "std": std, "eval_crop": cfg.data.eval_crop,
                "data_path": None}  # trained on no data here: eval.py scores all of any data.path
        network = build_model(cfg, meta, Comm()).network
        weights.load(network, weights.map_weights(network, tensors, rename, ignored=ignored))
    except CheckpointError as exc:
        raise CheckpointError(f"{src}: {exc}") from None
    network.set_train(False)
    arch = cfg.model.arch
    summary = {"arch": arch, "classes": head.shape[0], "out": out}
    if verify:
        reference = original if hf else tensors
        summary["max_abs_logit_diff"] = verify_against_pytorch(network, cfg, reference, meta, src)
    weights.save_imported(out, network, cfg, meta, {"file": Path(src).name, "sha256": weights.sha256(src)})
    return summary


def normalisation(src: str, hf: bool, channels: int) -> tuple[list[float], list[float]]:
    """ImageNet's mean/std (torchvision, timm), or a Hugging Face file's own preprocessor_config.json
    (google/vit-*: 0.5, 0.5)."""
    pre = beside(src, "preprocessor_config.json") if hf else {}
    mean, std = pre.get("image_mean", IMAGENET_MEAN), pre.get("image_std", IMAGENET_STD)
    return [float(v) for v in mean[:channels]], [float(v) for v in std[:channels]]


def verify_against_pytorch(network, cfg, tensors: dict[str, np.ndarray], meta: dict, src: str) -> float:
    """Max |logit difference| between ``network`` and the PyTorch reference on random images: our
    plain PyTorch ResNet (``reference_resnet.py``), or transformers' own ViT (``reference_vit.py``)."""
    try:
        if cfg.model.arch.startswith("vit"):
            from .reference_vit import reference_logits

            def expected_logits(images):
                return reference_logits(tensors, cfg.model, beside(src, "config.json"), images)
        else:
            from .reference_resnet import reference_logits

            def expected_logits(images):
                return reference_logits(cfg.model.arch, tensors, images)
    except ImportError:
        raise UserError("--verify needs PyTorch (pip install torch; a ViT also transformers); "
                        "nothing was written") from None
    from mindspore import Tensor

    size = meta["image_size"] if cfg.model.arch.startswith("vit") else min(meta["image_size"], 64)
    images = np.random.default_rng(0).standard_normal((2, meta["channels"], size, size)).astype(np.float32)
    expected = expected_logits(images)
    diff = float(np.abs(network(Tensor(images)).asnumpy() - expected).max())
    if diff > TOLERANCE * float(np.abs(expected).max()):
        raise CheckpointError(f"--verify: logits differ from PyTorch's by up to {diff:.3g}; nothing was written")
    return diff


def main() -> NoReturn:
    p = argparse.ArgumentParser(description="Import ResNet or ViT weights (.safetensors) "
                                            "as a checkpoint of this project.")
    p.add_argument("src", help="a .safetensors file of a torchvision/timm resnet18/34/50, a torchvision "
                               "VisionTransformer or a Hugging Face ViTForImageClassification")
    p.add_argument("--out", required=True, help="the checkpoint to write (*.ckpt)")
    p.add_argument("--classes", help="class names, one per line, in the head's order (default: class_<i>)")
    p.add_argument("--image-size", type=int, help="data.image_size to record (default: 224; a ViT: its own)")
    p.add_argument("--heads", type=int, help="a ViT's attention heads (default: from config.json beside it, "
                                             "else the arch's)")
    p.add_argument("--config", default=DEFAULT_CONFIG, help="the config to record (default: %(default)s)")
    p.add_argument("--verify", action="store_true", help="compare logits with PyTorch's (needs torch)")
    args = p.parse_args()

    def run():
        summary = convert(args.src, args.out, classes=args.classes, image_size=args.image_size,
                          config=args.config, verify=args.verify, heads=args.heads)
        diff = f", max |logit diff| vs PyTorch {summary['max_abs_logit_diff']:.2e}" if args.verify else ""
        print(f"{args.src}: {summary['arch']}, {summary['classes']} classes -> {summary['out']}{diff}")

    guarded(run)
