"""Llama 2/3.x, TinyLlama, SmolLM2: the decoder's own names; ``attention_bias`` puts biases on
q, k, v and o, ``mlp_bias`` on the MLP."""

from .base import Layout

LAYOUT = Layout("LlamaForCausalLM", "llama")
