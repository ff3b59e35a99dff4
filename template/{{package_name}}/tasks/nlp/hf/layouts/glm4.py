"""GLM-4 (0414): RMSNorm around both blocks (our names are GLM's), gate and up in one
``gate_up_proj``, biases on q/k/v only, RoPE on half of each head (partial_rotary_factor 0.5)
turning interleaved pairs (q/k rows reordered on import, back on export)."""

from .base import Layout, rotary_fraction


def traits(config: dict) -> dict:
    return {"norm_layout": "sandwich", "bias": bool(config.get("attention_bias", True)), "o_bias": False,
            "rotary_fraction": rotary_fraction(config.get("rope_parameters") or {}, config, default=0.5)}


LAYOUT = Layout("Glm4ForCausalLM", "glm4", traits, fused={"mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj")},
                interleaved=True)
