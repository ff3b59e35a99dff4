"""Vision Transformer (Dosovitskiy et al. 2020) with torchvision's module names: ``conv_proj``,
``class_token``, ``encoder.pos_embedding``, ``encoder.layers.encoder_layer_<i>.{ln_1,
self_attention, ln_2, mlp}``, ``encoder.ln`` (torchvision's ``heads.head`` is the classifier's
``head``). So a torchvision-layout file imports by name; ``convert_weights.py`` also reads
Hugging Face ``ViTForImageClassification`` files (a renaming table, ``vit_layout.py``,
which also holds the sizes of the named archs).

The same blocks serve CLIP's two towers (``tasks/multimodal/``): ``pre_norm`` adds CLIP's
LayerNorm after the positions (``encoder.ln_pre``), ``act="quick_gelu"`` its activation, ``conv_bias=False``
its bias-free patch projection, and ``SelfAttention(causal=True)`` its text transformer.

Mixed precision: LayerNorms are on MindSpore's float32 list, and the attention scores go
through softmax in float32 (cast in place).
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import Normal, TruncatedNormal, XavierUniform, initializer

from .drop_path import DropPath, block_rates
from .registry import Backbone, Options
from .vit_layout import ARCHS, vit_sizes

LN_EPS = 1e-6  # torchvision and timm (PyTorch's default is 1e-5, CLIP's)


def gelu(x):  # exact GELU (torchvision, timm), from elementwise ops
    return 0.5 * x * (1.0 + ops.erf(x * 0.7071067811865476))


def quick_gelu(x):  # CLIP's approximation
    return x * ops.sigmoid(1.702 * x)


class Activation(nn.Cell):
    def __init__(self, kind: str = "gelu"):
        super().__init__()
        self.fn = quick_gelu if kind == "quick_gelu" else gelu

    def construct(self, x):
        return self.fn(x)


class SelfAttention(nn.Cell):
    """PyTorch's ``nn.MultiheadAttention`` parameters (``in_proj_weight`` (3C, C) for q, k, v
    stacked, ``in_proj_bias``, ``out_proj``), self-attention only; ``causal``: a position sees
    no later one (CLIP's text tower)."""

    def __init__(self, width: int, heads: int, causal: bool = False, max_len: int = 0):
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not divisible by {heads} heads")
        self.heads, self.d_head = heads, width // heads
        self.scale = 1.0 / math.sqrt(self.d_head)
        self.in_proj_weight = Parameter(initializer(XavierUniform(), (3 * width, width)), name="in_proj_weight")
        self.in_proj_bias = Parameter(initializer("zeros", (3 * width,)), name="in_proj_bias")
        self.out_proj = nn.Dense(width, width)
        self.causal = causal
        if causal:  # True above the diagonal: hidden
            self.future = Tensor(np.triu(np.ones((max_len, max_len), dtype=bool), k=1))

    def construct(self, x):  # (B, T, C) -> (B, T, C)
        b, t, c = x.shape
        qkv = ops.matmul(x, self.in_proj_weight.T.astype(x.dtype)) + self.in_proj_bias.astype(x.dtype)
        q, k, v = ops.split(qkv, c, axis=-1)  # 3 x (B, T, C)
        q = q.reshape(b, t, self.heads, self.d_head).transpose(0, 2, 1, 3)  # (B, H, T, D)
        k = k.reshape(b, t, self.heads, self.d_head).transpose(0, 2, 3, 1)  # (B, H, D, T)
        v = v.reshape(b, t, self.heads, self.d_head).transpose(0, 2, 1, 3)
        scores = ops.matmul(q, k).astype(ms.float32) * self.scale  # (B, H, T, T), float32
        if self.causal:
            scores = ops.where(self.future[:t, :t], float("-inf"), scores)
        weights = ops.softmax(scores, axis=-1).astype(v.dtype)
        y = ops.matmul(weights, v).transpose(0, 2, 1, 3).reshape(b, t, c)  # heads side by side
        return self.out_proj(y)


class EncoderBlock(nn.Cell):
    """Pre-LayerNorm: x + attention(ln_1(x)), then x + mlp(ln_2(x)). ``mlp`` is torchvision's
    ``MLPBlock`` (Linear, GELU, Dropout, Linear, Dropout): its linears are ``mlp.0`` and ``mlp.3``.
    ``drop_path``: stochastic depth on both residual branches, as timm's ``Block``."""

    def __init__(self, width: int, heads: int, mlp_dim: int, dropout: float = 0.0, eps: float = LN_EPS,
                 act: str = "gelu", causal: bool = False, max_len: int = 0, drop_path: float = 0.0):
        super().__init__()
        self.drop_path = DropPath(drop_path)
        self.ln_1 = nn.LayerNorm((width,), epsilon=eps)
        self.self_attention = SelfAttention(width, heads, causal, max_len)
        self.dropout = nn.Dropout(p=dropout)
        self.ln_2 = nn.LayerNorm((width,), epsilon=eps)
        self.mlp = nn.SequentialCell([nn.Dense(width, mlp_dim), Activation(act), nn.Dropout(p=dropout),
                                      nn.Dense(mlp_dim, width), nn.Dropout(p=dropout)])

    def construct(self, x):  # (B, T, C) -> (B, T, C)
        x = x + self.drop_path(self.dropout(self.self_attention(self.ln_1(x))))
        return x + self.drop_path(self.mlp(self.ln_2(x)))


def encoder_layers(n: int, *args, drop_path: float = 0.0, **kwargs) -> nn.SequentialCell:
    """``n`` blocks named ``encoder_layer_0`` ... as torchvision names them; block i's drop path
    rate rises linearly to ``drop_path`` (``drop_path.py``)."""
    return nn.SequentialCell(OrderedDict((f"encoder_layer_{i}", EncoderBlock(*args, **kwargs, drop_path=rate))
                                         for i, rate in enumerate(block_rates(drop_path, n))))


class Encoder(nn.Cell):
    """Learned positions, (CLIP: a LayerNorm), the blocks, a final LayerNorm (torchvision's ``encoder``)."""

    def __init__(self, seq_len: int, layers: int, heads: int, width: int, mlp_dim: int, dropout: float,
                 eps: float, act: str, pre_norm: bool = False, drop_path: float = 0.0):
        super().__init__()
        self.pos_embedding = Parameter(initializer(Normal(0.02), (1, seq_len, width)), name="pos_embedding")
        self.dropout = nn.Dropout(p=dropout)
        self.ln_pre = nn.LayerNorm((width,), epsilon=eps) if pre_norm else nn.Identity()
        self.layers = encoder_layers(layers, width, heads, mlp_dim, dropout, eps, act, drop_path=drop_path)
        self.ln = nn.LayerNorm((width,), epsilon=eps)

    def construct(self, x):  # (B, T, C) -> (B, T, C)
        x = self.ln_pre(self.dropout(x + self.pos_embedding.astype(x.dtype)))
        return self.ln(self.layers(x))


class VisionTransformer(nn.Cell):
    """Everything but torchvision's ``heads``: (B, C, S, S) -> the class token's features (B, width).
    ``image_size`` must be a multiple of ``patch_size``; the published weights saw 224x224."""

    def __init__(self, image_size: int, patch_size: int, layers: int, heads: int, width: int, mlp_dim: int,
                 channels: int = 3, dropout: float = 0.0, eps: float = LN_EPS, act: str = "gelu",
                 pre_norm: bool = False, conv_bias: bool = True, drop_path: float = 0.0):
        super().__init__()
        if image_size % patch_size:
            raise ValueError(f"image size {image_size} is not a multiple of the patch size {patch_size}")
        fan_in = channels * patch_size * patch_size
        self.conv_proj = nn.Conv2d(channels, width, patch_size, stride=patch_size, pad_mode="valid",
                                   has_bias=conv_bias, weight_init=TruncatedNormal(math.sqrt(1.0 / fan_in)))
        self.class_token = Parameter(initializer("zeros", (1, 1, width)), name="class_token")
        seq_len = (image_size // patch_size) ** 2 + 1
        self.encoder = Encoder(seq_len, layers, heads, width, mlp_dim, dropout, eps, act, pre_norm, drop_path)
        self.out_features = width
        self.num_layers = layers + 1  # optim.layer_decay: embeddings 0, blocks 1..n, final norm (+ head) n + 1

    def layer_id(self, name: str) -> int:
        """The layer of a parameter (its name here), as BEiT and timm count: patch/class/position
        embeddings (and CLIP's ln_pre) 0, encoder block i i + 1, the final LayerNorm with the head."""
        match = re.match(r"encoder\.layers\.encoder_layer_(\d+)\.", name)
        if match:
            return int(match[1]) + 1
        return self.num_layers if name.startswith("encoder.ln.") else 0

    def construct(self, x):
        x = self.conv_proj(x)  # (B, C, S/P, S/P)
        b, c = x.shape[0], x.shape[1]
        x = x.reshape(b, c, -1).transpose(0, 2, 1)  # (B, N, C): patches in row-major order
        cls = ops.broadcast_to(self.class_token.astype(x.dtype), (b, 1, c))
        x = self.encoder(ops.concat((cls, x), axis=1))  # (B, N + 1, C)
        return x[:, 0]


def build(o: Options) -> VisionTransformer:
    """A named ViT at the sizes of ``o.config`` (the vision task's model section): the arch's, each
    replaced where the config sets one (``vit_layout.vit_sizes``)."""
    patch, layers, heads, width, mlp_dim = vit_sizes(o.config)
    return VisionTransformer(o.image_size, patch, layers, heads, width, mlp_dim, o.channels, o.config.dropout,
                             drop_path=o.drop_path)


# The registry's entries (backbones.py): positions for one image size.
BACKBONES = {arch: Backbone(build, fixed_size=True) for arch in ARCHS}
