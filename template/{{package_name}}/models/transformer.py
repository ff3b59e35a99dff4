"""GPT's pre-LayerNorm Transformer block (causal self-attention + MLP), shared by the language
model (``tasks/nlp/models/gpt.py``) and the multimodal task's Transformer text tower.

Chosen for speed on CPU, measured on MindSpore 2.10 (see the README): GELU written out as its
tanh formula, q/k/v split with ``ops.split`` before the reshape to heads, K transposed once into
(B, H, D, T) so the score matmul needs no transpose, no bias vectors unless asked (``bias``).
``prefill`` and ``step`` are ``construct`` split for incremental decoding with a key/value cache.

Memory (MindSpore 2.10, CPU, compiled): an elementwise op that broadcasts keeps index tables of
up to 4x its output alive per graph node; so the mask is broadcast explicitly
(``ops.broadcast_to``), softmax's backward too (``Softmax32``): the default nlp run's peak RSS
881 -> 828 MB at equal speed. (``mint.permute`` for the head transposes, as the llama has them,
saved ~30 MB more but made the step ~15% slower at this size: not taken.)
"""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops
from mindspore.common.initializer import Normal

LN_EPS = 1e-5  # LayerNorm epsilon of GPT-2 (and PyTorch); MindSpore's default is 1e-7


def gelu(x):
    """GELU, tanh approximation (as GPT-2), from elementwise ops: on CPU the whole training
    step ran ~20% faster than with ``nn.GELU``'s kernels."""
    return 0.5 * x * (1.0 + ops.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


class Softmax32(nn.Cell):
    """Softmax over the last axis in float32, whatever the scores' dtype (kept float32 under amp
    O2 too: a task lists it in ``Model.float32_cells``)."""

    def construct(self, scores):
        return ops.softmax(scores.astype(ms.float32), axis=-1).astype(scores.dtype)

    def bprop(self, scores, out, dout):  # autodiff's, with the row sums broadcast explicitly
        out, dout = out.astype(ms.float32), dout.astype(ms.float32)
        total = ops.broadcast_to((dout * out).sum(-1, keepdims=True), dout.shape)
        return (((dout - total) * out).astype(scores.dtype),)


class CausalSelfAttention(nn.Cell):
    def __init__(self, d_model: int, n_head: int, block_size: int, dropout: float, proj_std: float, bias: bool):
        super().__init__()
        self.n_head, self.d_head = n_head, d_model // n_head
        self.scale = 1.0 / math.sqrt(self.d_head)
        self.qkv = nn.Dense(d_model, 3 * d_model, weight_init=Normal(0.02), has_bias=bias, bias_init="zeros")
        self.proj = nn.Dense(d_model, d_model, weight_init=Normal(proj_std), has_bias=bias, bias_init="zeros")
        self.attn_drop, self.resid_drop = nn.Dropout(p=dropout), nn.Dropout(p=dropout)
        self.softmax = Softmax32()
        # True above the diagonal: position t may not look at positions after t.
        self.future = Tensor(np.triu(np.ones((block_size, block_size), dtype=bool), k=1))

    def construct(self, x):  # (B, T, C) -> (B, T, C)
        q, k, v = self.heads(x)
        t = x.shape[1]
        return self.attend(q, k, v, self.future[:t, :t])

    def heads(self, x):  # (B, T, C) -> q (B, H, T, D), k (B, H, D, T): already transposed, v (B, H, T, D)
        t, c = x.shape[1], x.shape[2]
        q, k, v = ops.split(self.qkv(x), c, axis=-1)  # 3 x (B, T, C); -1: the batch (any, in an export)
        q = q.reshape(-1, t, self.n_head, self.d_head).transpose(0, 2, 1, 3)
        k = k.reshape(-1, t, self.n_head, self.d_head).transpose(0, 2, 3, 1)
        v = v.reshape(-1, t, self.n_head, self.d_head).transpose(0, 2, 1, 3)
        return q, k, v

    def attend(self, q, k, v, hidden):  # hidden: True where a query may not look (broadcasts to the scores)
        scores = ops.matmul(q, k) * self.scale  # (B, H, Tq, Tk)
        scores = ops.where(ops.broadcast_to(hidden, scores.shape), float("-inf"), scores)
        weights = self.attn_drop(self.softmax(scores))
        t = q.shape[2]
        y = ops.matmul(weights, v).transpose(0, 2, 1, 3).reshape(-1, t, self.n_head * self.d_head)  # heads side by side
        return self.resid_drop(self.proj(y))

    def prefill(self, x):  # (B, T, C) -> output (B, T, C) and this layer's keys and values to cache
        q, k, v = self.heads(x)
        t = x.shape[1]
        return self.attend(q, k, v, self.future[:t, :t]), k, v

    def step(self, x, k_cache, v_cache, slot, hidden):  # x (B, 1, C): the token at position ``pos``
        """One new position against the cache: its key and value are written into slot ``pos``
        (``slot`` is the one-hot (T,) mask of it), positions after ``pos`` are ``hidden``."""
        q, k, v = self.heads(x)  # q, v (B, H, 1, D), k (B, H, D, 1)
        k_cache = ops.where(slot, k, k_cache)  # (B, H, D, T)
        v_cache = ops.where(slot.reshape(-1, 1), v, v_cache)  # (B, H, T, D)
        return self.attend(q, k_cache, v_cache, hidden), k_cache, v_cache


class MLP(nn.Cell):
    def __init__(self, d_model: int, hidden: int, dropout: float, proj_std: float, bias: bool):
        super().__init__()
        self.fc = nn.Dense(d_model, hidden, weight_init=Normal(0.02), has_bias=bias, bias_init="zeros")
        self.proj = nn.Dense(hidden, d_model, weight_init=Normal(proj_std), has_bias=bias, bias_init="zeros")
        self.drop = nn.Dropout(p=dropout)

    def construct(self, x):
        return self.drop(self.proj(gelu(self.fc(x))))


class Block(nn.Cell):
    """Pre-LayerNorm residual block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, d_model: int, n_head: int, block_size: int, mlp_ratio: int, dropout: float,
                 proj_std: float, bias: bool):
        super().__init__()
        self.ln1 = nn.LayerNorm((d_model,), epsilon=LN_EPS)
        self.attn = CausalSelfAttention(d_model, n_head, block_size, dropout, proj_std, bias)
        self.ln2 = nn.LayerNorm((d_model,), epsilon=LN_EPS)
        self.mlp = MLP(d_model, mlp_ratio * d_model, dropout, proj_std, bias)

    def construct(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))

    def prefill(self, x):
        y, k, v = self.attn.prefill(self.ln1(x))
        x = x + y
        return x + self.mlp(self.ln2(x)), k, v

    def step(self, x, k_cache, v_cache, slot, hidden):
        y, k_cache, v_cache = self.attn.step(self.ln1(x), k_cache, v_cache, slot, hidden)
        x = x + y
        return x + self.mlp(self.ln2(x)), k_cache, v_cache
