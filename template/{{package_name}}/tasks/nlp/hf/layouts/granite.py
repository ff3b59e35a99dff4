"""Granite-3: Llama's layout with four multipliers: embeddings (embedding_multiplier), each
block's output (residual_multiplier), the scores (attention_multiplier, in place of
1 / sqrt(head width)) and the logits (divided by logits_scaling)."""

from .base import Layout


def traits(config: dict) -> dict:
    return {"embedding_scale": float(config.get("embedding_multiplier", 1.0)),
            "residual_scale": float(config.get("residual_multiplier", 1.0)),
            "attention_scale": float(config.get("attention_multiplier", 1.0)),
            "logits_scaling": float(config.get("logits_scaling", 1.0))}


LAYOUT = Layout("GraniteForCausalLM", "granite", traits)
