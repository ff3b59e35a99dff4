"""``export.py --format hf --out DIR``: a checkpoint as the Hugging Face folder that
transformers, vLLM and llama.cpp's converter read.

- ``config.json``: an imported llama's original (sizes unchanged), or one written from our sizes,
  which the summary says: for a llama trained here ``LlamaForCausalLM`` (``Qwen2ForCausalLM``
  with q/k/v biases, ``Qwen3ForCausalLM`` with q/k norms); for ``gpt``/``gpt2`` ``GPT2LMHeadModel``
  (zero biases where ``model.bias`` is off).
- ``model.safetensors`` (or shards of at most 5 GB and ``model.safetensors.index.json``) in
  ``--dtype`` fp32 | fp16 | bf16 (bf16 through PyTorch's safetensors writer); LoRA merged into
  its weights. Our parameter names are Hugging Face's: the copy is name for name.
- ``tokenizer.json``, ``tokenizer_config.json`` (chat template, special tokens),
  ``generation_config.json`` (end-of-text ids, sampling defaults).

``export.py --format peft --out DIR``: the LoRA adapters alone as the folder PEFT writes
(``adapter_config.json``, ``adapter_model.safetensors``), for ``PeftModel.from_pretrained(base, DIR)``
over the Hugging Face model the fine-tune started from.

Each folder is written beside ``DIR`` and renamed into place: an existing ``DIR`` is refused and
an interrupted export leaves nothing half-written under that name.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
from safetensors import SafetensorError

from ....engine.errors import UserError
from ..config import DECODER_TRAITS, ModelConfig
from ..models import lora
from . import gpt2
from .layouts import layout_of, shapes_of

DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": None}  # bf16: no NumPy dtype, PyTorch writes it
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}  # config.json's torch_dtype
SHARD_BYTES = 5 << 30  # transformers' default max_shard_size


def write(trained, out: Path, dtype: str = "fp32") -> dict[str, Path]:
    m = trained.cfg.model
    if trained.meta["tokenizer"]["kind"] != "bpe":
        raise UserError(f"--format hf: a {trained.meta['tokenizer']['kind']} tokenizer has no tokenizer.json; "
                        "train with data.tokenizer=bpe")
    if dtype not in DTYPES:
        raise UserError(f"--dtype {dtype}: expected one of {', '.join(DTYPES)}")
    with new_folder(out) as tmp:
        if m.arch == "llama":
            config, written_from_sizes = hf_config(trained, dtype)
            lora.merge(trained.network)
            ours = {name: p.asnumpy() for name, p in trained.network.parameters_and_names()
                    if not lora.is_adapter(name)}
            tensors = layout_of(config).to_theirs(ours, shapes_of(trained.network, m))
        else:
            tensors = gpt2.export_tensors(trained.network)
            config, written_from_sizes = gpt2.export_config(trained, tensors, TORCH_DTYPES[dtype]), True
        save_weights(tensors, tmp, dtype)
        (tmp / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        (tmp / "tokenizer.json").write_text(trained.meta["tokenizer"]["json"], encoding="utf-8")
        # the model's own context (the original config's), not the block this run trained on
        context = trained.meta.get("hf_config", {}).get("max_position_embeddings", m.block_size)
        settings = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": context,
                    **trained.meta.get("special_tokens", {})}
        if trained.meta.get("chat_template"):
            settings["chat_template"] = trained.meta["chat_template"]
        (tmp / "tokenizer_config.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
        (tmp / "generation_config.json").write_text(json.dumps(generation_config(trained.meta, config), indent=2),
                                                     encoding="utf-8")
    return {"hf": out, **({"config written from our sizes": out / "config.json"} if written_from_sizes else {})}


def generation_config(meta: dict, config: dict) -> dict:
    """The imported model's generation_config.json as it was; for a model trained here, its end
    ids (the tokenizer's: an empty list breaks transformers) and sampling defaults."""
    generation = dict(meta.get("generation", {}))
    if "original" in generation:
        return generation["original"]
    eos = generation.pop("eos_token_ids", None) or config.get("eos_token_id")
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    return {**({"eos_token_id": eos[0] if len(eos) == 1 else eos} if eos else {}), **generation,
            **({"do_sample": True} if "temperature" in generation else {})}


def write_adapters(trained, out: Path, dtype: str = "fp32") -> dict[str, Path]:
    """The LoRA adapters as PEFT saves them: A and B under PEFT's names, scaled by alpha / rank."""
    lora_cfg = trained.cfg.model.lora
    if not lora_cfg.rank:
        raise UserError("--format peft: this checkpoint has no LoRA adapters (model.lora.rank is 0); "
                        "export the whole model with --format hf")
    if dtype not in DTYPES:
        raise UserError(f"--dtype {dtype}: expected one of {', '.join(DTYPES)}")
    ours = {name: p.asnumpy() for name, p in trained.network.parameters_and_names() if lora.is_adapter(name)}
    layout = layout_of(hf_config(trained, dtype)[0])  # a fused module (Phi-3's qkv_proj): block adapters
    adapters, per_module = layout.peft_adapters(ours, shapes_of(trained.network, trained.cfg.model), lora_cfg.alpha,
                                                lora_cfg.rank)
    tensors = {f"base_model.model.{name}.weight": value for name, value in adapters.items()}
    # the hub id or folder name it was imported from (convert_weights.py --hub-id; AutoPeftModelForCausalLM
    # loads it), else what the config names
    base = (trained.meta.get("source_folder") or trained.meta.get("hf_config", {}).get("_name_or_path")
            or trained.cfg.model.pretrained)
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": lora_cfg.rank, "lora_alpha": lora_cfg.alpha,
              "lora_dropout": lora_cfg.dropout, **per_module, "bias": "none",
              "fan_in_fan_out": False, "inference_mode": True, "base_model_name_or_path": base}
    with new_folder(out) as tmp:
        save_file(tensors, tmp / "adapter_model.safetensors", dtype)
        (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return {"peft": out}


@contextlib.contextmanager
def new_folder(out: Path):
    """A temporary folder beside ``out``, renamed to ``out`` when filled: never a half-written ``out``."""
    if out.exists():
        raise UserError(f"{out} exists: export to a new --out folder")
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # left by an interrupted export
    try:
        tmp.mkdir(parents=True)
        yield tmp
        os.rename(tmp, out)
    except OSError as exc:  # a full disk, a quota: one line, and nothing left behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"could not write {out} ({exc.strerror or exc}); nothing was written") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def hf_config(trained, dtype: str) -> tuple[dict, bool]:
    """The original config.json (from the import), or one from our sizes; the weights' dtype set."""
    m = trained.cfg.model
    torch_dtype = TORCH_DTYPES[dtype]  # both keys: transformers 5 reads dtype first, earlier ones torch_dtype
    if trained.meta.get("hf_config"):  # its rows too: data.add_special_tokens may have grown them
        rows = trained.network.model.embed_tokens.weight.shape[0]
        return {**trained.meta["hf_config"], "vocab_size": rows, "torch_dtype": torch_dtype,
                "dtype": torch_dtype}, False
    traits = [key for key in DECODER_TRAITS
              if key != "qk_norm" and getattr(m, key) != ModelConfig.model_fields[key].default]
    if m.qk_norm == "all" or (m.qk_norm == "head" and m.bias) or traits or m.sliding_window:
        raise UserError("--format hf: a llama trained here with family traits beyond Llama's, Qwen2's q/k/v biases "
                        "or Qwen3's q/k norms has no config.json to write (import the family's model, and its own "
                        f"config.json is written back; this one sets {', '.join(traits) or 'qk_norm and bias'})")
    arch = "Qwen3ForCausalLM" if m.qk_norm == "head" else "Qwen2ForCausalLM" if m.bias else "LlamaForCausalLM"
    from ..data import Tokenizer

    tokenizer = Tokenizer.from_meta(trained.meta)
    rope = {"rope_type": "default"} if m.rope_scaling is None else m.rope_scaling.hf()
    config = {"architectures": [arch], "model_type": arch.removesuffix("ForCausalLM").lower(),
              "vocab_size": m.embedding_rows or tokenizer.vocab_size, "hidden_size": m.d_model,
              "intermediate_size": m.d_ff or m.mlp_ratio * m.d_model, "num_hidden_layers": m.n_layer,
              "num_attention_heads": m.n_head, "num_key_value_heads": m.n_kv_head or m.n_head,
              "head_dim": m.head_dim or m.d_model // m.n_head, "max_position_embeddings": m.block_size,
              "rms_norm_eps": m.norm_eps, "rope_theta": m.rope_theta, "rope_scaling": rope, "hidden_act": "silu",
              "tie_word_embeddings": m.tie_embeddings, "torch_dtype": torch_dtype, "dtype": torch_dtype,
              "eos_token_id": tokenizer.eos_id}
    return config, True  # Qwen2's q/k/v biases and Qwen3's q/k norms come with their architecture


def save_weights(tensors: dict[str, np.ndarray], folder: Path, dtype: str) -> None:
    """Shards of at most ``SHARD_BYTES`` (one file when it fits) and, for several, the index."""
    size = np.dtype(DTYPES[dtype] or np.float16).itemsize  # bf16: 2 bytes
    shards, current, used = [], {}, 0
    for name, value in tensors.items():
        if current and used + value.size * size > SHARD_BYTES:
            shards, current, used = [*shards, current], {}, 0
        current[name], used = value, used + value.size * size
    shards.append(current)
    files = (["model.safetensors"] if len(shards) == 1 else
             [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))])
    for file, shard in zip(files, shards):
        save_file(shard, folder / file, dtype)
    if len(shards) > 1:
        index = {"metadata": {"total_size": sum(v.size * size for v in tensors.values())},
                 "weight_map": {name: file for file, shard in zip(files, shards) for name in shard}}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2), encoding="utf-8")


def save_file(tensors: dict[str, np.ndarray], path: Path, dtype: str) -> None:
    metadata = {"format": "pt"}  # what transformers expects of a PyTorch checkpoint
    if DTYPES[dtype] is not None:
        from safetensors.numpy import save_file as save

        try:
            save({k: np.ascontiguousarray(v, DTYPES[dtype]) for k, v in tensors.items()}, str(path), metadata)
        except SafetensorError as exc:
            raise writing_failed(path, exc) from None
        return
    try:
        import torch
        from safetensors.torch import save_file as save
    except ImportError:
        raise UserError("--dtype bf16 needs PyTorch (pip install torch); or use --dtype fp16 or fp32") from None
    try:
        save({k: torch.from_numpy(np.ascontiguousarray(v)).to(torch.bfloat16) for k, v in tensors.items()}, str(path),
             metadata)
    except SafetensorError as exc:
        raise writing_failed(path, exc) from None


def writing_failed(path: Path, exc: Exception) -> OSError:
    """The safetensors writer's error (its Rust I/O error as text) as the OSError it stands for."""
    found = re.search(r'I/O error: (.+?) \(os error \d+\)|message: "([^"]+)"', str(exc))
    reason = next(text for text in found.groups() if text) if found else str(exc).splitlines()[0]
    return OSError(errno.EIO, reason, str(path))
