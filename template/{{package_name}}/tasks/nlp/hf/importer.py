"""Import a Hugging Face folder of any family in ``layouts/`` (Llama, Qwen2/2.5/3, Mistral, Gemma-2/3,
Phi-3/4-mini, OLMo-2, SmolLM3, GLM-4, Granite-3: what ``save_pretrained`` writes, ``config.json``,
``model.safetensors`` or shards with ``model.safetensors.index.json``, ``tokenizer.json``) as a
``model.arch: llama`` checkpoint.

    python convert_weights.py Qwen2.5-0.5B/ --out weights/qwen.ckpt --verify
    python generate.py --checkpoint weights/qwen.ckpt --prompt "def fib(n):"

The sizes and the family's traits come from ``config.json`` through its layout; the network is
built first and filled shard by shard, tensor by tensor (``shards.py``), each tensor renamed,
split or reordered by the layout's table. The tokenizer (``tokenizer.json``; the embedding may
have more rows than it has tokens, as Qwen2.5's: ``model.embedding_rows``) travels in the
checkpoint, with the chat template and the special tokens of ``tokenizer_config.json``
(``meta['chat_template']``, ``meta['special_tokens']``) and the sampling defaults and end-of-text
ids of ``generation_config.json`` (``meta['generation']``). Anything else (another architecture, a
mixture of experts, a RoPE type the decoder does not compute, a missing shard, a tensor missing,
unexpected or of the wrong shape) is one line, and nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ....engine.errors import CheckpointError, UserError
from . import shards
from .layouts import LAYOUTS, MIXTURES, layout_of, shapes_of


def folder_of(src: str) -> Path:
    path = Path(src)
    return path if path.is_dir() else path.parent


def is_llama(src: str) -> bool:
    """Whether ``src`` is a model folder, its index, or a file whose config.json names a Llama-family model."""
    path = Path(src)
    if path.is_dir() or path.name == shards.INDEX:
        return True
    try:
        architectures = json.loads((path.parent / "config.json").read_text(encoding="utf-8")).get("architectures")
    except (OSError, ValueError, AttributeError):
        return False
    return bool(set(architectures or ()) & {*LAYOUTS, *MIXTURES})


def read_config(folder: Path) -> dict:
    path = folder / "config.json"
    if not path.is_file():
        raise CheckpointError(f"no config.json in {folder}: a Llama-family import needs it (heads, RoPE base...)")
    config = read_json(path)
    layout_of(config)
    for key in (*REQUIRED, *SIZES):  # each one line, never a traceback deep in the build
        if key in REQUIRED and key not in config:
            raise CheckpointError(f"config.json has no {key}")
        value = config.get(key)
        if key in config and not (type(value) is int and value > 0) and not (value is None and key in NULLABLE):
            raise CheckpointError(f"config.json: {key} is {json.dumps(value)}, not a positive whole number")
    # A folder's own code (auto_map: its modeling_*.py) is never run, here or by --verify.
    if config.get("auto_map"):
        raise CheckpointError("config.json has auto_map: the folder ships code of its own, which is never run; "
                              "not imported")
    return config


def overrides(config: dict, block_size: int | None, rows: int) -> list[str]:
    """Config overrides for the model in config.json (``rows``: its embedding's, when the
    tokenizer has fewer tokens), as its layout reads them."""
    values = layout_of(config).settings(config, block_size)
    block = values["block_size"]
    if values["rope_scaling"] and values["rope_scaling"]["type"] == "dynamic" and block > config.get(
            "max_position_embeddings", block):
        raise CheckpointError(f"dynamic RoPE past max_position_embeddings ({block} > "
                              f"{config['max_position_embeddings']}) is not computed by model.arch=llama")
    return ["model.arch=llama", "model.dropout=0.0", "model.lora.rank=0", f"model.embedding_rows={rows}",
            *(f"model.{key}={json.dumps(value)}" for key, value in values.items())]


def tokenizer_meta(folder: Path, rows: int, path: str | None) -> dict:
    """The checkpoint's tokenizer meta: tokenizer.json (at most ``rows`` tokens: the embedding's),
    chat template, special tokens, generation defaults."""
    from ..data.tokenizer import Tokenizer

    path = path or str(folder / "tokenizer.json")
    if not Path(path).is_file():
        raise CheckpointError(f"no tokenizer.json in {folder}: give the model's with --tokenizer")
    settings = read_json(folder / "tokenizer_config.json")
    special = {k: token_text(settings.get(k)) for k in ("bos_token", "eos_token", "pad_token")}
    special = {k: v for k, v in special.items() if v}
    tokenizer = Tokenizer.from_file(path, key="--tokenizer")
    tokenizer.eos = special.get("eos_token")
    if tokenizer.vocab_size > rows:
        raise CheckpointError(f"--tokenizer {path}: a vocabulary of {tokenizer.vocab_size} tokens, but the "
                              f"model's embedding (model.embed_tokens.weight) has only {rows} rows")
    template = folder / "chat_template.jinja"  # transformers 5 writes it beside tokenizer_config.json
    chat = template.read_text(encoding="utf-8") if template.is_file() else settings.get("chat_template")
    return {"tokenizer": tokenizer.to_meta(), "chat_template": chat, "special_tokens": special,
            "generation": generation_defaults(folder, tokenizer),
            "unigram_counts": [0] * tokenizer.vocab_size}  # unknown: generate.py starts uniform


# The sizes config.json must give, as positive whole numbers, and those it may (NULLABLE: null = derived).
REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
SIZES, NULLABLE = ("num_key_value_heads", "head_dim", "max_position_embeddings"), ("num_key_value_heads", "head_dim")


def read_json(path: Path) -> dict:
    """A JSON object file of the folder ({} when absent); anything else is one line naming it."""
    try:
        value = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except UnicodeDecodeError:
        raise CheckpointError(f"{path.name} is not UTF-8 text") from None
    except ValueError as exc:
        raise CheckpointError(f"{path.name} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path.name} is a JSON {type(value).__name__}, not an object")
    return value


def token_text(value) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or {"content": ...} (AddedToken)."""
    return value.get("content") if isinstance(value, dict) else value if isinstance(value, str) else None


def generation_defaults(folder: Path, tokenizer) -> dict:
    """generation_config.json's end-of-text ids (Llama-3 has several), sampling defaults and repetition
    penalty, and the file itself (``original``: export writes it back as it was, bos/pad too)."""
    config = read_json(folder / "generation_config.json")
    eos = config.get("eos_token_id")
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    if tokenizer.eos_id is not None and tokenizer.eos_id not in eos:
        eos.append(tokenizer.eos_id)
    sampling = {k: config[k] for k in ("temperature", "top_p", "top_k") if isinstance(config.get(k), (int, float))}
    penalty = config.get("repetition_penalty")  # applied by transformers in greedy decoding too
    return {"eos_token_ids": eos, **(sampling if config.get("do_sample") else {}),  # greedy files: our defaults
            **({"repetition_penalty": penalty} if isinstance(penalty, (int, float)) and penalty != 1 else {}),
            **({"original": config} if config else {})}


def fill(network, folder: Path, layout, m) -> None:
    """Copy every tensor of the checkpoint's files into ``network``, one tensor at a time, through ``layout``."""
    import mindspore as ms

    params, shapes = dict(network.parameters_and_names()), shapes_of(network, m)
    filled: set[str] = set()
    for file in shards.shard_files(folder):
        for theirs, value in shards.tensors(file):
            if theirs.endswith("rotary_emb.inv_freq") or (m.tie_embeddings and theirs == "lm_head.weight"):
                continue  # recomputed / the embedding itself
            for name, piece in layout.to_ours(theirs, value, shapes):
                param = params.get(name)
                if param is None:
                    raise CheckpointError(f"{file.name}: unexpected tensor {theirs!r} {tuple(value.shape)}")
                if tuple(piece.shape) != tuple(param.shape):
                    raise CheckpointError(f"{file.name}: tensor {theirs!r} has shape {tuple(piece.shape)}; "
                                          f"the model in config.json needs {tuple(param.shape)}")
                param.set_data(ms.Tensor(piece, param.dtype))
                filled.add(name)
    missing = next((name for name in params if name not in filled), None)
    if missing is not None:
        raise CheckpointError(f"missing tensor {missing!r}")


def convert(src: str, out: str, *, config: str, verify_logits: bool, tokenizer: str | None,
            block_size: int | None, base_name: str | None = None) -> dict:
    """The Llama-family branch of ``convert_weights.convert``. ``base_name``: what a PEFT export
    names as its base (a hub id), else the folder's name (a path of this machine means nothing
    on another)."""
    from ....deploy import weights
    from ....engine import runtime
    from ....engine.task import Comm
    from ....tasks import load_config
    from ..task import build_model

    folder = folder_of(src)
    try:
        hf = read_config(folder)
        files = shards.shard_files(folder)  # an index is checked before anything is built
        meta = {**tokenizer_meta(folder, hf["vocab_size"], tokenizer), "hf_config": hf,  # export.py --format hf
                "source_folder": base_name or folder.resolve().name}  # export.py --format peft: PEFT's base
        cfg = load_config(config, [*overrides(hf, block_size, hf["vocab_size"]), "data.tokenizer=bpe"])
        runtime.setup(cfg)
        network = build_model(cfg, meta, Comm()).network
        fill(network, folder, layout_of(hf), cfg.model)
    except CheckpointError as exc:
        raise CheckpointError(f"{src}: {exc}") from None
    network.set_train(False)
    summary = {"arch": hf["architectures"][0], "n_layer": cfg.model.n_layer, "d_model": cfg.model.d_model,
               "out": out}
    if verify_logits:
        diff, scale = verify(network, folder, cfg.model)
        if diff > 1e-4 * scale:
            raise CheckpointError(f"--verify: logits differ from transformers' by up to {diff:.3g}; "
                                  "nothing was written")
        summary["max_abs_logit_diff"] = diff
    weights.save_imported(out, network, cfg, meta, {"files": shards.relative_names(folder, files),
                                                    "sha256": [weights.sha256(f) for f in files]})
    return summary


def verify(network, folder: Path, m) -> tuple[float, float]:
    """Max |logit difference| between ``network`` and transformers' own model of ``folder``,
    and the largest |logit| of the reference."""
    try:
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging
    except ImportError:
        raise UserError("--verify needs PyTorch and transformers (pip install torch transformers); "
                        "nothing was written") from None
    from mindspore import Tensor

    logging.disable_progress_bar()
    reference = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32,
                                                     trust_remote_code=False).eval()
    vocab = reference.config.vocab_size
    tokens = np.random.default_rng(0).integers(0, vocab, (2, min(m.block_size, 256))).astype(np.int32)
    with torch.no_grad():
        expected = reference(torch.from_numpy(tokens).long()).logits.numpy()
    return float(np.abs(network(Tensor(tokens)).asnumpy() - expected).max()), float(np.abs(expected).max())
