"""The decoder's building blocks in Hugging Face's names: RMSNorm (Llama's, or Gemma's 1 + weight),
the token embedding, a linear layer that is a LoRA adapter where the config says so, and axis moves."""

from __future__ import annotations

import mindspore as ms
from mindspore import Parameter, mint, nn, ops
from mindspore.common.initializer import Normal, initializer

from .lora import LoRADense


class RMSNorm(nn.Cell):
    """x / rms(x) * weight in float32 (as Hugging Face's ``LlamaRMSNorm``); ``offset``: x / rms(x) *
    (1 + weight), the weight zero-centred (``GemmaRMSNorm``)."""

    def __init__(self, dim: int, eps: float, offset: bool = False):
        super().__init__()
        self.weight = Parameter(initializer("zeros" if offset else "ones", (dim,)), name="weight")
        self.eps, self.offset = eps, offset

    def construct(self, x):
        dtype = x.dtype
        x = x.astype(ms.float32)
        x = x * ops.broadcast_to(ops.rsqrt((x * x).mean(-1, keep_dims=True) + self.eps), x.shape)
        if self.offset:  # Gemma scales in float32, then casts
            return (x * ops.broadcast_to(1.0 + self.weight.astype(ms.float32), x.shape)).astype(dtype)
        return ops.broadcast_to(self.weight, x.shape) * x.astype(dtype)


def permute(x, axes: tuple[int, ...]):
    """``mint.permute`` of the axes after the batch (which stays first, and may be dynamic: an
    export); a reshape when the axes that move all have length 1 (one token: faster)."""
    moving = [axis for axis in axes[1:] if x.shape[axis] != 1]
    if moving == sorted(moving):
        return x.reshape((-1, *(x.shape[axis] for axis in axes[1:])))
    return mint.permute(x, axes)


def linear(d_in: int, d_out: int, bias: bool, name: str, lora) -> nn.Dense:
    """``nn.Dense`` (weight (out, in)), or a ``LoRADense`` when ``name`` is a LoRA target."""
    if lora is not None and lora.rank > 0 and name in lora.targets:
        return LoRADense(d_in, d_out, bias, lora.rank, lora.alpha, lora.dropout)
    return nn.Dense(d_in, d_out, weight_init=Normal(0.02), has_bias=bias, bias_init="zeros")


def norm_or_identity(present: bool, dim: int, m) -> nn.Cell:
    return RMSNorm(dim, m.norm_eps, m.norm_offset) if present else nn.Identity()


class Embedding(nn.Cell):
    """A lookup table named ``weight``, as Hugging Face's ``embed_tokens``."""

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.weight = Parameter(initializer(Normal(0.02), (vocab_size, d_model)), name="weight")

    def construct(self, tokens):  # (B, T) int32 -> (B, T, C)
        return ops.gather(self.weight, tokens, 0)
