"""Import Hugging Face GPT-2 weights (``model.safetensors``), or a Llama / Qwen2 model folder
(``import_llama.py``: sharded, bf16), as a checkpoint of this project.

    python convert_weights.py gpt2-tiny/model.safetensors --out weights/gpt2-tiny.ckpt
    python generate.py --checkpoint weights/gpt2-tiny.ckpt --prompt "def "
    python convert_weights.py TinyLlama-1.1B/ --out weights/tinyllama.ckpt --verify

The sizes are read off the file (layers, width, context length, MLP width); the number of
heads, which no tensor shows, comes from ``--n-head``, else the ``config.json`` beside the
file, else width / 64 (every published GPT-2). The names map by the table below, and
Hugging Face's ``Conv1D`` layers store their weights (in, out) where ``nn.Dense`` stores
(out, in), so those are transposed. A byte-level vocabulary (256 ids) needs nothing more; any
other (GPT-2's own 50,257-token BPE) needs the model's ``tokenizer.json``: ``--tokenizer``, else
the one beside the file. It must have as many tokens as the embedding has rows, and it travels
in the checkpoint like a tokenizer trained here (``data.tokenizer: bpe``).

``--verify`` (needs PyTorch and transformers) runs the file in ``transformers``'
``GPT2LMHeadModel`` and the converted network on the same random tokens and fails if their
logits differ.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import NoReturn

import numpy as np

from ...engine.errors import CheckpointError, UserError
from ...run.cli import DEFAULT_CONFIG, guarded
from .gpt2_layout import source_name, transform

TOLERANCE = 1e-4  # --verify: max |logit difference| relative to the largest reference logit


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
    from .tokenizer import Tokenizer

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


def convert(src: str, out: str, *, n_head: int | None = None, config: str = DEFAULT_CONFIG,
            verify: bool = False, tokenizer: str | None = None, block_size: int | None = None) -> dict:
    """Read ``src``, check it, optionally verify it against transformers, write ``out``; return a summary."""
    from ...engine import runtime
    from ...tasks import load_config
    from . import import_llama

    if not out.endswith(".ckpt"):
        raise UserError(f"--out {out}: name the checkpoint *.ckpt")
    if import_llama.is_llama(src):
        return import_llama.convert(src, out, config=config, verify_logits=verify, tokenizer=tokenizer,
                                    block_size=block_size)
    runtime.setup(load_config(config))
    from ...deploy import weights
    from ...engine.task import Comm
    from .task import build_model

    try:
        tensors = strip_prefix(weights.read_safetensors(src))
        overrides = sizes(tensors, src, n_head)
        vocab = import_tokenizer(src, tensors["wte.weight"].shape[0], tokenizer)
        cfg = load_config(config, [*overrides, f"data.tokenizer={'byte' if vocab.kind == 'byte' else 'bpe'}"])
        meta = {"tokenizer": vocab.to_meta(), "source": Path(src).name,
                "unigram_counts": [0] * vocab.vocab_size}  # unknown: generate.py starts uniform
        network = build_model(cfg, meta, Comm()).network
        weights.load(network, weights.map_weights(network, tensors, source_name, transform, ignored))
    except CheckpointError as exc:
        raise CheckpointError(f"{src}: {exc}") from None
    network.set_train(False)
    summary = {"arch": "gpt2", "n_layer": cfg.model.n_layer, "d_model": cfg.model.d_model, "out": out}
    if verify:
        summary["max_abs_logit_diff"] = verify_against_transformers(network, tensors, cfg.model)
    weights.save_imported(out, network, cfg, meta, {"file": Path(src).name, "sha256": weights.sha256(src)})
    return summary


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


def main() -> NoReturn:
    p = argparse.ArgumentParser(description="Import Hugging Face GPT-2 weights (.safetensors), or a Llama/Qwen2 "
                                            "model folder, as a checkpoint of this project.")
    p.add_argument("src", help="a Hugging Face GPT-2 model.safetensors, or a LlamaForCausalLM/Qwen2ForCausalLM "
                               "folder (config.json, model.safetensors or its shards, tokenizer.json)")
    p.add_argument("--out", required=True, help="the checkpoint to write (*.ckpt)")
    p.add_argument("--n-head", type=int, help="attention heads (default: config.json beside SRC, else width / 64)")
    p.add_argument("--tokenizer", help="the model's tokenizer.json (default: the one beside SRC; "
                                       "none needed for a byte-level vocabulary of 256)")
    p.add_argument("--config", default=DEFAULT_CONFIG, help="the config to record (default: %(default)s)")
    p.add_argument("--block-size", type=int, help="llama: context length (default: the model's, at most 2048)")
    p.add_argument("--verify", action="store_true", help="compare logits with transformers' (needs torch)")
    args = p.parse_args()

    def run():
        s = convert(args.src, args.out, n_head=args.n_head, config=args.config, verify=args.verify,
                    tokenizer=args.tokenizer, block_size=args.block_size)
        diff = f", max |logit diff| vs transformers {s['max_abs_logit_diff']:.2e}" if args.verify else ""
        print(f"{args.src}: {s['arch']}, {s['n_layer']} layers x {s['d_model']} -> {s['out']}{diff}")

    guarded(run)
