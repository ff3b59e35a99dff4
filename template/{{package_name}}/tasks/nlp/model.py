"""A decoder-only Transformer (GPT-style): token + learned position embeddings, pre-LayerNorm
blocks of causal self-attention and an MLP, a final LayerNorm and a linear head over the
vocabulary (optionally tied to the token embedding).

A few choices here are for speed on CPU, measured on MindSpore 2.10 (see the README):
GELU written out as its tanh formula, q/k/v split with ``ops.split`` before the reshape to
heads, K transposed once into (B, H, D, T) so the score matmul needs no transpose, and no
bias vectors in the linear layers by default (``model.bias``; as nanoGPT, no worse without).
The fused cross-entropy is in ``LanguageModelLoss`` below.

With ``model.bias: true`` and a tied head this is GPT-2's computation exactly (``model.arch:
gpt2``); ``convert_weights.py`` maps Hugging Face's names onto these.
"""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import Normal, initializer

LN_EPS = 1e-5  # LayerNorm epsilon of GPT-2 (and PyTorch); MindSpore's default is 1e-7


def gelu(x):
    """GELU, tanh approximation (as GPT-2), from elementwise ops: on CPU the whole training
    step ran ~20% faster than with ``nn.GELU``'s kernels."""
    return 0.5 * x * (1.0 + ops.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


class CausalSelfAttention(nn.Cell):
    def __init__(self, d_model: int, n_head: int, block_size: int, dropout: float, proj_std: float, bias: bool):
        super().__init__()
        self.n_head, self.d_head = n_head, d_model // n_head
        self.scale = 1.0 / math.sqrt(self.d_head)
        self.qkv = nn.Dense(d_model, 3 * d_model, weight_init=Normal(0.02), has_bias=bias)
        self.proj = nn.Dense(d_model, d_model, weight_init=Normal(proj_std), has_bias=bias)
        self.attn_drop, self.resid_drop = nn.Dropout(p=dropout), nn.Dropout(p=dropout)
        # True above the diagonal: position t may not look at positions after t.
        self.future = Tensor(np.triu(np.ones((block_size, block_size), dtype=bool), k=1))

    def construct(self, x):  # (B, T, C) -> (B, T, C)
        b, t, c = x.shape
        q, k, v = ops.split(self.qkv(x), c, axis=-1)  # 3 x (B, T, C)
        q = q.reshape(b, t, self.n_head, self.d_head).transpose(0, 2, 1, 3)  # (B, H, T, D)
        k = k.reshape(b, t, self.n_head, self.d_head).transpose(0, 2, 3, 1)  # (B, H, D, T): K already transposed
        v = v.reshape(b, t, self.n_head, self.d_head).transpose(0, 2, 1, 3)  # (B, H, T, D)
        scores = ops.matmul(q, k) * self.scale  # (B, H, T, T)
        scores = ops.masked_fill(scores, self.future[:t, :t], float("-inf"))
        weights = self.attn_drop(ops.softmax(scores, axis=-1))
        y = ops.matmul(weights, v).transpose(0, 2, 1, 3).reshape(b, t, c)  # heads side by side again
        return self.resid_drop(self.proj(y))


class MLP(nn.Cell):
    def __init__(self, d_model: int, hidden: int, dropout: float, proj_std: float, bias: bool):
        super().__init__()
        self.fc = nn.Dense(d_model, hidden, weight_init=Normal(0.02), has_bias=bias)
        self.proj = nn.Dense(hidden, d_model, weight_init=Normal(proj_std), has_bias=bias)
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


class GPT(nn.Cell):
    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, d_model: int,
                 mlp_ratio: int = 4, dropout: float = 0.0, tie_embeddings: bool = True, bias: bool = False):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model, embedding_table=Normal(0.02))
        self.position_embedding = Parameter(initializer(Normal(0.02), (block_size, d_model)),
                                            name="position_embedding")
        self.drop = nn.Dropout(p=dropout)
        proj_std = 0.02 / math.sqrt(2 * n_layer)  # residual projections scaled down with depth (GPT-2)
        self.blocks = nn.SequentialCell([Block(d_model, n_head, block_size, mlp_ratio, dropout, proj_std, bias)
                                         for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm((d_model,), epsilon=LN_EPS)
        self.tied = tie_embeddings
        self.head = nn.Identity() if tie_embeddings else nn.Dense(d_model, vocab_size, has_bias=False,
                                                                  weight_init=Normal(0.02))

    def construct(self, tokens):  # (B, T) int32, T <= block_size -> logits (B, T, vocab)
        t = tokens.shape[1]
        x = self.drop(self.token_embedding(tokens) + self.position_embedding[:t])  # (B, T, C)
        x = self.ln_f(self.blocks(x))
        if self.tied:  # (B, T, C) @ (C, vocab); the cast matters only under mixed precision
            return ops.matmul(x, self.token_embedding.embedding_table.astype(x.dtype).T)
        return self.head(x)


class LanguageModelLoss(nn.Cell):
    """Mean cross-entropy of predicting token t+1 from tokens 0..t, over every position."""

    def __init__(self, network: nn.Cell):
        super().__init__()
        self.network = network
        # One fused softmax + NLL kernel: much cheaper on CPU than nn.CrossEntropyLoss's small ops.
        self.cross_entropy = ops.SparseSoftmaxCrossEntropyWithLogits()

    def construct(self, tokens):  # (B, T + 1) int32
        logits = self.network(tokens[:, :-1])  # (B, T, vocab)
        targets = tokens[:, 1:]  # the same blocks shifted left by one
        return self.cross_entropy(logits.reshape(-1, logits.shape[-1]).astype(ms.float32), targets.reshape(-1))
