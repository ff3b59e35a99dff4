"""What every layout shares: the ``Layout`` record, the config.json keys the Llama family has in
common, and the tensor table applied in both directions (import: theirs -> ours; export: ours ->
theirs, LoRA adapters included)."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterator

import numpy as np

from .....engine.errors import CheckpointError

MAX_BLOCK = 2048  # default context when config.json allows more (the mask is block_size^2)
LAYER = re.compile(r"(model\.layers\.\d+\.)(.+)\.(weight|bias)")


@dataclasses.dataclass(frozen=True)
class Layout:
    """A Hugging Face family over the one decoder (``models/decoder.py``).

    ``traits``: config.json -> model.* values beyond the common ones (refusing what the decoder
    does not compute); ``renames``: their module names -> ours within a layer; ``fused``: one
    module of theirs holding several of ours (rows stacked in order); ``interleaved``: RoPE turns
    pairs (2i, 2i + 1) of each head, not (i, i + D/2): q/k rows are permuted to our order."""

    architecture: str
    model_type: str
    traits: Callable[[dict], dict] = lambda config: {}
    renames: dict[str, str] = dataclasses.field(default_factory=dict)
    fused: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    interleaved: bool = False

    def settings(self, config: dict, block_size: int | None) -> dict:
        """model.* values for the model in config.json: the common keys, then the family's."""
        return {**common_settings(config, block_size), **self.traits(config)}

    def to_ours(self, name: str, value: np.ndarray, shapes: dict[str, tuple]) -> Iterator[tuple[str, np.ndarray]]:
        """One tensor of theirs as the tensor(s) of ours (``shapes``: our parameters')."""
        match = LAYER.fullmatch(name)
        if match is None:
            yield name, value
            return
        prefix, module, kind = match.groups()
        module = self.renames.get(module, module)
        parts = self.fused.get(module, (module,))
        rows = [shapes.get(f"{prefix}{part}.{kind}", (0,))[0] for part in parts]
        if len(parts) > 1 and sum(rows) != value.shape[0]:
            raise CheckpointError(f"tensor {name!r} has {value.shape[0]} rows; the model in config.json needs "
                                  f"{sum(rows)} ({' + '.join(map(str, rows))})")
        for part, piece in zip(parts, np.split(value, np.cumsum(rows)[:-1]) if len(parts) > 1 else [value]):
            yield f"{prefix}{part}.{kind}", self.rotary_rows(part, piece, shapes, forward=True)

    @property
    def fused_in(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Each of our modules that is part of a fused one of theirs -> (that module, its parts)."""
        return {part: (module, parts) for module, parts in self.fused.items() for part in parts}

    def to_theirs(self, tensors: dict[str, np.ndarray], shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
        """Our tensors under their names, fused modules stacked again."""
        theirs, back, fused_in = {}, {ours: name for name, ours in self.renames.items()}, self.fused_in
        for name, value in tensors.items():
            match = LAYER.fullmatch(name)
            if match is None:
                theirs[name] = value
                continue
            prefix, module, kind = match.groups()
            fused, parts = fused_in.get(module, (back.get(module, module), (module,)))
            if module == parts[0]:  # a fused module once, with its first part
                pieces = [self.rotary_rows(part, tensors[f"{prefix}{part}.{kind}"], shapes, forward=False)
                          for part in parts]
                theirs[f"{prefix}{fused}.{kind}"] = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
        return theirs

    def rotary_rows(self, module: str, value: np.ndarray, shapes: dict[str, tuple], forward: bool) -> np.ndarray:
        """GLM's interleaved pairs as our halves (``forward``) or back: within each head of q_proj
        and k_proj, rows 0, 2, 4... of the turned dims first, then 1, 3, 5..."""
        if not self.interleaved or not module.endswith(("q_proj", "k_proj")):
            return value
        head, rotary = shapes["head_dim"], shapes["rotary_dim"]
        order = np.concatenate([np.arange(0, rotary, 2), np.arange(1, rotary, 2), np.arange(rotary, head)])
        order = order if forward else np.argsort(order)
        heads = value.reshape(-1, head, *value.shape[1:])
        return heads[:, order].reshape(value.shape)

    def peft_adapters(self, adapters: dict[str, np.ndarray], shapes: dict[str, tuple], alpha: float,
                      rank: int) -> tuple[dict[str, np.ndarray], dict]:
        """Our LoRA A/B (``...q_proj.lora_A``) as PEFT's tensors over their modules, and the
        adapter_config.json entries that differ per module. A fused module gets one adapter of rank
        r x (parts adapted): A the parts' A stacked, B block-diagonal (zero rows for a part not
        adapted), alpha scaled alike, so that B A alpha / rank is ours, part for part."""
        tensors, ranks, joined = {}, {}, self.fused_in
        for name in adapters:
            prefix, module, kind = re.fullmatch(r"(model\.layers\.\d+\.)(.+)\.(lora_[AB])", name).groups() \
                if name.startswith("model.layers.") else ("", name.rsplit(".", 1)[0], name.rsplit(".", 1)[1])
            value = adapters[name]
            if kind == "lora_B":
                value = self.rotary_rows(module, value, shapes, forward=False)
            if module not in joined:
                tensors[f"{prefix}{module}.{kind}"] = value
                continue
            fused, parts = joined[module]
            adapted = [part for part in parts if f"{prefix}{part}.lora_A" in adapters]
            if module != adapted[0]:
                continue
            a = np.concatenate([adapters[f"{prefix}{part}.lora_A"] for part in adapted])
            b = np.zeros((sum(shapes[f"{prefix}{part}.weight"][0] for part in parts), rank * len(adapted)), a.dtype)
            row = 0
            for part in parts:
                rows = shapes[f"{prefix}{part}.weight"][0]
                if part in adapted:
                    column = adapted.index(part) * rank
                    b[row:row + rows, column:column + rank] = self.rotary_rows(
                        part, adapters[f"{prefix}{part}.lora_B"], shapes, forward=False)
                row += rows
            tensors[f"{prefix}{fused}.lora_A"], tensors[f"{prefix}{fused}.lora_B"] = a, b
            ranks[fused.rsplit(".", 1)[-1]] = len(adapted)
        targets = {name.rsplit(".", 2)[-2] for name in tensors}
        return tensors, {"target_modules": sorted(targets),
                         "rank_pattern": {module: rank * n for module, n in ranks.items() if n != 1},
                         "alpha_pattern": {module: alpha * n for module, n in ranks.items() if n != 1}}


def shapes_of(network, m) -> dict[str, tuple]:
    """Our parameters' shapes, and the head and rotary widths: the ``shapes`` a table reads."""
    from ...models.decoder import head_width, rotary_width

    return {**{name: tuple(p.shape) for name, p in network.parameters_and_names()},
            "head_dim": head_width(m), "rotary_dim": rotary_width(m)}


def refuse(reason: str):
    raise CheckpointError(f"config.json: {reason}")


def rope_parameters(config: dict) -> dict:
    """transformers 5's rope_parameters, or the rope_scaling and rope_theta of earlier files."""
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    return {"rope_theta": config.get("rope_theta", 10000.0), **rope}


ROPE_TYPES = ("default", "linear", "llama3", "yarn", "dynamic", "longrope")


def rope_scaling(rope: dict, config: dict) -> dict | None:
    """A rope_parameters dict as model.rope_scaling (None: plain RoPE)."""
    from ...config import RopeScaling

    kind = rope.get("rope_type") or rope.get("type") or "default"  # "type": the spelling before transformers 4.45
    if kind not in ROPE_TYPES:
        refuse(f"rope_type {kind!r} is not computed by model.arch=llama (it computes {', '.join(ROPE_TYPES)})")
    if kind == "default":
        return None
    context = config.get("max_position_embeddings", MAX_BLOCK)
    original = (rope.get("original_max_position_embeddings") or config.get("original_max_position_embeddings")
                or context)
    values = {**rope, "original_max_position_embeddings": original}
    values.setdefault("factor", context / original)  # yarn and longrope without one: as transformers
    return {"type": kind, **{key: values[key] for key in RopeScaling.KEYS[kind] if values.get(key) is not None}}


def common_settings(config: dict, block_size: int | None) -> dict:
    """The model.* values every family reads alike (sizes, RoPE, norms, biases, window)."""
    heads, width = config["num_attention_heads"], config["hidden_size"]
    block = block_size or min(config.get("max_position_embeddings", MAX_BLOCK), MAX_BLOCK)
    act = config.get("hidden_act") or config.get("hidden_activation") or "silu"
    if act not in ACTIVATIONS:
        refuse(f"hidden_act {act!r} is not computed by model.arch=llama (it computes {', '.join(ACTIVATIONS)})")
    rope = rope_parameters(config)
    head_dim = config.get("head_dim") or width // heads
    window = config.get("sliding_window") if config.get("use_sliding_window", True) else None
    if config.get("use_bidirectional_attention"):
        refuse("use_bidirectional_attention (an encoder) is not a causal language model")
    return {"block_size": block, "n_layer": config["num_hidden_layers"], "d_model": width, "n_head": heads,
            "n_kv_head": config.get("num_key_value_heads") or heads, "d_ff": config["intermediate_size"],
            "head_dim": head_dim if head_dim != width // heads else None,
            "rope_theta": float(rope["rope_theta"]), "rope_scaling": rope_scaling(rope, config),
            "rotary_fraction": rotary_fraction(rope, config), "norm_eps": float(config.get("rms_norm_eps", 1e-6)),
            "activation": ACTIVATIONS[act], "bias": bool(config.get("attention_bias")),
            "o_bias": bool(config.get("attention_bias")), "mlp_bias": bool(config.get("mlp_bias")),
            "tie_embeddings": bool(config.get("tie_word_embeddings", False)),
            "sliding_window": window, "layer_types": config.get("layer_types") if window else None}


def rotary_fraction(rope: dict, config: dict, default: float = 1.0) -> float:
    """partial_rotary_factor: in rope_parameters (transformers 5) or at the top (earlier files)."""
    return float(rope.get("partial_rotary_factor", config.get("partial_rotary_factor", default)))


ACTIVATIONS = {"silu": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh"}


def every(period: int, n_layer: int, hit: str, miss: str) -> list[str]:
    """``hit`` for layer i when (i + 1) % period is not 0, else ``miss`` (Gemma's local/global)."""
    return [hit if (i + 1) % period else miss for i in range(n_layer)]


def query_scale(config: dict) -> float | None:
    scalar = config.get("query_pre_attn_scalar")
    return None if scalar is None else 1.0 / math.sqrt(scalar)
