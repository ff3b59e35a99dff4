"""Qwen2 / Qwen2.5: biases on q, k and v (never o or the MLP); a window only with
use_sliding_window, from layer max_window_layers on."""

from .base import Layout


def traits(config: dict) -> dict:
    window = config.get("sliding_window") if config.get("use_sliding_window") else None
    first = config.get("max_window_layers", config["num_hidden_layers"])
    types = config.get("layer_types") or ["sliding_attention" if i >= first else "full_attention"
                                          for i in range(config["num_hidden_layers"])]
    return {"bias": True, "o_bias": False, "mlp_bias": False, "sliding_window": window,
            "layer_types": types if window else None}


LAYOUT = Layout("Qwen2ForCausalLM", "qwen2", traits)
