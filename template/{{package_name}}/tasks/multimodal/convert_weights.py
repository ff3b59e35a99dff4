"""Import a Hugging Face ``CLIPModel`` (``model.safetensors`` + its ``tokenizer.json``) as a checkpoint.

    python convert_weights.py clip-vit-base-patch32/model.safetensors --out weights/clip.ckpt --verify
    python eval.py --checkpoint weights/clip.ckpt --set data.path=my_pairs/     # zero-shot + retrieval
    python retrieve.py --checkpoint weights/clip.ckpt --image cat.png --captions labels.txt
    python train.py --set model.pretrained=weights/clip.ckpt --set model.image_tower=vit \\
        --set model.text_tower=clip --set model.freeze_image_tower=true ...  # the sizes as converted

Both towers, both projections and ``logit_scale`` map onto ``clip.py``'s towers (``image_tower:
vit``, ``text_tower: clip``); the sizes are read off the file (heads from the ``config.json``
beside it, else width / 64), and the tokenizer (the ``tokenizer.json`` beside it, or
``--tokenizer``) travels inside the checkpoint. CLIP's separate q/k/v projections are stacked
into the blocks' ``in_proj_weight`` (PyTorch's ``nn.MultiheadAttention`` layout, ``models/vit.py``).

``--verify`` (needs PyTorch and transformers) loads the file into transformers' own
``CLIPModel`` and compares image embeddings, text embeddings and logits on random images and
tokenised captions. Any mismatch is one line, and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import NoReturn

import numpy as np

from ...engine.errors import CheckpointError, DataError, UserError
from ...run.cli import DEFAULT_CONFIG, guarded

CLIP_MEAN, CLIP_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
NEUTRAL_PROMPT = "a photo of a {}."
TOLERANCE = 1e-4  # --verify: max |difference| relative to the largest reference value
LEAVES = {"weight": "gamma", "bias": "beta"}  # a LayerNorm's, in MindSpore
# CLIP block name -> ours (models/vit.py), under <tower>.encoder.layers.<i>.
BLOCK = {"layer_norm1": "ln_1", "layer_norm2": "ln_2", "self_attn.out_proj": "self_attention.out_proj",
         "mlp.fc1": "mlp.0", "mlp.fc2": "mlp.3"}
IMAGE, TEXT = "image_encoder.tower.", "text_encoder.tower."


def ours(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The file's tensors under our parameter names, q/k/v stacked; the ones no rule knows keep
    their name (so the import refuses the first unexpected one)."""
    out, rest = {}, dict(tensors)
    vit, text = IMAGE + "backbone.", TEXT
    for prefix, dest, n in (("vision_model.encoder.layers.", vit + "encoder.layers.", layers(tensors, "vision")),
                            ("text_model.encoder.layers.", text + "layers.", layers(tensors, "text"))):
        for i in range(n):
            src, to = f"{prefix}{i}.", f"{dest}encoder_layer_{i}."
            for theirs, mine in BLOCK.items():
                norm = mine.startswith("ln")
                for leaf in ("weight", "bias"):
                    if f"{src}{theirs}.{leaf}" in rest:
                        out[f"{to}{mine}.{LEAVES[leaf] if norm else leaf}"] = rest.pop(f"{src}{theirs}.{leaf}")
            for leaf in ("weight", "bias"):
                names = [f"{src}self_attn.{q}_proj.{leaf}" for q in "qkv"]
                if all(name in rest for name in names):
                    out[f"{to}self_attention.in_proj_{leaf}"] = np.concatenate([rest.pop(name) for name in names])
    simple = {"vision_model.embeddings.patch_embedding.weight": vit + "conv_proj.weight",
              "visual_projection.weight": IMAGE + "head.weight",
              "text_model.embeddings.token_embedding.weight": TEXT + "token_embedding.embedding_table",
              "text_model.embeddings.position_embedding.weight": TEXT + "position_embedding",
              "text_projection.weight": TEXT + "head.weight", "logit_scale": "logit_scale"}
    for norm, mine in (("vision_model.pre_layrnorm", vit + "encoder.ln_pre"),
                       ("vision_model.post_layernorm", vit + "encoder.ln"),
                       ("text_model.final_layer_norm", TEXT + "final_layer_norm")):
        simple.update({f"{norm}.{leaf}": f"{mine}.{LEAVES[leaf]}" for leaf in ("weight", "bias")})
    for name, to in simple.items():
        if name in rest:
            out[to] = rest.pop(name)
    if "vision_model.embeddings.class_embedding" in rest:  # (W,) -> (1, 1, W)
        out[vit + "class_token"] = rest.pop("vision_model.embeddings.class_embedding").reshape(1, 1, -1)
    if "vision_model.embeddings.position_embedding.weight" in rest:  # (N + 1, W) -> (1, N + 1, W)
        out[vit + "encoder.pos_embedding"] = rest.pop("vision_model.embeddings.position_embedding.weight")[None]
    out.update({name: value for name, value in rest.items() if not name.endswith("position_ids")})
    return out


def layers(tensors: dict, tower: str) -> int:
    return len({m.group(1) for name in tensors if (m := re.match(rf"{tower}_model\.encoder\.layers\.(\d+)\.", name))})


def sizes(tensors: dict[str, np.ndarray], config: dict) -> tuple[list[str], int, int]:
    """Config overrides for the CLIP in the file, its image size and channels."""
    need = ("vision_model.embeddings.patch_embedding.weight", "vision_model.embeddings.position_embedding.weight",
            "text_model.embeddings.token_embedding.weight", "text_model.embeddings.position_embedding.weight",
            "visual_projection.weight", "text_projection.weight", "logit_scale")
    missing = next((name for name in need if name not in tensors), None)
    if missing:
        raise CheckpointError(f"missing tensor {missing!r}: not a Hugging Face CLIPModel "
                              f"(its first tensor is {next(iter(tensors))!r})")
    vision, text = config.get("vision_config", {}), config.get("text_config", {})
    for part, act in (("vision_config", vision.get("hidden_act")), ("text_config", text.get("hidden_act"))):
        if act not in (None, "quick_gelu"):
            raise CheckpointError(f"config.json {part}.hidden_act is {act!r}; these towers use CLIP's quick_gelu")
    width, channels, patch, _ = tensors["vision_model.embeddings.patch_embedding.weight"].shape
    text_width = tensors["text_model.embeddings.token_embedding.weight"].shape[1]
    for tower, w in (("vision", width), ("text", text_width)):
        fc1 = tensors.get(f"{tower}_model.encoder.layers.0.mlp.fc1.weight")
        if fc1 is not None and fc1.shape[0] != 4 * w:
            raise CheckpointError(f"the {tower} tower's MLP is {fc1.shape[0]} wide, not 4 x its width {w}")
    grid = math.isqrt(tensors["vision_model.embeddings.position_embedding.weight"].shape[0] - 1)
    embed_dim = tensors["visual_projection.weight"].shape[0]
    for name, shape in (("visual_projection.weight", (embed_dim, width)),
                        ("text_projection.weight", (embed_dim, text_width))):
        if tuple(tensors[name].shape) != shape:
            raise CheckpointError(f"tensor {name!r} has shape {tuple(tensors[name].shape)}; "
                                  f"the towers need {shape}")
    heads = vision.get("num_attention_heads", width // 64)
    text_heads = text.get("num_attention_heads", text_width // 64)
    overrides = [
        "model.image_tower=vit", "model.text_tower=clip", f"model.embed_dim={embed_dim}",
        f"model.vit_patch_size={patch}", f"model.vit_width={width}", f"model.vit_layers={layers(tensors, 'vision')}",
        f"model.vit_heads={heads}", f"model.text_width={text_width}", f"model.text_layers={layers(tensors, 'text')}",
        f"model.text_heads={text_heads}",
        f"data.max_tokens={tensors['text_model.embeddings.position_embedding.weight'].shape[0]}",
        "model.pretrained=null", "model.freeze_image_tower=false"]
    return overrides, grid * patch, int(channels)


def read_tokenizer(src: str, path: str | None, vocab: int):
    from .captions import ClipTokenizer

    path = path or str(Path(src).with_name("tokenizer.json"))
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        raise CheckpointError(f"no tokenizer {path}: give CLIP's tokenizer.json with --tokenizer "
                              "(or put it beside the file)") from None
    try:
        tokenizer = ClipTokenizer(text, f"--tokenizer {path}")
    except DataError as exc:
        raise CheckpointError(str(exc)) from None
    if tokenizer.vocab_size != vocab:
        raise CheckpointError(f"--tokenizer {path}: a vocabulary of {tokenizer.vocab_size} tokens, but the "
                              f"token embedding has {vocab} rows")
    return tokenizer


def convert(src: str, out: str, *, config: str = DEFAULT_CONFIG, verify: bool = False,
            tokenizer: str | None = None) -> dict:
    """Read ``src``, check it, optionally verify it against transformers, write ``out``; return a summary."""
    from ...engine import runtime
    from ...tasks import load_config

    if not out.endswith(".ckpt"):
        raise UserError(f"--out {out}: name the checkpoint *.ckpt")
    runtime.setup(load_config(config))
    from ...deploy import weights
    from ...engine.task import Comm
    from .task import build_model

    try:
        tensors = weights.read_safetensors(src)
        hf_config = beside(src, "config.json")
        overrides, image_size, channels = sizes(tensors, hf_config)
        bpe = read_tokenizer(src, tokenizer, tensors["text_model.embeddings.token_embedding.weight"].shape[0])
        # A neutral zero-shot prompt (CLIP's own), not the digits' caption of config.yaml
        cfg = load_config(config, [*overrides, f"data.image_size={image_size}", f"data.channels={channels}",
                                   f"data.prompt={NEUTRAL_PROMPT}"])
        pre = beside(src, "preprocessor_config.json")
        meta = {"image_size": image_size, "channels": channels, "max_tokens": cfg.data.max_tokens,
                "mean": pre.get("image_mean", CLIP_MEAN)[:channels], "std": pre.get("image_std", CLIP_STD)[:channels],
                **processor_resize(pre, image_size),
                "classes": None, "prompt": NEUTRAL_PROMPT, "vocab": [], "captions": [],  # trained on no data here
                "tokenizer": bpe.text, "eos_id": bpe.eos_id, "vocab_size": bpe.vocab_size}
        network = build_model(cfg, meta, Comm()).network
        weights.load(network, weights.map_weights(network, ours(tensors), lambda name: name))
    except CheckpointError as exc:
        raise CheckpointError(f"{src}: {exc}") from None
    network.set_train(False)
    summary = {"vit": f"{cfg.model.vit_layers} x {cfg.model.vit_width}", "embed_dim": cfg.model.embed_dim,
               "text": f"{cfg.model.text_layers} x {cfg.model.text_width}", "out": out}
    if verify:
        summary["max_abs_diff"] = verify_against_transformers(network, tensors, hf_config, cfg, meta, bpe)
    weights.save_imported(out, network, cfg, meta, {"file": Path(src).name, "sha256": weights.sha256(src)})
    return summary


def processor_resize(pre: dict, image_size: int) -> dict:
    """How CLIPImageProcessor resizes: Pillow's resample (3, bicubic, by default) of the shorter side to
    ``shortest_edge``, then the centre ``crop_size`` (as ``eval_crop`` = crop / shortest edge)."""
    size = pre.get("size")
    shortest = size.get("shortest_edge", image_size) if isinstance(size, dict) else size or image_size
    return {"interpolation": "bilinear" if pre.get("resample", 3) == 2 else "bicubic",
            "eval_crop": image_size / shortest}


def beside(src: str, name: str) -> dict:
    path = Path(src).with_name(name)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def verify_against_transformers(network, tensors, hf_config: dict, cfg, meta: dict, bpe) -> dict[str, float]:
    """Max |difference| of image embeddings, text embeddings and image-text logits between
    ``network`` and transformers' ``CLIPModel`` holding the same file."""
    try:
        from .reference_clip import reference_outputs
    except ImportError:
        raise UserError("--verify needs PyTorch and transformers (pip install torch transformers); "
                        "nothing was written") from None
    from mindspore import Tensor

    rng = np.random.default_rng(0)
    images = rng.standard_normal((2, meta["channels"], meta["image_size"], meta["image_size"])).astype(np.float32)
    tokens = bpe.encode(["a photo of a cat", "a diagram"], meta["max_tokens"])
    expected = reference_outputs(tensors, hf_config, cfg.model, meta, images, tokens)
    image_emb, text_emb = (t.asnumpy() for t in network(Tensor(images), Tensor(tokens)))
    actual = {"image_embeds": image_emb, "text_embeds": text_emb,
              "logits_per_image": float(network.scale().asnumpy()) * image_emb @ text_emb.T}
    diffs = {key: float(np.abs(actual[key] - expected[key]).max()) for key in actual}
    for key, diff in diffs.items():
        if diff > TOLERANCE * max(1.0, float(np.abs(expected[key]).max())):
            raise CheckpointError(f"--verify: {key} differ from transformers' by up to {diff:.3g}; nothing was written")
    return diffs


def main() -> NoReturn:
    p = argparse.ArgumentParser(description="Import a Hugging Face CLIPModel (.safetensors + tokenizer.json) "
                                            "as a checkpoint of this project.")
    p.add_argument("src", help="the CLIPModel's model.safetensors")
    p.add_argument("--out", required=True, help="the checkpoint to write (*.ckpt)")
    p.add_argument("--tokenizer", help="its tokenizer.json (default: the one beside the file)")
    p.add_argument("--config", default=DEFAULT_CONFIG, help="the config to record (default: %(default)s)")
    p.add_argument("--verify", action="store_true", help="compare with transformers' CLIPModel (needs torch)")
    args = p.parse_args()

    def run():
        summary = convert(args.src, args.out, config=args.config, verify=args.verify, tokenizer=args.tokenizer)
        diff = ""
        if args.verify:
            diffs = summary["max_abs_diff"].items()
            diff = ", max |diff| vs transformers " + ", ".join(f"{k} {v:.2e}" for k, v in diffs)
        print(f"{args.src}: CLIP, ViT {summary['vit']}, text {summary['text']}, embed {summary['embed_dim']} "
              f"-> {summary['out']}{diff}")

    guarded(run)
