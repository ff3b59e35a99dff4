"""``FastConv2d``: ``nn.Conv2d`` whose weight gradient is computed as a forward convolution.

Why it exists: DESIGN §8 measured MindSpore 2.10's CPU weight gradient (``Conv2DBackpropFilter``,
oneDNN im2col + sgemm on plain NCHW memory) at 188 ms forward + weight gradient for one
``Conv2d(64, 64, 3, padding=1)`` on 32 x 64 x 32 x 32 (2-core x86-64), and the same gradient as a
forward convolution at 42 ms. The identity:

    dW[o, i, a, b] = sum_{n, y, x} dy[n, o, y, x] * x_pad[n, i, a + s*y, b + s*x]

is a convolution of the input seen as (C_in, N, H, W) (channels as the batch, images as the
channels) with the output gradient seen as (C_out, N, h, w) as its kernel, dilated by the
forward stride s; its (C_in, C_out, >=k, >=k) result, cropped to k x k and transposed back,
is dW (equal to MindSpore's within float32 rounding; tests/test_vision.py).

What we measured when building it (benchmarks/bench_conv.py, same CPU, fwd + both gradients,
median ms): MindSpore's own backward did not show DESIGN's 188 ms here (64->64 at 32^2: 110 for
forward + both gradients) and the forward-convolution weight gradient won only on an image
stem (3->64 k7 s2 at 64^2: 51 -> 46 ms, 1.1x); on 64->64 at 32^2 it lost (110 -> 144), and at
16^2 and below by 1.2-2.5x. A ResNet-18 step: 468 ms with nn.Conv2d, 459 with this cell (noise
level), so ``model.fast_conv`` defaults to false; auto / true are there to measure on your CPU.
The input gradient is MindSpore's own ``Conv2DTranspose`` (its Conv2DBackpropInput kernel): a forward
convolution of dy with the flipped, transposed kernel (the other candidate) measured slower at every
stride-1 shape.

The cell keeps ``nn.Conv2d``'s parameters (``weight``, ``bias``: checkpoints and imported
weights are unchanged) and its forward op (``Conv2D``: the exported MINDIR is the same).
"""

from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops
from mindspore.ops.operations import _grad_ops  # Conv2DBackpropFilter: MindSpore's own, not public

# The per-layer rule, from the table above: the forward-convolution weight gradient only for a
# convolution of the image itself (at most 4 input channels: the stem), kernel larger than 1x1,
# output map at least 32x32 -- the one shape where it won (1.1x). Every other layer (64+ input
# channels, or maps of 16^2 and below, or 1x1) runs MindSpore's own backward kernels in this
# cell, measured as fast as nn.Conv2d's (e.g. 90 vs 110, 21 vs 22 ms).
MAX_INPUT_CHANNELS = 4
MIN_OUTPUT_PIXELS = 32 * 32


def use_forward_dw(in_channels: int, kernel: tuple[int, int], out_hw: tuple[int, int]) -> bool:
    """Whether the weight gradient is computed as a forward convolution for this shape."""
    return in_channels <= MAX_INPUT_CHANNELS and kernel != (1, 1) and out_hw[0] * out_hw[1] >= MIN_OUTPUT_PIXELS


def _pads(size: int, kernel: int, stride: int, pad_mode: str, pad: tuple[int, int]) -> tuple[int, int]:
    """(before, after) zero padding of one spatial axis, as the forward Conv2D applies it."""
    if pad_mode == "pad":
        return pad
    if pad_mode == "valid":
        return 0, 0
    total = max((-(-size // stride) - 1) * stride + kernel - size, 0)  # "same": TensorFlow's split
    return total // 2, total - total // 2


class _ConvWithFastBackward(nn.Cell):
    """``Conv2D(x, w)`` whose ``bprop`` returns (dx, dw); holds no parameters."""

    def __init__(self, conv: nn.Conv2d, forward_dw: str):
        super().__init__()
        self.forward_dw = forward_dw
        self.forward = conv.conv2d  # the same Conv2D primitive nn.Conv2d uses
        self.kernel, self.stride = conv.kernel_size, conv.stride
        self.pad_mode = conv.pad_mode
        p = conv.padding if isinstance(conv.padding, tuple) else (conv.padding,) * 4
        self.pad = (p[0], p[1]), (p[2], p[3])  # (top, bottom), (left, right)
        self.out_channels = conv.out_channels

    def construct(self, x, w):
        return self.forward(x, w)

    def bprop(self, x, w, out, dout):  # x (N, C_in, H, W), w (C_out, C_in, k, k), dout (N, C_out, h, w)
        (sh, sw), (kh, kw) = self.stride, self.kernel
        pads = (*_pads(x.shape[2], kh, sh, self.pad_mode, self.pad[0]),
                *_pads(x.shape[3], kw, sw, self.pad_mode, self.pad[1]))  # (top, bottom, left, right)
        # Explicit pads (pad_list) for MindSpore's own backward kernels, as its autodiff passes them.
        dx = ops.Conv2DTranspose(self.out_channels, self.kernel, pad_mode="pad", pad=pads, pad_list=pads,
                                  stride=self.stride)(dout, w, x.shape)
        # dx and dw are independent and the runtime runs them side by side (making dw wait for dx
        # with ops.depend measured 2x slower: 218-244 vs 96-106 ms for the 64->64 conv at 32^2).
        auto = self.forward_dw == "auto" and use_forward_dw(x.shape[1], self.kernel, dout.shape[2:])
        if not (self.forward_dw == "always" or auto):
            dw = _grad_ops.Conv2DBackpropFilter(self.out_channels, self.kernel, pad_mode="pad", pad=pads,
                                                pad_list=pads, stride=self.stride)(dout, x, w.shape)
            return dx, dw
        dw = ops.Conv2D(self.out_channels, dout.shape[2:], pad_mode="pad", pad=pads, dilation=(sh, sw))(
            x.transpose(1, 0, 2, 3), dout.transpose(1, 0, 2, 3))  # (C_in, C_out, >=kh, >=kw)
        return dx, dw[:, :, :kh, :kw].transpose(1, 0, 2, 3)


class FastConv2d(nn.Conv2d):
    """``nn.Conv2d`` (same arguments, parameters and forward op) with the weight gradient
    computed as a forward convolution where that is faster (``use_forward_dw``), or at every
    shape with ``forward_dw="always"`` (tests, benchmarks). ``group`` must be 1."""

    def __init__(self, *args, forward_dw: str = "auto", **kwargs):
        super().__init__(*args, **kwargs)
        if self.group != 1 or self.dilation != (1, 1):
            raise ValueError(f"FastConv2d supports group=1 and dilation=1 only (got group={self.group}, "
                             f"dilation={self.dilation}); use nn.Conv2d")
        self.conv2d = _ConvWithFastBackward(self, forward_dw)


def conv_class(setting: bool | str) -> type[nn.Conv2d]:
    """The convolution the vision archs build for ``model.fast_conv``: ``FastConv2d`` (true, or
    auto on CPU) or MindSpore's own ``nn.Conv2d`` (false, or auto on GPU/Ascend, whose kernels
    are fast). Call after the device is set."""
    if setting == "auto":
        setting = ms.get_current_device().device_target == "CPU"
    return FastConv2d if setting else nn.Conv2d
