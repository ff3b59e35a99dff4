"""CLIP's towers (Radford et al. 2021) on the ViT blocks of ``models/vit.py``,
and CLIP's byte-level BPE tokenizer (its ``tokenizer.json``, run by Hugging Face ``tokenizers``).

``model.image_tower: vit``: the ViT with CLIP's choices (a LayerNorm after the positions,
QuickGELU, a bias-free patch projection, LayerNorm epsilon 1e-5), its class token projected
without a bias (CLIP's ``visual_projection``).
``model.text_tower: clip``: token + learned position embeddings, causal pre-LayerNorm blocks, a
final LayerNorm; the caption is the features at its first end-of-text token, projected without
a bias (``text_projection``). Captions are padded after that token, so, the attention being
causal, padding never changes a caption's embedding.

``convert_weights.py`` imports Hugging Face ``CLIPModel`` files onto these.
"""

from __future__ import annotations

import functools

import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import Normal, initializer

from ...engine.errors import DataError
from ...models.vit import VisionTransformer, encoder_layers

CLIP_EPS = 1e-5  # CLIP's LayerNorm epsilon


class ViTImageTower(nn.Cell):
    def __init__(self, m, channels: int, image_size: int):
        super().__init__()
        self.backbone = VisionTransformer(image_size, m.vit_patch_size, m.vit_layers, m.vit_heads, m.vit_width,
                                          4 * m.vit_width, channels, eps=CLIP_EPS, act="quick_gelu",
                                          pre_norm=True, conv_bias=False)
        self.head = nn.Dense(m.vit_width, m.embed_dim, has_bias=False)

    def construct(self, image):  # (B, C, H, W) -> (B, E)
        return self.head(self.backbone(image))


class CLIPTextTower(nn.Cell):
    def __init__(self, vocab_size: int, context: int, width: int, layers: int, heads: int, embed_dim: int,
                 eos_id: int):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, width, embedding_table=Normal(0.02))
        self.position_embedding = Parameter(initializer(Normal(0.01), (context, width)), name="position_embedding")
        self.layers = encoder_layers(layers, width, heads, 4 * width, 0.0, CLIP_EPS, "quick_gelu", True, context)
        self.final_layer_norm = nn.LayerNorm((width,), epsilon=CLIP_EPS)
        self.head = nn.Dense(width, embed_dim, has_bias=False)
        self.eos_id = eos_id

    def construct(self, tokens):  # (B, L) int32, L <= context -> (B, E)
        x = self.token_embedding(tokens) + self.position_embedding[:tokens.shape[1]]  # (B, L, W)
        x = self.final_layer_norm(self.layers(x))
        eos = (tokens == self.eos_id).astype(ms.float32)  # (B, L)
        first = eos * (ops.cumsum(eos, axis=1) == 1).astype(ms.float32)  # one-hot: the first end-of-text
        pooled = ops.sum(x * first.astype(x.dtype).expand_dims(-1), dim=1)  # (B, W)
        return self.head(pooled)


@functools.lru_cache(maxsize=4)
def pretrained_meta(path: str) -> dict:
    """The task meta of a multimodal checkpoint (``model.pretrained``), read once."""
    from ...engine import checkpoint

    return checkpoint.read(path, tasks=("multimodal",))[1]["task_meta"]


def image_inputs(path: str) -> dict:
    """What a CLIP checkpoint's image tower was trained to see: its mean/std and how it resizes."""
    saved = pretrained_meta(path)
    return {key: saved[key] for key in ("mean", "std", "interpolation", "eval_crop") if key in saved}


def clip_meta(path: str) -> dict:
    """The text side of a CLIP checkpoint (``model.pretrained``): its tokenizer and context."""
    saved = pretrained_meta(path)
    if "tokenizer" not in saved:
        raise DataError(f"model.pretrained={path}: not an imported CLIP (no tokenizer in it); "
                        "model.text_tower: clip needs one")
    return {key: saved[key] for key in ("tokenizer", "eos_id", "vocab_size")}
