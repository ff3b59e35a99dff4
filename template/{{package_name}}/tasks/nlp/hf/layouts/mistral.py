"""Mistral: Llama's layout, its sliding window in every layer (v0.1: 4,096; v0.2+: none)."""

from .base import Layout

LAYOUT = Layout("MistralForCausalLM", "mistral")
