"""Our GPT's parameter names and layouts against Hugging Face GPT-2's: ``convert_weights.py``
reads them in, ``export.py --format hf`` writes them back out."""

from __future__ import annotations

import re

import numpy as np

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
