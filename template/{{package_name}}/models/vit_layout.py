"""The published ViT layouts: the sizes of the named archs, and torchvision's names <-> Hugging
Face ``ViTForImageClassification``'s, one table both ways. Plain Python (the config checks the sizes).

Our ViT (``vit.py``) uses torchvision's names, so a torchvision-layout file loads as it is.
A Hugging Face file is renamed to them here (its separate query/key/value are stacked into
``in_proj_weight`` / ``in_proj_bias``, as ``nn.MultiheadAttention`` holds them); ``--verify``
renames the other way to run a torchvision-layout file in transformers' own ViT.
"""

from __future__ import annotations

import re

import numpy as np

# arch -> (patch_size, layers, heads, width, mlp_dim): torchvision's vit_b_16, timm's vit_tiny_patch16_224
ARCHS = {
    "vit_tiny": (16, 12, 3, 192, 768),
    "vit_b_16": (16, 12, 12, 768, 3072),
}


def vit_sizes(model_cfg) -> tuple[int, int, int, int, int]:
    """(patch_size, layers, heads, width, mlp_dim): the arch's, each replaced where the config sets one."""
    given = (model_cfg.patch_size, model_cfg.vit_layers, model_cfg.vit_heads, model_cfg.vit_width,
             model_cfg.vit_mlp_dim)
    return tuple(g if g is not None else p for g, p in zip(given, ARCHS[model_cfg.arch]))


def check_fits(model_cfg, image_size: int) -> None:
    """The config's check of a named ViT's sizes (``data.image_size``, ``model:``); a ValueError names the keys."""
    patch, _, heads, width, _ = vit_sizes(model_cfg)
    if image_size % patch:
        raise ValueError(f"data.image_size={image_size} must be a multiple of the ViT's patch size "
                         f"{patch} (model.patch_size)")
    if width % heads:
        raise ValueError(f"the ViT's width {width} must be divisible by its {heads} heads "
                         "(model.vit_width, model.vit_heads)")


# torchvision name -> Hugging Face name, outside the blocks
TOP = {
    "conv_proj.weight": "vit.embeddings.patch_embeddings.projection.weight",
    "conv_proj.bias": "vit.embeddings.patch_embeddings.projection.bias",
    "class_token": "vit.embeddings.cls_token",
    "encoder.pos_embedding": "vit.embeddings.position_embeddings",
    "encoder.ln.weight": "vit.layernorm.weight",
    "encoder.ln.bias": "vit.layernorm.bias",
    "heads.head.weight": "classifier.weight",
    "heads.head.bias": "classifier.bias",
}
# encoder.layers.encoder_layer_<i>.<key> -> vit.encoder.layer.<i>.<value> (+ .weight / .bias)
BLOCK = {
    "ln_1": "layernorm_before",
    "self_attention.out_proj": "attention.output.dense",
    "ln_2": "layernorm_after",
    "mlp.0": "intermediate.dense",
    "mlp.3": "output.dense",
}
QKV = ("query", "key", "value")  # vit.encoder.layer.<i>.attention.attention.<q|k|v>
HF_BLOCK = re.compile(r"vit\.encoder\.layer\.(\d+)\.")


def is_hf_vit(tensors: dict) -> bool:
    return "vit.embeddings.patch_embeddings.projection.weight" in tensors


def layer_count(tensors: dict, pattern: str) -> int:
    return len({m.group(1) for name in tensors if (m := re.match(pattern, name))})


def pairs(n_layers: int):
    """(torchvision, Hugging Face) name pairs of every tensor but q/k/v."""
    yield from TOP.items()
    for i in range(n_layers):
        for tv, hf in BLOCK.items():
            for leaf in ("weight", "bias"):
                yield f"encoder.layers.encoder_layer_{i}.{tv}.{leaf}", f"vit.encoder.layer.{i}.{hf}.{leaf}"


def from_hf(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A Hugging Face ViT's tensors under torchvision's names; tensors the table does not know
    keep their own name (so the import names the first unexpected one)."""
    n = layer_count(tensors, HF_BLOCK.pattern)
    out, used = {}, set()
    for tv, hf in pairs(n):
        if hf in tensors:
            out[tv], _ = tensors[hf], used.add(hf)
    for i in range(n):
        for leaf in ("weight", "bias"):
            names = [f"vit.encoder.layer.{i}.attention.attention.{q}.{leaf}" for q in QKV]
            if all(name in tensors for name in names):
                out[f"encoder.layers.encoder_layer_{i}.self_attention.in_proj_{leaf}"] = np.concatenate(
                    [tensors[name] for name in names])  # (3C, C) / (3C,): q, k, v stacked
                used.update(names)
    out.update({name: value for name, value in tensors.items() if name not in used})
    return out


def to_hf(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inverse: torchvision-named tensors under Hugging Face's names."""
    n = layer_count(tensors, r"encoder\.layers\.encoder_layer_(\d+)\.")
    out = {hf: tensors[tv] for tv, hf in pairs(n) if tv in tensors}
    for i in range(n):
        for leaf in ("weight", "bias"):
            stacked = tensors[f"encoder.layers.encoder_layer_{i}.self_attention.in_proj_{leaf}"]
            for q, part in zip(QKV, np.split(stacked, 3)):
                out[f"vit.encoder.layer.{i}.attention.attention.{q}.{leaf}"] = part
    return out
