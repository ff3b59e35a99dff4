"""A decoder-only Transformer (GPT-style): token + learned position embeddings, pre-LayerNorm
blocks of causal self-attention and an MLP, a final LayerNorm and a linear head over the
vocabulary (optionally tied to the token embedding).

The blocks are ``models/transformer.py`` (with the CPU speed choices, measured on MindSpore
2.10: see the README); here: no bias vectors in the linear layers by default (``model.bias``; as
nanoGPT, no worse without), the tied head as one 2-D matmul (the fused cross-entropy: ``loss.py``).

``GPT.prefill`` and ``GPT.step`` are the same computation split for incremental decoding
with a key/value cache per layer (``generate.py``); training and export use ``construct``.

With ``model.bias: true`` and a tied head this is GPT-2's computation exactly (``model.arch:
gpt2``); ``convert_weights.py`` maps Hugging Face's names onto these.
"""

from __future__ import annotations

import math

import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import Normal, initializer

from ....models.transformer import LN_EPS, Block


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
        self.tied, self.block_size = tie_embeddings, block_size
        self.matmul_transposed = ops.MatMul(transpose_b=True)
        self.head = nn.Identity() if tie_embeddings else nn.Dense(d_model, vocab_size, has_bias=False,
                                                                  weight_init=Normal(0.02))
        self.num_layers = n_layer + 1  # optim.layer_decay: embeddings 0, blocks 1..n, ln_f and head n + 1

    def layer_id(self, name: str) -> int:
        """A parameter's layer (optim.layer_decay): the embeddings 0 (tied, the output projection with
        them), block i i + 1, the final LayerNorm and an untied head last."""
        if name.startswith("blocks."):
            return int(name.split(".")[1]) + 1
        return 0 if "embedding" in name else self.num_layers

    def construct(self, tokens):  # (B, T) int32, T <= block_size -> logits (B, T, vocab)
        t = tokens.shape[1]
        x = self.drop(self.token_embedding(tokens) + self.position_embedding[:t])  # (B, T, C)
        return self.logits(self.blocks(x)).astype(ms.float32)  # float32 under mixed precision too

    def logits(self, x):  # (B, T, C) -> (B, T, vocab)
        x = self.ln_f(x)
        if not self.tied:
            return self.head(x)
        # (B*T, C) x (vocab, C)^T as one 2-D product with transpose_b: ops.matmul(x, table.T)
        # on the 3-D x copied the transposed table and broadcast it per call (8k vocab, d=256:
        # a one-token step took 25 ms instead of 4). The cast matters only under mixed precision.
        t, c = x.shape[1], x.shape[2]
        table = self.token_embedding.embedding_table.astype(x.dtype)  # (vocab, C)
        return self.matmul_transposed(x.reshape(-1, c), table).reshape(-1, t, table.shape[0])  # -1: the batch

    # Incremental decoding (generate.py). The key/value caches have a fixed length of
    # block_size, so each of the two functions below compiles to one static-shape graph.

    def prefill(self, tokens):  # (B, T) -> logits (B, T, vocab), keys and values of every layer
        """The forward pass of ``construct`` that also returns each layer's keys (B, H, D, T)
        and values (B, H, T, D): with T = block_size they are the caches for ``step``."""
        t = tokens.shape[1]
        x = self.drop(self.token_embedding(tokens) + self.position_embedding[:t])
        keys, values = (), ()
        for block in self.blocks:
            x, k, v = block.prefill(x)
            keys += (k,)
            values += (v,)
        return self.logits(x), keys, values

    def step(self, token, pos, keys, values):  # token (B, 1) int32 at position pos ((1,) int32)
        """Logits (B, 1, vocab) of the next token and the caches with position ``pos`` filled in;
        only positions 0..pos are attended to (later cache slots hold stale or padding values)."""
        positions = ops.arange(self.block_size, dtype=ms.int32)
        slot, hidden = positions == pos, positions > pos  # (T,) each
        x = self.token_embedding(token) + ops.gather(self.position_embedding, pos, 0)  # (B, 1, C)
        new_keys, new_values = (), ()
        for i, block in enumerate(self.blocks):
            x, k_cache, v_cache = block.step(x, keys[i], values[i], slot, hidden)
            new_keys += (k_cache,)
            new_values += (v_cache,)
        return self.logits(x), new_keys, new_values
