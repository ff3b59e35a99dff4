"""transformers' own ViT holding a file's tensors, loaded by ``from_pretrained``: the reference
of ``convert_weights.py --verify`` for ViTs. A torchvision-layout file is renamed to Hugging
Face's names (``vit_layout.to_hf``); a Hugging Face file runs as it is.

Only ``--verify`` imports this module; the project itself never needs PyTorch.
"""

from __future__ import annotations

import tempfile

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import ViTConfig, ViTForImageClassification

from ...models.vit import LN_EPS
from ...models.vit_layout import is_hf_vit, to_hf, vit_sizes


def reference_logits(tensors: dict[str, np.ndarray], model_cfg, hf_config: dict, images: np.ndarray) -> np.ndarray:
    """Logits of ``ViTForImageClassification`` holding ``tensors`` (eval mode) for (N, C, S, S) ``images``.
    ``hf_config``: the file's config.json (a Hugging Face file), else {} (torchvision's LayerNorm epsilon)."""
    hf = tensors if is_hf_vit(tensors) else to_hf(tensors)
    patch, layers, heads, width, mlp_dim = vit_sizes(model_cfg)
    config = ViTConfig(hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads,
                       intermediate_size=mlp_dim, image_size=images.shape[-1], patch_size=patch,
                       num_channels=images.shape[1], num_labels=hf["classifier.weight"].shape[0],
                       hidden_act=hf_config.get("hidden_act", "gelu"),
                       layer_norm_eps=hf_config.get("layer_norm_eps", LN_EPS), qkv_bias=True)
    with tempfile.TemporaryDirectory() as folder:  # loaded the way transformers loads a published file
        save_file({name: np.array(value, order="C") for name, value in hf.items()}, f"{folder}/model.safetensors")
        config.save_pretrained(folder)
        model, info = ViTForImageClassification.from_pretrained(folder, output_loading_info=True)
    if info["missing_keys"] or info["unexpected_keys"] or info["mismatched_keys"]:
        raise ValueError(f"reference ViT: missing {info['missing_keys'][:1]}, unexpected "
                         f"{info['unexpected_keys'][:1]}, mismatched {info['mismatched_keys'][:1]}")
    with torch.no_grad():
        return model.eval()(pixel_values=torch.from_numpy(images)).logits.numpy()
