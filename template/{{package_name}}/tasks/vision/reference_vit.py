"""transformers' own ViT holding a file's tensors: the reference of ``convert_weights.py --verify``
for ViTs. A torchvision-layout file is renamed to Hugging Face's names (``vit_layout.to_hf``);
a Hugging Face file runs as it is.

Only ``--verify`` imports this module; the project itself never needs PyTorch.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers import ViTConfig, ViTForImageClassification

from .vit_layout import is_hf_vit, to_hf, vit_sizes
from .vit import LN_EPS


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
    model = ViTForImageClassification(config)
    state = {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in hf.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"reference ViT: missing {missing[:1]}, unexpected {unexpected[:1]}")
    with torch.no_grad():
        return model.eval()(pixel_values=torch.from_numpy(images)).logits.numpy()
