"""transformers' own ``CLIPModel`` holding a file's tensors, loaded by ``from_pretrained``: the
reference of ``convert_weights.py --verify``. Only ``--verify`` imports this module; the project
itself never needs PyTorch.
"""

from __future__ import annotations

import tempfile

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import CLIPConfig, CLIPModel


def reference_outputs(tensors: dict[str, np.ndarray], hf_config: dict, m, meta: dict, images: np.ndarray,
                      tokens: np.ndarray) -> dict[str, np.ndarray]:
    """Image and text embeddings (L2-normalised) and image-text logits of transformers' CLIPModel.
    ``hf_config``: the file's config.json, or {} (then one is built from the converted sizes)."""
    config = CLIPConfig.from_dict(hf_config) if hf_config else CLIPConfig(
        projection_dim=m.embed_dim,
        vision_config={"hidden_size": m.vit_width, "num_hidden_layers": m.vit_layers,
                       "num_attention_heads": m.vit_heads, "intermediate_size": 4 * m.vit_width,
                       "patch_size": m.vit_patch_size, "image_size": meta["image_size"],
                       "num_channels": meta["channels"]},
        text_config={"hidden_size": m.text_width, "num_hidden_layers": m.text_layers,
                     "num_attention_heads": m.text_heads, "intermediate_size": 4 * m.text_width,
                     "vocab_size": meta["vocab_size"], "max_position_embeddings": meta["max_tokens"],
                     "eos_token_id": meta["eos_id"]})
    with tempfile.TemporaryDirectory() as folder:
        save_file({name: np.array(value, order="C") for name, value in tensors.items()}, f"{folder}/model.safetensors")
        config.save_pretrained(folder)
        model, info = CLIPModel.from_pretrained(folder, output_loading_info=True)
    if info["missing_keys"] or info["unexpected_keys"] or info["mismatched_keys"]:
        raise ValueError(f"reference CLIP: missing {info['missing_keys'][:1]}, unexpected "
                         f"{info['unexpected_keys'][:1]}, mismatched {info['mismatched_keys'][:1]}")
    with torch.no_grad():
        out = model.eval()(input_ids=torch.from_numpy(tokens).long(), pixel_values=torch.from_numpy(images))
    return {"image_embeds": out.image_embeds.numpy(), "text_embeds": out.text_embeds.numpy(),
            "logits_per_image": out.logits_per_image.numpy()}
