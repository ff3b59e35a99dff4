"""The Hugging Face families ``convert_weights.py`` imports and ``export.py --format hf|peft``
writes back, each one file: the config.json keys that set the decoder's traits (``models/decoder.py``),
the tensor names and what the family refuses. A new family is a file here and a row below."""

from __future__ import annotations

from .....engine.errors import CheckpointError
from . import gemma2, gemma3, glm4, granite, llama, mistral, olmo2, phi3, qwen2, qwen3, smollm3
from .base import Layout, shapes_of

LAYOUTS: dict[str, Layout] = {family.LAYOUT.architecture: family.LAYOUT for family in (
    llama, qwen2, qwen3, mistral, gemma2, gemma3, phi3, olmo2, smollm3, glm4, granite)}
MIXTURES = ("MixtralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM",
            "OlmoeForCausalLM", "PhimoeForCausalLM", "GraniteMoeForCausalLM")  # refused, said so


def layout_of(config: dict) -> Layout:
    """The layout of config.json's architecture; one line for anything else."""
    arch = (config.get("architectures") or ["(none)"])[0]
    if arch in MIXTURES:
        raise CheckpointError(f"config.json: {arch} is a mixture of experts, which model.arch=llama does not "
                              f"compute (dense families: {', '.join(LAYOUTS)})")
    if arch not in LAYOUTS:
        raise CheckpointError(f"config.json: architecture {arch} is not one of {', '.join(LAYOUTS)}")
    layout = LAYOUTS[arch]
    if config.get("model_type", layout.model_type) != layout.model_type:
        raise CheckpointError(f"config.json: model_type {config.get('model_type')!r} is not {arch}'s "
                              f"({layout.model_type!r}); not imported")
    return layout


__all__ = ["LAYOUTS", "Layout", "layout_of", "shapes_of"]
