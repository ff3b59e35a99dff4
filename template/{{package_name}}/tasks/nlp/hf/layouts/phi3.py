"""Phi-3 / Phi-4-mini: q, k and v in one ``qkv_proj``, gate and up in one ``gate_up_proj`` (split
on import, stacked again on export; LoRA on them as PEFT's block adapters), RoPE on
partial_rotary_factor of each head (Phi-4-mini 0.75), longrope scaling."""

from .base import Layout

LAYOUT = Layout("Phi3ForCausalLM", "phi3", fused={
    "self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj")})
