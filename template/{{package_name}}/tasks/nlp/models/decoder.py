"""One configurable decoder for every Llama-descended family, in Hugging Face's layout.

Token embedding, blocks of grouped-query attention with rotary position embeddings (``rope.py``)
and a gated MLP, a final RMSNorm and a head over the vocabulary (its own matrix, or tied to the
embedding). Parameters are named as ``LlamaForCausalLM`` names its own
(``model.layers.0.self_attn.q_proj.weight``...); what each family calls them, and the config.json
keys that set the traits below, are its layout (``hf/layouts/``).

- Grouped-query attention: a key/value head's G query heads are the rows of one (G * T, D) matrix,
  keys kept as (B, KV, D, T): one batched matmul. Memory (MindSpore 2.10, CPU): broadcasts are
  explicit ``ops.broadcast_to`` and axes move with ``mint.permute`` (implicit ones keep index tables).
- Family traits (``model.*``, each default Llama's): biases (``bias`` q/k/v as Qwen2, ``o_bias``,
  ``mlp_bias``); ``qk_norm`` per head (Qwen3, Gemma-3) or across heads (OLMo-2); ``norm_layout``
  pre / post (OLMo-2) / sandwich (Gemma, GLM-4) and ``norm_offset`` (Gemma's 1 + weight);
  ``activation`` (Gemma's tanh GELU); ``embedding_scale``, ``residual_scale``, ``attention_scale``
  and ``logits_scaling`` (Gemma, Granite); soft-capped scores and logits (Gemma-2); RoPE on a
  ``rotary_fraction`` of each head (Phi-4-mini, GLM-4), not at all in ``nope_layers`` (SmolLM3),
  with ``local_rope_theta`` in sliding layers (Gemma-3); a ``sliding_window`` in the layers
  ``layer_types`` names (Mistral, Gemma); ``rope_scaling`` of any type ``rope.py`` computes.
- Mixed precision: RMSNorm and the attention softmax compute in float32 (``FLOAT32_CELLS``);
  the output is float32. LoRA (``model.lora``): the ``targets`` are ``lora.LoRADense``.

``prefill`` / ``step`` are the forward pass split for incremental decoding with a key/value
cache per layer, with the signatures ``generate.py`` uses for every arch.
"""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from ....models.transformer import Softmax32
from .layers import Embedding, RMSNorm, linear, norm_or_identity, permute
from .rope import rope_tables, rotate

FLOAT32_CELLS = (RMSNorm, Softmax32)  # kept float32 under amp O2 (engine/step.py's black list)


def head_width(m) -> int:
    return m.head_dim or m.d_model // m.n_head


def rotary_width(m) -> int:  # the dims of each head RoPE turns
    return int(head_width(m) * m.rotary_fraction)


def is_sliding(m, layer: int) -> bool:
    return m.sliding_window is not None and (m.layer_types is None or m.layer_types[layer] == "sliding_attention")


def hidden_positions(block_size: int, window: int | None) -> Tensor:
    """(T, T) True where query q may not look at key k: the future, and past the window."""
    q, k = np.indices((block_size, block_size))
    return Tensor((k > q) | (q - k >= window if window else False))


class LlamaAttention(nn.Cell):
    def __init__(self, m, layer: int, lora=None):
        super().__init__()
        n_head, n_kv, d_head, d_model = m.n_head, m.n_kv_head or m.n_head, head_width(m), m.d_model
        self.n_kv, self.groups, self.d_head = n_kv, n_head // n_kv, d_head
        self.scale = m.attention_scale or 1.0 / math.sqrt(d_head)
        self.softcap, self.rope = m.attn_softcap, layer not in m.nope_layers
        self.window = m.sliding_window if is_sliding(m, layer) else None
        self.q_proj = linear(d_model, n_head * d_head, m.bias, "q_proj", lora)
        self.k_proj = linear(d_model, n_kv * d_head, m.bias, "k_proj", lora)
        self.v_proj = linear(d_model, n_kv * d_head, m.bias, "v_proj", lora)
        self.o_proj = linear(n_head * d_head, d_model, m.o_bias, "o_proj", lora)
        # queries and keys RMS-normalised before RoPE: each head (Qwen3) or all heads at once (OLMo-2)
        self.across = m.qk_norm == "all"
        widths = (n_head * d_head, n_kv * d_head) if self.across else (d_head, d_head)
        self.q_norm, self.k_norm = (norm_or_identity(m.qk_norm != "none", width, m) for width in widths)
        self.softmax = Softmax32()
        self.future = hidden_positions(m.block_size, self.window)  # True: may not look

    def heads(self, x, cos, sin):
        """(B, T, C) -> q (B, KV, G, T, D), k (B, KV, D, T): transposed, v (B, KV, T, D); rotated."""
        b, t, _ = x.shape
        q, k = self.q_proj(x), self.k_proj(x)
        if self.across:
            q, k = self.q_norm(q), self.k_norm(k)
        q = permute(q.reshape(b, t, self.n_kv, self.groups, self.d_head), (0, 2, 3, 1, 4))
        k = permute(k.reshape(b, t, self.n_kv, self.d_head), (0, 2, 1, 3))
        if not self.across:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope:
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        v = permute(self.v_proj(x).reshape(b, t, self.n_kv, self.d_head), (0, 2, 1, 3))
        return q, permute(k, (0, 1, 3, 2)), v

    def attend(self, q, k, v, hidden):  # hidden: True where a query may not look, (Tq, Tk), (Tk,) or (B, 1, 1, Tq, Tk)
        b, kv, g, t, d = q.shape  # the G query heads of a key/value head as the rows of one matrix
        scores = ops.matmul(q.reshape(b, kv, g * t, d), k) * self.scale  # (B, KV, G * Tq, Tk)
        if self.softcap:
            scores = ops.tanh(scores / self.softcap) * self.softcap
        hidden = ops.broadcast_to(hidden, (b, kv, g, t, k.shape[-1])).reshape(scores.shape)
        weights = self.softmax(ops.where(hidden, float("-inf"), scores))
        y = ops.matmul(weights, v).reshape(b, kv, g, t, d)
        return self.o_proj(permute(y, (0, 3, 1, 2, 4)).reshape(b, t, -1))  # (B, T, H * D)

    def construct(self, x, cos, sin):  # (B, T, C) -> (B, T, C)
        return self.prefill(x, cos, sin)[0]

    def prefill(self, x, cos, sin, padding=None):  # -> output (B, T, C) and this layer's keys and values
        q, k, v = self.heads(x, cos, sin)
        t = x.shape[1]
        hidden = self.future[:t, :t]
        if padding is not None:  # (B, 1, 1, T, T): left padding's keys, hidden too
            hidden = ops.logical_or(ops.broadcast_to(hidden, padding.shape), padding)
        return self.attend(q, k, v, hidden), k, v

    def step(self, x, cos, sin, k_cache, v_cache, slot, hidden):
        """x (B, 1, C) at position ``pos`` (``slot``: the one-hot (T,) mask of it; cos/sin (1, R))."""
        q, k, v = self.heads(x, cos, sin)  # k (B, KV, D, 1), v (B, KV, 1, D)
        k_cache = ops.where(slot, k, k_cache)  # (B, KV, D, T)
        v_cache = ops.where(slot.reshape(-1, 1), v, v_cache)  # (B, KV, T, D)
        return self.attend(q, k_cache, v_cache, hidden), k_cache, v_cache


class LlamaMLP(nn.Cell):
    """Gated: down(act(gate(x)) * up(x)); SiLU from elementwise ops (cheaper kernels on CPU)."""

    def __init__(self, m, lora=None):
        super().__init__()
        d_ff = m.d_ff or m.mlp_ratio * m.d_model
        self.gate_proj = linear(m.d_model, d_ff, m.mlp_bias, "gate_proj", lora)
        self.up_proj = linear(m.d_model, d_ff, m.mlp_bias, "up_proj", lora)
        self.down_proj = linear(d_ff, m.d_model, m.mlp_bias, "down_proj", lora)
        self.silu = m.activation == "silu"

    def construct(self, x):
        gate = self.gate_proj(x)
        gate = gate * ops.sigmoid(gate) if self.silu else ops.gelu(gate, approximate="tanh")
        return self.down_proj(gate * self.up_proj(x))


class LlamaDecoderLayer(nn.Cell):
    """x + s * post(attn(pre(x))), then x + s * post(mlp(pre(x))): the norms ``norm_layout`` has (pre:
    Llama's input/post_attention_layernorm; post: GLM-4's post_self_attn/post_mlp_layernorm)."""

    def __init__(self, m, layer: int, lora=None):
        super().__init__()
        pre, post = m.norm_layout != "post", m.norm_layout != "pre"
        self.input_layernorm = norm_or_identity(pre, m.d_model, m)
        self.self_attn = LlamaAttention(m, layer, lora)
        self.post_self_attn_layernorm = norm_or_identity(post, m.d_model, m)
        self.post_attention_layernorm = norm_or_identity(pre, m.d_model, m)  # before the MLP (Llama's name)
        self.mlp = LlamaMLP(m, lora)
        self.post_mlp_layernorm = norm_or_identity(post, m.d_model, m)
        self.residual_scale = m.residual_scale

    def add(self, x, y):
        return x + y * self.residual_scale if self.residual_scale != 1.0 else x + y

    def feed_forward(self, x):
        return self.add(x, self.post_mlp_layernorm(self.mlp(self.post_attention_layernorm(x))))

    def prefill(self, x, cos, sin, padding=None):
        y, k, v = self.self_attn.prefill(self.input_layernorm(x), cos, sin, padding)
        return self.feed_forward(self.add(x, self.post_self_attn_layernorm(y))), k, v

    def construct(self, x, cos, sin):
        return self.prefill(x, cos, sin)[0]

    def step(self, x, cos, sin, k_cache, v_cache, slot, hidden):
        y, k_cache, v_cache = self.self_attn.step(self.input_layernorm(x), cos, sin, k_cache, v_cache, slot, hidden)
        return self.feed_forward(self.add(x, self.post_self_attn_layernorm(y))), k_cache, v_cache


class LlamaModel(nn.Cell):
    def __init__(self, vocab_size: int, m, lora=None):
        super().__init__()
        self.embed_tokens = Embedding(vocab_size, m.d_model)
        self.layers = nn.CellList([LlamaDecoderLayer(m, i, lora) for i in range(m.n_layer)])
        self.norm = RMSNorm(m.d_model, m.norm_eps, m.norm_offset)


class Llama(nn.Cell):
    """``LlamaForCausalLM`` and its kin: tokens (B, T) int32, T <= block_size -> logits (B, T, V) float32."""

    def __init__(self, vocab_size: int, m):
        super().__init__()
        self.model = LlamaModel(vocab_size, m, m.lora)
        self.tied, self.block_size = m.tie_embeddings, m.block_size
        self.embedding_scale, self.final_softcap, self.logits_scaling = (m.embedding_scale, m.final_softcap,
                                                                          m.logits_scaling)
        d_rot = rotary_width(m)
        self.cos, self.sin = rope_tables(m.block_size, d_rot, m.rope_theta, m.rope_scaling)
        local = m.local_rope_theta is not None  # Gemma-3: sliding layers turn at their own base, unscaled
        self.local_cos, self.local_sin = (rope_tables(m.block_size, d_rot, m.local_rope_theta) if local
                                          else (self.cos, self.sin))
        self.local = tuple(local and is_sliding(m, i) for i in range(m.n_layer))
        self.matmul_transposed = ops.MatMul(transpose_b=True)
        self.lm_head = nn.Identity() if m.tie_embeddings else linear(m.d_model, vocab_size, False, "lm_head", m.lora)
        self.num_layers = m.n_layer + 1  # optim.layer_decay: embeddings 0, layers 1..n, norm and lm_head n + 1
        self.left_pads = True  # prefill/step take a left padding (batched generation): RoPE is relative

    def layer_id(self, name: str) -> int:
        """A parameter's layer (optim.layer_decay): embed_tokens 0 (tied, the output projection with
        it), model.layers.i i + 1 (its LoRA adapters too), the final norm and lm_head last."""
        if name.startswith("model.layers."):
            return int(name.split(".")[2]) + 1
        return 0 if name.startswith("model.embed_tokens.") else self.num_layers

    def construct(self, tokens):
        return self.prefill(tokens)[0]

    def embed(self, tokens):
        x = self.model.embed_tokens(tokens)
        return x * self.embedding_scale if self.embedding_scale != 1.0 else x

    def logits(self, x):  # (B, T, C) -> (B, T, vocab) float32
        x = self.model.norm(x)
        if self.tied:  # one 2-D product with transpose_b (see model.GPT.logits)
            b, t, c = x.shape
            table = self.model.embed_tokens.weight.astype(x.dtype)
            logits = self.matmul_transposed(x.reshape(b * t, c), table).reshape(b, t, -1).astype(ms.float32)
        else:
            logits = self.lm_head(x).astype(ms.float32)
        if self.logits_scaling != 1.0:
            logits = logits / self.logits_scaling
        if self.final_softcap:
            logits = ops.tanh(logits / self.final_softcap) * self.final_softcap
        return logits

    def tables(self, i: int, cos, sin, local_cos, local_sin):
        return (local_cos, local_sin) if self.local[i] else (cos, sin)

    def prefill(self, tokens, pad=None):  # (B, T) -> logits, keys (B, KV, D, T) and values (B, KV, T, D) per layer
        """``pad`` (B,) int32: rows left-padded by that many tokens (batched generation), whose keys
        no query sees (a pad query sees itself: no empty softmax). RoPE's scores depend only on
        the distance between positions, so a row shifted right computes as it would unpadded."""
        t = tokens.shape[1]
        padding = None if pad is None else self.left_padding(pad, t)
        cos, sin, local_cos, local_sin = self.cos[:t], self.sin[:t], self.local_cos[:t], self.local_sin[:t]
        x = self.embed(tokens)
        keys, values = (), ()
        for i, layer in enumerate(self.model.layers):
            x, k, v = layer.prefill(x, *self.tables(i, cos, sin, local_cos, local_sin), padding)
            keys += (k,)
            values += (v,)
        return self.logits(x), keys, values

    def left_padding(self, pad, t: int):  # (B,) -> (B, 1, 1, T, T): keys of the left padding, but a query's own
        b, positions = pad.shape[0], ops.arange(t, dtype=ms.int32)
        padded = ops.broadcast_to(positions.reshape(1, 1, t) < pad.reshape(b, 1, 1), (b, t, t))
        other = ops.broadcast_to(positions.reshape(t, 1) != positions.reshape(1, t), (b, t, t))
        return ops.logical_and(padded, other).reshape(b, 1, 1, t, t)

    def step(self, token, pos, keys, values, pad=None):  # token (B, 1) int32 at position pos ((1,) int32)
        """Logits (B, 1, vocab) of the next token and the caches with position ``pos`` filled in."""
        positions = ops.arange(self.block_size, dtype=ms.int32)
        slot, hidden = positions == pos, positions > pos  # (T,) each
        if pad is not None:  # (B, 1, 1, 1, T): each row's left padding hidden too
            b = pad.shape[0]
            hidden = ops.logical_or(ops.broadcast_to(hidden, (b, self.block_size)),
                                    positions.reshape(1, -1) < pad.reshape(b, 1)).reshape(b, 1, 1, 1, -1)
        cos, sin = ops.gather(self.cos, pos, 0), ops.gather(self.sin, pos, 0)  # (1, R)
        local_cos, local_sin = ops.gather(self.local_cos, pos, 0), ops.gather(self.local_sin, pos, 0)
        x = self.embed(token)  # (B, 1, C)
        new_keys, new_values = (), ()
        for i, layer in enumerate(self.model.layers):
            window = layer.self_attn.window
            seen = hidden if window is None else ops.logical_or(hidden, ops.broadcast_to(positions <= pos - window,
                                                                                          hidden.shape))
            x, k_cache, v_cache = layer.step(x, *self.tables(i, cos, sin, local_cos, local_sin), keys[i], values[i],
                                             slot, seen)
            new_keys += (k_cache,)
            new_values += (v_cache,)
        return self.logits(x), new_keys, new_values
