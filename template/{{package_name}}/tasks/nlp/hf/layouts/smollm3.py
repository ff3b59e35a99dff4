"""SmolLM3: Llama's layout without RoPE in every fourth layer (``no_rope_layers``: 1 turns,
0 does not)."""

from .base import Layout


def traits(config: dict) -> dict:
    n, interval = config["num_hidden_layers"], config.get("no_rope_layer_interval", 4)
    turns = config.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n)]
    return {"nope_layers": [i for i, rope in enumerate(turns) if not rope]}


LAYOUT = Layout("SmolLM3ForCausalLM", "smollm3", traits)
