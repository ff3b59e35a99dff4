"""Import a Hugging Face model as a checkpoint of this project: a folder of any family in
``hf/layouts/`` (Llama, Qwen, Mistral, Gemma, Phi, OLMo, SmolLM, GLM, Granite: ``hf/importer.py``;
sharded, bf16), or GPT-2 weights (one ``model.safetensors``: ``hf/gpt2.py``).

    python convert_weights.py gpt2-tiny/model.safetensors --out weights/gpt2-tiny.ckpt
    python generate.py --checkpoint weights/gpt2-tiny.ckpt --prompt "def "
    python convert_weights.py TinyLlama-1.1B/ --out weights/tinyllama.ckpt --verify

``--verify`` (needs PyTorch and transformers) runs the model in transformers and the converted
network on the same random tokens and fails, writing nothing, if their logits differ. An existing
``--out`` is refused unless ``--force``. ``export.py --format peft`` records the base model as the
folder's name, or as ``--hub-id`` (e.g. ``Qwen/Qwen2.5-0.5B-Instruct``): what PEFT loads the
adapters onto, never this machine's path.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn

from ...engine.errors import CheckpointError, UserError
from ...run.cli import DEFAULT_CONFIG, guarded


def convert(src: str, out: str, *, n_head: int | None = None, config: str = DEFAULT_CONFIG,
            verify: bool = False, tokenizer: str | None = None, block_size: int | None = None,
            force: bool = False, hub_id: str | None = None) -> dict:
    """Read ``src``, check it, optionally verify it against transformers, write ``out``; return a summary."""
    from .hf import importer

    if not out.endswith(".ckpt"):
        raise UserError(f"--out {out}: name the checkpoint *.ckpt")
    if Path(out).exists() and not force:
        raise UserError(f"--out {out} exists: choose another path, or pass --force to replace it")
    if importer.is_llama(src):
        return importer.convert(src, out, config=config, verify_logits=verify, tokenizer=tokenizer,
                                block_size=block_size, base_name=hub_id)
    return convert_gpt2(src, out, n_head=n_head, config=config, verify=verify, tokenizer=tokenizer)


def convert_gpt2(src: str, out: str, *, n_head: int | None, config: str, verify: bool, tokenizer: str | None) -> dict:
    """GPT-2 weights: one ``model.safetensors`` file, read by ``hf/gpt2.py``'s table."""
    from ...deploy import weights
    from ...engine import runtime
    from ...engine.task import Comm
    from ...tasks import load_config
    from .hf.gpt2 import ignored, import_tokenizer, sizes, source_name, strip_prefix, transform
    from .hf.gpt2 import verify_against_transformers as verify_gpt2
    from .task import build_model

    runtime.setup(load_config(config))
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
        summary["max_abs_logit_diff"] = verify_gpt2(network, tensors, cfg.model)
    weights.save_imported(out, network, cfg, meta, {"file": Path(src).name, "sha256": weights.sha256(src)})
    return summary


def main() -> NoReturn:
    p = argparse.ArgumentParser(description="Import a Hugging Face model folder (Llama, Qwen, Mistral, Gemma, Phi, "
                                            "OLMo, SmolLM, GLM, Granite) or GPT-2 weights as a checkpoint.")
    p.add_argument("src", help="a model folder (config.json, model.safetensors or its shards, tokenizer.json), "
                               "or a GPT-2 model.safetensors")
    p.add_argument("--out", required=True, help="the checkpoint to write (*.ckpt)")
    p.add_argument("--n-head", type=int, help="attention heads (default: config.json beside SRC, else width / 64)")
    p.add_argument("--tokenizer", help="the model's tokenizer.json (default: the one beside SRC; "
                                       "none needed for a byte-level vocabulary of 256)")
    p.add_argument("--config", default=DEFAULT_CONFIG, help="the config to record (default: %(default)s)")
    p.add_argument("--block-size", type=int, help="llama: context length (default: the model's, at most 2048)")
    p.add_argument("--verify", action="store_true", help="compare logits with transformers' (needs torch)")
    p.add_argument("--force", action="store_true", help="replace an existing --out")
    p.add_argument("--hub-id", help="the base model's hub id, recorded for export.py --format peft "
                                    "(default: the folder's name)")
    args = p.parse_args()

    def run():
        s = convert(args.src, args.out, n_head=args.n_head, config=args.config, verify=args.verify,
                    tokenizer=args.tokenizer, block_size=args.block_size, force=args.force, hub_id=args.hub_id)
        diff = f", max |logit diff| vs transformers {s['max_abs_logit_diff']:.2e}" if args.verify else ""
        print(f"{args.src}: {s['arch']}, {s['n_layer']} layers x {s['d_model']} -> {s['out']}{diff}")

    guarded(run)
