"""Gemma-2: RMSNorm around both blocks with (1 + weight), embeddings times sqrt(width), tanh
GELU, scores scaled by query_pre_attn_scalar^-1/2 and soft-capped, logits soft-capped, a sliding
window in every other layer (from the first)."""

import math

from .base import Layout, every, query_scale

GEMMA_NORMS = {"post_attention_layernorm": "post_self_attn_layernorm",  # after attention: ours is GLM's name
               "pre_feedforward_layernorm": "post_attention_layernorm",  # before the MLP: Llama's name
               "post_feedforward_layernorm": "post_mlp_layernorm"}


def gemma(config: dict) -> dict:
    return {"norm_layout": "sandwich", "norm_offset": True, "embedding_scale": math.sqrt(config["hidden_size"]),
            "attention_scale": query_scale(config), "attn_softcap": config.get("attn_logit_softcapping"),
            "final_softcap": config.get("final_logit_softcapping")}


def traits(config: dict) -> dict:
    types = config.get("layer_types") or every(2, config["num_hidden_layers"], "sliding_attention", "full_attention")
    return {**gemma(config), "layer_types": types if config.get("sliding_window") else None}


LAYOUT = Layout("Gemma2ForCausalLM", "gemma2", traits, renames=GEMMA_NORMS)
