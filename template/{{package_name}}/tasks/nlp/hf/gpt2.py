"""GPT-2 and Hugging Face: ``GPT2LMHeadModel``'s names and layouts against our GPT's, read in by
``convert_weights.py`` (one ``model.safetensors``) and written back by ``export.py --format hf``.

The sizes are read off the file (layers, width, context length, MLP width); the number of
heads, which no tensor shows, comes from ``--n-head``, else the ``config.json`` beside the
file, else width / 64 (every published GPT-2). Hugging Face's ``Conv1D`` layers store their
weights (in, out) where ``nn.Dense`` stores (out, in), so those are transposed. A byte-level
vocabulary (256 ids) needs nothing more; any other (GPT-2's own 50,257-token BPE) needs the
model's ``tokenizer.json``: ``--tokenizer``, else the one beside the file. It must have as many
tokens as the embedding has rows, and it travels in the checkpoint like a tokenizer trained
here (``data.tokenizer: bpe``). ``--verify`` runs the file in transformers' ``GPT2LMHeadModel``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ....engine.errors import CheckpointError, UserError

TOLERANCE = 1e-4  # --verify: max |logit difference| relative to the largest reference logit

# Ours (relative to the network) -> Hugging Face GPT-2 (``transformer.`` prefix optional in the file).
RENAMES = [
    (r"token_embedding\.embedding_table", "wte.weight"),
    (r"position_embedding", "wpe.weight"),
    (r"blocks\.(\d+)\.ln([12])\.gamma", r"h.\1.ln_\2.weight"),
    (r"blocks\.(\d+)\.ln([12])\.beta", r"h.\1.ln_\2.bias"),
    (r"blocks\.(\d+)\.attn\.qkv\.(weight|bias)", r"h.\1.attn.c_attn.\2"),
    (r"blocks\.(\d+)\.attn\.proj\.(weight|bias)", r"h.\1.attn.c_proj.\2"),
    (r"blocks\.(\d+)\.mlp\.fc\.(weight|bias)", r"h.\1.mlp.c_fc.\2"),
    (r"blocks\.(\d+)\.mlp\.proj\.(weight|bias)", r"h.\1.mlp.c_proj.\2"),
    (r"ln_f\.gamma", "ln_f.weight"),
    (r"ln_f\.beta", "ln_f.bias"),
]
CONV1D = re.compile(r"blocks\.\d+\.(attn|mlp)\.\w+\.weight")  # stored (in, out) by Hugging Face


def source_name(ours: str) -> str:
    for pattern, theirs in RENAMES:
        if re.fullmatch(pattern, ours):
            return re.sub(pattern, theirs, ours)
    return ours  # no counterpart: reported as a missing tensor


def transform(ours: str, value: np.ndarray) -> np.ndarray:
    return value.T if CONV1D.fullmatch(ours) else value


def ignored(name: str) -> bool:
    # The causal-mask buffers older files carry, and the head when it is the tied embedding.
    return name.endswith((".attn.bias", ".attn.masked_bias")) or name == "lm_head.weight"


def strip_prefix(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``GPT2LMHeadModel`` files say ``transformer.h.0...``, ``GPT2Model`` ones ``h.0...``."""
    stripped = {name.removeprefix("transformer."): value for name, value in tensors.items()}
    head = stripped.get("lm_head.weight")
    if head is not None and "wte.weight" in stripped and not np.array_equal(head, stripped["wte.weight"]):
        raise CheckpointError("tensor 'lm_head.weight' differs from 'wte.weight': an untied head is not GPT-2's")
    return stripped


def sizes(tensors: dict[str, np.ndarray], src: str, n_head: int | None) -> list[str]:
    """Config overrides for the model in the file (``model.arch=gpt2``, its sizes)."""
    for name in ("wte.weight", "wpe.weight", "h.0.mlp.c_fc.weight"):
        if name not in tensors:
            raise CheckpointError(f"missing tensor {name!r}: not a Hugging Face GPT-2 "
                                  f"(its first tensor is {next(iter(tensors))!r})")
    d_model = tensors["wte.weight"].shape[1]
    config = Path(src).with_name("config.json")
    if n_head is None and config.is_file():
        n_head = json.loads(config.read_text(encoding="utf-8")).get("n_head")
    n_layer = len({name.split(".")[1] for name in tensors if name.startswith("h.")})
    return ["model.arch=gpt2", "model.bias=true", "model.tie_embeddings=true", "model.dropout=0.0",
            f"model.n_layer={n_layer}", f"model.d_model={d_model}", f"model.n_head={n_head or d_model // 64}",
            f"model.block_size={tensors['wpe.weight'].shape[0]}",
            f"model.mlp_ratio={tensors['h.0.mlp.c_fc.weight'].shape[1] // d_model}"]


def import_tokenizer(src: str, vocab: int, path: str | None):
    """The tokenizer of a model whose embedding has ``vocab`` rows: byte-level for 256 rows,
    else its ``tokenizer.json`` (``path``, or the one beside ``src``) of exactly ``vocab`` tokens."""
    from ..data.tokenizer import Tokenizer

    beside = Path(src).with_name("tokenizer.json")
    if path is None and vocab == 256:
        return Tokenizer("byte")
    if path is None and not beside.is_file():
        raise CheckpointError(f"a vocabulary of {vocab} tokens is not byte-level (256): give the model's "
                              "tokenizer.json with --tokenizer (or put it beside the file)")
    path = path or str(beside)
    tokenizer = Tokenizer.from_file(path, key="--tokenizer")
    if tokenizer.vocab_size != vocab:
        raise CheckpointError(f"--tokenizer {path}: a vocabulary of {tokenizer.vocab_size} tokens, but the "
                              f"model's embedding (wte.weight) has {vocab} rows")
    return tokenizer


def verify_against_transformers(network, tensors: dict[str, np.ndarray], m) -> float:
    """Max |logit difference| between ``network`` and ``GPT2LMHeadModel`` on random tokens."""
    try:
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        raise UserError("--verify needs PyTorch and transformers (pip install torch transformers); "
                        "nothing was written") from None
    from mindspore import Tensor

    vocab = tensors["wte.weight"].shape[0]
    config = GPT2Config(vocab_size=vocab, n_positions=m.block_size, n_embd=m.d_model, n_layer=m.n_layer,
                        n_head=m.n_head, n_inner=m.mlp_ratio * m.d_model, bos_token_id=0, eos_token_id=0)
    reference = GPT2LMHeadModel(config).eval()
    state = {name: torch.from_numpy(np.ascontiguousarray(v)) for name, v in tensors.items() if not ignored(name)}
    missing, unexpected = reference.transformer.load_state_dict(state, strict=False)
    if [n for n in missing if not ignored(n)] or unexpected:
        raise CheckpointError(f"--verify: transformers' GPT-2 does not take this file "
                              f"({missing[:1]}, {unexpected[:1]})")
    tokens = np.random.default_rng(0).integers(0, vocab, (2, m.block_size)).astype(np.int32)
    with torch.no_grad():
        expected = reference(torch.from_numpy(tokens).long()).logits.numpy()
    diff = float(np.abs(network(Tensor(tokens)).asnumpy() - expected).max())
    if diff > TOLERANCE * float(np.abs(expected).max()):
        raise CheckpointError(f"--verify: logits differ from transformers' by up to {diff:.3g}; nothing was written")
    return diff


def export_tensors(network) -> dict[str, np.ndarray]:
    """Our GPT's weights under ``GPT2LMHeadModel``'s names (convert_weights' renames, reversed):
    Conv1D weights stored (in, out), zero biases where ``model.bias`` is off (GPT-2 always has them)."""
    tensors, params = {}, dict(network.parameters_and_names())
    for name, p in params.items():
        value = p.asnumpy()
        if name == "head.weight":  # an untied head
            tensors["lm_head.weight"] = value
            continue
        tensors[f"transformer.{source_name(name)}"] = transform(name, value)
        bias = name.removesuffix("weight") + "bias"
        if name.startswith("blocks.") and name.endswith(".weight") and bias not in params:
            tensors[f"transformer.{source_name(bias)}"] = np.zeros(value.shape[0], value.dtype)
    return tensors


def export_config(trained, tensors: dict[str, np.ndarray], torch_dtype: str) -> dict:
    """``GPT2Config`` of our sizes: GPT-2's tanh GELU, LayerNorm epsilon and attention scaling are ours."""
    from ....models.transformer import LN_EPS
    from ..data import Tokenizer

    m, eos = trained.cfg.model, Tokenizer.from_meta(trained.meta).eos_id
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "vocab_size": tensors["transformer.wte.weight"].shape[0], "n_positions": m.block_size,
            "n_embd": m.d_model, "n_layer": m.n_layer, "n_head": m.n_head, "n_inner": m.mlp_ratio * m.d_model,
            "activation_function": "gelu_new", "layer_norm_epsilon": LN_EPS,
            "tie_word_embeddings": m.tie_embeddings, "bos_token_id": eos, "eos_token_id": eos,
            "torch_dtype": torch_dtype, "dtype": torch_dtype}
