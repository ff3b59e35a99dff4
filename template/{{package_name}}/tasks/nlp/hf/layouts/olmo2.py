"""OLMo-2: RMSNorm after each block, not before (``post_attention_layernorm``,
``post_feedforward_layernorm``), queries and keys RMS-normalised across all heads."""

from .base import Layout

LAYOUT = Layout("Olmo2ForCausalLM", "olmo2", lambda config: {"norm_layout": "post", "qk_norm": "all"},
                renames={"post_attention_layernorm": "post_self_attn_layernorm",
                         "post_feedforward_layernorm": "post_mlp_layernorm"})
