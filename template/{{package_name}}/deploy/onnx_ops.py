"""The ops MindSpore 2.10 cannot write to ONNX, computed from ops it can, for the export only.

Inside ``exportable()``, ``mindspore.ops.<name>`` resolves to the version below. The graph
compiler reads the network's Python when ``ms.export`` traces it, so the exported graph computes
the same function from exportable primitives, while the trained network, its weights and every
training or evaluation graph keep MindSpore's own kernels. What 2.10's exporter refuses
(measured; "Can not find key ... in convert map"): GroupNorm, PadV3 (``ops.pad``), Erf (exact
GELU), Rsqrt (RMSNorm), CumSum (CLIP's end-of-text pooling),
Sign, Reciprocal, ``ops.clamp`` with one bound None, and the copy (TensorMove) behind
``mint.permute`` / ``mint.transpose`` (Llama's attention: they keep less memory in training).
And what it writes with the batch as a number: ``nn.Embedding`` and ``nn.Dense`` flatten their
input and reshape back to its concrete shape, GroupNorm reshapes to (batch, groups, -1); here
they leave the batch to the graph (a Gather of any shape, reshapes with -1).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import numpy as np
from mindspore import Tensor, mint, nn, ops

# Abramowitz & Stegun 7.1.26: |erf error| <= 1.5e-7, below float32 rounding of GELU's output.
_P = 0.3275911
_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf(x):
    t = _inverse(1.0 + _P * ops.abs(x))
    poly = t * (_A[0] + t * (_A[1] + t * (_A[2] + t * (_A[3] + t * _A[4]))))
    y = 1.0 - poly * ops.exp(-x * x)
    return ops.select(x < 0, -y, y)


def rsqrt(x):
    return _inverse(ops.sqrt(x))


def _inverse(x):  # 1 / x, written as a division: 2.10 cannot export Reciprocal either
    return ops.ones_like(x) / x


def clamp(x, min=None, max=None):  # noqa: A002 (ops.clamp's own argument names)
    if min is not None:
        x = ops.maximum(x, min)
    if max is not None:
        x = ops.minimum(x, max)
    return x


def pad(x, padding, mode="constant", value=None):
    """``ops.pad``'s (last-axis-first) constant padding as the older ``Pad`` primitive."""
    pairs = [(0, 0)] * (x.ndim - len(padding) // 2)
    pairs += [(padding[i], padding[i + 1]) for i in range(len(padding) - 2, -1, -2)]
    return ops.Pad(tuple(pairs))(x)


def cumsum(x, axis, dtype=None):
    """A running sum along ``axis`` as a product with an upper-triangular matrix of ones."""
    n = x.shape[axis]
    upper = Tensor(np.triu(np.ones((n, n), np.float32)), x.dtype)  # a constant: upper[i, j] = 1 where i <= j
    return ops.swapaxes(ops.matmul(ops.swapaxes(x, axis, -1), upper), axis, -1)


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """Reshaped with -1 as the batch: a concrete batch would be baked into the ONNX graph."""
    c = x.shape[1]
    per_group = c // num_groups * int(np.prod(x.shape[2:]))
    groups = x.reshape(-1, num_groups, per_group)
    mean = groups.mean(-1, keep_dims=True)
    var = ((groups - mean) ** 2).mean(-1, keep_dims=True)
    x = ((groups - mean) / ops.sqrt(var + eps)).reshape((-1,) + tuple(x.shape[1:]))
    shape = (1, c) + (1,) * (x.ndim - 2)
    return x * weight.reshape(shape) + bias.reshape(shape)


def permute(x, dims):  # mint.permute
    return ops.transpose(x, dims)


def transpose(x, dim0, dim1):  # mint.transpose
    return ops.swapaxes(x, dim0, dim1)


def embedding(self, ids):  # nn.Embedding.construct: the rows of ids, whatever their shape
    return ops.gather(self.embedding_table, ids, 0)


def dense(self, x):  # nn.Dense.construct, reshaped back with -1 as the batch
    shape = x.shape
    if len(shape) != 2:
        x = x.reshape(-1, shape[-1])
    x = self.matmul(x, self.weight)
    if self.has_bias:
        x = self.bias_add(x, self.bias)
    if self.activation_flag:
        x = self.activation(x)
    if len(shape) != 2:
        x = x.reshape((-1,) + tuple(shape[1:-1]) + (x.shape[-1],))
    return x


MINT_REWRITES = {"permute": permute, "transpose": transpose}
REWRITES = {"erf": erf, "rsqrt": rsqrt, "clamp": clamp, "pad": pad,
            "group_norm": group_norm, "cumsum": cumsum}


@contextmanager
def exportable() -> Iterator[None]:
    """``ms.export(..., file_format="ONNX")`` inside this block writes the rewritten ops."""
    with mock.patch.multiple(ops, **REWRITES), mock.patch.multiple(mint, **MINT_REWRITES), \
            mock.patch.object(nn.Embedding, "construct", embedding), mock.patch.object(nn.Dense, "construct", dense):
        yield


def refused_op(error: Exception) -> str | None:
    """The op's name in the exporter's refusal, if that is what ``error`` is."""
    text = str(error)
    if "in convert map" in text:
        return text.split("Can not find key ", 1)[-1].split(" ", 1)[0]
    return None
