"""Qwen3: each query and key head RMS-normalised before RoPE (``q_norm`` / ``k_norm``), an
explicit head_dim; biases as Llama's (attention_bias); a window as Qwen2's."""

from .base import Layout
from .qwen2 import traits as qwen2_traits


def traits(config: dict) -> dict:
    bias = bool(config.get("attention_bias"))
    return {**qwen2_traits(config), "qk_norm": "head", "bias": bias, "o_bias": bias}


LAYOUT = Layout("Qwen3ForCausalLM", "qwen3", traits)
