"""A Llama-family decoder (Llama 2/3.x, TinyLlama, SmolLM2, Mistral, Qwen2/2.5/3) in Hugging Face's layout.

Token embedding, pre-RMSNorm blocks of grouped-query attention with rotary position
embeddings (RoPE) and a SwiGLU MLP, a final RMSNorm and a head over the vocabulary (its own
matrix, or tied to the embedding). The parameters are named as ``LlamaForCausalLM`` /
``Qwen2ForCausalLM`` name theirs (``model.layers.0.self_attn.q_proj.weight``...), so
importing their weights (``convert_weights.py``) is a name-for-name copy.

- Grouped-query attention: ``n_kv_head`` key/value heads, each shared by ``n_head / n_kv_head``
  query heads. The G query heads of a key/value head are the rows of one (G * T, D) matrix and
  the keys are kept as (B, KV, D, T): one plain batched matmul, keys and values never repeated.
- Memory (MindSpore 2.10, CPU, compiled): an elementwise op that broadcasts, and ``Tensor.transpose``,
  keep index tables of up to 4x their output alive per graph node; so every broadcast here is an
  explicit ``ops.broadcast_to`` (softmax's backward too) and axes move with ``mint.permute``
  (the ~100 M model's fine-tuning peak: see the README).
- ``bias``: biases on q/k/v only, as Qwen2 has them (o_proj and the MLP never have one).
- ``head_dim`` may differ from d_model / n_head, and ``qk_norm`` RMS-normalises each query and
  key head before RoPE (Qwen3's ``q_norm`` / ``k_norm``).
- ``rope_scaling``: Llama-3.x's ``llama3`` frequencies, or ``linear`` (positions / factor).
- ``vocab_size`` is the embedding's rows, which may exceed the tokenizer's tokens (Qwen2.5 pads them).
- Mixed precision: RMSNorm and the attention softmax compute in float32 (``FLOAT32_CELLS``
  stay float32 under O2 as well); the network's output is float32.
- LoRA (``model.lora``): the projections named in its ``targets`` are ``lora.LoRADense``.

``prefill`` / ``step`` are the forward pass split for incremental decoding with a key/value
cache per layer, with the signatures ``generate.py`` uses for every arch.
"""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, mint, nn, ops
from mindspore.common.initializer import Normal, initializer

from ...models.transformer import Softmax32
from .lora import LoRADense


class RMSNorm(nn.Cell):
    """x / rms(x) * weight, computed in float32 (as Hugging Face's ``LlamaRMSNorm``)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = Parameter(initializer("ones", (dim,)), name="weight")
        self.eps = eps

    def construct(self, x):
        dtype = x.dtype
        x = x.astype(ms.float32)
        x = x * ops.broadcast_to(ops.rsqrt((x * x).mean(-1, keep_dims=True) + self.eps), x.shape)
        return ops.broadcast_to(self.weight, x.shape) * x.astype(dtype)


FLOAT32_CELLS = (RMSNorm, Softmax32)  # kept float32 under amp O2 (engine/step.py's black list)


def inverse_frequencies(d_head: int, theta: float, scaling=None) -> np.ndarray:
    """RoPE's (D/2,) rotation speeds as transformers computes them (``rope_type`` default, linear, llama3)."""
    inv_freq = 1.0 / theta ** (np.arange(0, d_head, 2, dtype=np.float64) / d_head)
    if scaling is None:
        return inv_freq
    if scaling.type == "linear":
        return inv_freq / scaling.factor
    # llama3: wavelengths longer than the original context / low_freq_factor slow down by
    # factor, shorter than it / high_freq_factor stay, those between are interpolated.
    context, low, high = scaling.original_max_position_embeddings, scaling.low_freq_factor, scaling.high_freq_factor
    wavelength = 2 * math.pi / inv_freq
    scaled = np.where(wavelength > context / low, inv_freq / scaling.factor, inv_freq)
    smooth = (context / wavelength - low) / (high - low)
    smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    medium = (wavelength >= context / high) & (wavelength <= context / low)
    return np.where(medium, smoothed, scaled)


def rope_tables(block_size: int, d_head: int, theta: float, scaling=None) -> tuple[Tensor, Tensor]:
    """cos and sin (block_size, d_head) of Hugging Face's RoPE: frequency i of the first half
    repeated in the second half (the ``rotate_half`` convention)."""
    inv_freq = inverse_frequencies(d_head, theta, scaling)  # (D/2,)
    angles = np.outer(np.arange(block_size, dtype=np.float64), inv_freq)  # (T, D/2)
    angles = np.concatenate([angles, angles], axis=-1)  # (T, D)
    return Tensor(np.cos(angles).astype(np.float32)), Tensor(np.sin(angles).astype(np.float32))


def rotate(x, cos, sin):  # x (..., T, D), cos/sin (T, D): RoPE
    x1, x2 = ops.split(x, x.shape[-1] // 2, axis=-1)
    cos, sin = ops.broadcast_to(cos.astype(x.dtype), x.shape), ops.broadcast_to(sin.astype(x.dtype), x.shape)
    return x * cos + ops.cat((-x2, x1), axis=-1) * sin


def permute(x, axes: tuple[int, ...]):
    """``mint.permute``; a reshape when the axes that move all have length 1 (decoding one token:
    a faster graph)."""
    moving = [axis for axis in axes if x.shape[axis] != 1]
    if moving == sorted(moving):
        return x.reshape(tuple(x.shape[axis] for axis in axes))
    return mint.permute(x, axes)


def linear(d_in: int, d_out: int, bias: bool, name: str, lora) -> nn.Dense:
    """``nn.Dense`` (weight (out, in)), or a ``LoRADense`` when ``name`` is a LoRA target."""
    if lora is not None and lora.rank > 0 and name in lora.targets:
        return LoRADense(d_in, d_out, bias, lora.rank, lora.alpha, lora.dropout)
    return nn.Dense(d_in, d_out, weight_init=Normal(0.02), has_bias=bias, bias_init="zeros")


class LlamaAttention(nn.Cell):
    def __init__(self, d_model: int, n_head: int, n_kv_head: int, d_head: int, block_size: int, bias: bool,
                 eps: float, qk_norm: bool, lora=None):
        super().__init__()
        self.n_kv, self.groups, self.d_head = n_kv_head, n_head // n_kv_head, d_head
        self.scale = 1.0 / math.sqrt(self.d_head)
        self.q_proj = linear(d_model, n_head * d_head, bias, "q_proj", lora)
        self.k_proj = linear(d_model, n_kv_head * d_head, bias, "k_proj", lora)
        self.v_proj = linear(d_model, n_kv_head * d_head, bias, "v_proj", lora)
        self.o_proj = linear(n_head * d_head, d_model, False, "o_proj", lora)
        # Qwen3: each head's query and key RMS-normalised (one weight per head width) before RoPE
        norms = (RMSNorm(d_head, eps), RMSNorm(d_head, eps)) if qk_norm else (nn.Identity(), nn.Identity())
        self.q_norm, self.k_norm = norms
        self.softmax = Softmax32()
        self.future = Tensor(np.triu(np.ones((block_size, block_size), dtype=bool), k=1))  # True: may not look

    def heads(self, x, cos, sin):
        """(B, T, C) -> q (B, KV, G, T, D), k (B, KV, D, T): transposed, v (B, KV, T, D); rotated."""
        b, t, _ = x.shape
        q = permute(self.q_proj(x).reshape(b, t, self.n_kv, self.groups, self.d_head), (0, 2, 3, 1, 4))
        k = permute(self.k_proj(x).reshape(b, t, self.n_kv, self.d_head), (0, 2, 1, 3))
        q, k = self.q_norm(q), self.k_norm(k)
        v = permute(self.v_proj(x).reshape(b, t, self.n_kv, self.d_head), (0, 2, 1, 3))
        return rotate(q, cos, sin), permute(rotate(k, cos, sin), (0, 1, 3, 2)), v

    def attend(self, q, k, v, hidden):  # hidden: True where a query may not look, (Tq, Tk) or (Tk,)
        b, kv, g, t, d = q.shape  # the G query heads of a key/value head as the rows of one matrix
        scores = ops.matmul(q.reshape(b, kv, g * t, d), k) * self.scale  # (B, KV, G * Tq, Tk)
        hidden = ops.broadcast_to(hidden, (b, kv, g, t, k.shape[-1])).reshape(scores.shape)
        weights = self.softmax(ops.masked_fill(scores, hidden, float("-inf")))
        y = ops.matmul(weights, v).reshape(b, kv, g, t, d)
        return self.o_proj(permute(y, (0, 3, 1, 2, 4)).reshape(b, t, -1))  # (B, T, H * D)

    def construct(self, x, cos, sin):  # (B, T, C) -> (B, T, C)
        return self.prefill(x, cos, sin)[0]

    def prefill(self, x, cos, sin):  # -> output (B, T, C) and this layer's keys and values
        q, k, v = self.heads(x, cos, sin)
        t = x.shape[1]
        return self.attend(q, k, v, self.future[:t, :t]), k, v

    def step(self, x, cos, sin, k_cache, v_cache, slot, hidden):
        """x (B, 1, C) at position ``pos`` (``slot``: the one-hot (T,) mask of it; cos/sin (1, D))."""
        q, k, v = self.heads(x, cos, sin)  # k (B, KV, D, 1), v (B, KV, 1, D)
        k_cache = ops.where(slot, k, k_cache)  # (B, KV, D, T)
        v_cache = ops.where(slot.reshape(-1, 1), v, v_cache)  # (B, KV, T, D)
        return self.attend(q, k_cache, v_cache, hidden), k_cache, v_cache


class LlamaMLP(nn.Cell):
    """SwiGLU: down(silu(gate(x)) * up(x)); SiLU from elementwise ops (cheaper kernels on CPU)."""

    def __init__(self, d_model: int, d_ff: int, lora=None):
        super().__init__()
        self.gate_proj = linear(d_model, d_ff, False, "gate_proj", lora)
        self.up_proj = linear(d_model, d_ff, False, "up_proj", lora)
        self.down_proj = linear(d_ff, d_model, False, "down_proj", lora)

    def construct(self, x):
        gate = self.gate_proj(x)
        return self.down_proj(gate * ops.sigmoid(gate) * self.up_proj(x))


class LlamaDecoderLayer(nn.Cell):
    """x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, d_model, n_head, n_kv_head, d_head, d_ff, block_size, bias, eps, qk_norm, lora=None):
        super().__init__()
        self.input_layernorm = RMSNorm(d_model, eps)
        self.self_attn = LlamaAttention(d_model, n_head, n_kv_head, d_head, block_size, bias, eps, qk_norm, lora)
        self.post_attention_layernorm = RMSNorm(d_model, eps)
        self.mlp = LlamaMLP(d_model, d_ff, lora)

    def prefill(self, x, cos, sin):
        y, k, v = self.self_attn.prefill(self.input_layernorm(x), cos, sin)
        x = x + y
        return x + self.mlp(self.post_attention_layernorm(x)), k, v

    def construct(self, x, cos, sin):
        return self.prefill(x, cos, sin)[0]

    def step(self, x, cos, sin, k_cache, v_cache, slot, hidden):
        y, k_cache, v_cache = self.self_attn.step(self.input_layernorm(x), cos, sin, k_cache, v_cache, slot, hidden)
        x = x + y
        return x + self.mlp(self.post_attention_layernorm(x)), k_cache, v_cache


class Embedding(nn.Cell):
    """A lookup table named ``weight``, as Hugging Face's ``embed_tokens``."""

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.weight = Parameter(initializer(Normal(0.02), (vocab_size, d_model)), name="weight")

    def construct(self, tokens):  # (B, T) int32 -> (B, T, C)
        return ops.gather(self.weight, tokens, 0)


class LlamaModel(nn.Cell):
    def __init__(self, vocab_size, d_model, n_layer, n_head, n_kv_head, d_head, d_ff, block_size, bias, eps,
                 qk_norm, lora=None):
        super().__init__()
        self.embed_tokens = Embedding(vocab_size, d_model)
        self.layers = nn.CellList([LlamaDecoderLayer(d_model, n_head, n_kv_head, d_head, d_ff, block_size, bias, eps,
                                                     qk_norm, lora) for _ in range(n_layer)])
        self.norm = RMSNorm(d_model, eps)


class Llama(nn.Cell):
    """``LlamaForCausalLM``: tokens (B, T) int32, T <= block_size -> logits (B, T, vocab) float32."""

    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, d_model: int, d_ff: int,
                 n_kv_head: int | None = None, rope_theta: float = 10000.0, norm_eps: float = 1e-6,
                 tie_embeddings: bool = False, bias: bool = False, lora=None, head_dim: int | None = None,
                 qk_norm: bool = False, rope_scaling=None):
        super().__init__()
        n_kv_head, head_dim = n_kv_head or n_head, head_dim or d_model // n_head
        self.model = LlamaModel(vocab_size, d_model, n_layer, n_head, n_kv_head, head_dim, d_ff, block_size, bias,
                                norm_eps, qk_norm, lora)
        self.tied, self.block_size = tie_embeddings, block_size
        self.cos, self.sin = rope_tables(block_size, head_dim, rope_theta, rope_scaling)
        self.matmul_transposed = ops.MatMul(transpose_b=True)
        self.lm_head = nn.Identity() if tie_embeddings else linear(d_model, vocab_size, False, "lm_head", lora)
        self.num_layers = n_layer + 1  # optim.layer_decay: embeddings 0, layers 1..n, norm and lm_head n + 1

    def layer_id(self, name: str) -> int:
        """A parameter's layer (optim.layer_decay): embed_tokens 0 (tied, the output projection with
        it), model.layers.i i + 1 (its LoRA adapters too), the final norm and lm_head last."""
        if name.startswith("model.layers."):
            return int(name.split(".")[2]) + 1
        return 0 if name.startswith("model.embed_tokens.") else self.num_layers

    def construct(self, tokens):
        return self.prefill(tokens)[0]

    def logits(self, x):  # (B, T, C) -> (B, T, vocab) float32
        x = self.model.norm(x)
        if not self.tied:
            return self.lm_head(x).astype(ms.float32)
        b, t, c = x.shape  # one 2-D product with transpose_b (see model.GPT.logits)
        table = self.model.embed_tokens.weight.astype(x.dtype)
        return self.matmul_transposed(x.reshape(b * t, c), table).reshape(b, t, -1).astype(ms.float32)

    def prefill(self, tokens):  # (B, T) -> logits, keys (B, KV, D, T) and values (B, KV, T, D) per layer
        t = tokens.shape[1]
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.model.embed_tokens(tokens)
        keys, values = (), ()
        for layer in self.model.layers:
            x, k, v = layer.prefill(x, cos, sin)
            keys += (k,)
            values += (v,)
        return self.logits(x), keys, values

    def step(self, token, pos, keys, values):  # token (B, 1) int32 at position pos ((1,) int32)
        """Logits (B, 1, vocab) of the next token and the caches with position ``pos`` filled in."""
        positions = ops.arange(self.block_size, dtype=ms.int32)
        slot, hidden = positions == pos, positions > pos  # (T,) each
        cos, sin = ops.gather(self.cos, pos, 0), ops.gather(self.sin, pos, 0)  # (1, D)
        x = self.model.embed_tokens(token)  # (B, 1, C)
        new_keys, new_values = (), ()
        for i, layer in enumerate(self.model.layers):
            x, k_cache, v_cache = layer.step(x, cos, sin, keys[i], values[i], slot, hidden)
            new_keys += (k_cache,)
            new_values += (v_cache,)
        return self.logits(x), new_keys, new_values
