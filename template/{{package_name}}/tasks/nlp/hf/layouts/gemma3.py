"""Gemma-3 (text): Gemma-2's layout with per-head q/k norms (1 + weight), no soft-capping by
default, five sliding layers to one global, and two RoPEs: the sliding layers' own base
(rope_local_base_freq), unscaled; the global layers' rope_theta with its scaling."""

from .base import Layout, every, refuse, rope_parameters, rope_scaling, rotary_fraction
from .gemma2 import GEMMA_NORMS, gemma


def traits(config: dict) -> dict:
    n = config["num_hidden_layers"]
    types = config.get("layer_types") or every(config.get("sliding_window_pattern", 6), n, "sliding_attention",
                                               "full_attention")
    ropes = config.get("rope_parameters") or {}
    if "full_attention" in ropes:  # transformers 5: one rope_parameters per layer type
        full, local = ropes["full_attention"], ropes.get("sliding_attention", {})
    else:  # earlier files: rope_theta (+ rope_scaling) global, rope_local_base_freq local
        full, local = rope_parameters(config), {"rope_theta": config.get("rope_local_base_freq", 10000.0)}
    if (local.get("rope_type") or "default") != "default":
        refuse("Gemma-3's sliding layers with a scaled RoPE are not computed by model.arch=llama")
    return {**gemma(config), "qk_norm": "head", "layer_types": types if config.get("sliding_window") else None,
            "rope_theta": float(full.get("rope_theta", 1e6)), "rope_scaling": rope_scaling(full, config),
            "local_rope_theta": float(local.get("rope_theta", 10000.0)),
            "rotary_fraction": rotary_fraction(full, config)}


LAYOUT = Layout("Gemma3ForCausalLM", "gemma3_text", traits, renames=GEMMA_NORMS)
