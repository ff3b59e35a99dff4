"""Rotary position embeddings (RoPE) as transformers computes them: the frequencies of each
``rope_type`` (default, linear, llama3, yarn, dynamic, longrope; ``ROPE_INIT_FUNCTIONS``), their
cos/sin tables and the rotation of the first R dims of a head (``rotate_half``)."""

from __future__ import annotations

import math

import numpy as np
from mindspore import Tensor, ops


def inverse_frequencies(d_rot: int, theta: float, scaling=None, context: int = 0) -> tuple[np.ndarray, float]:
    """RoPE's (d_rot/2,) rotation speeds and the factor cos and sin are scaled by, as transformers'
    ``ROPE_INIT_FUNCTIONS`` compute them for sequences of ``context`` positions (longrope's
    factors depend on it)."""
    inv_freq = 1.0 / theta ** (np.arange(0, d_rot, 2, dtype=np.float64) / d_rot)
    kind = scaling.type if scaling is not None else "default"
    if kind in ("default", "dynamic"):  # dynamic: plain RoPE up to max_position_embeddings (the largest block)
        return inv_freq, 1.0
    if kind == "linear":
        return inv_freq / scaling.factor, 1.0
    original = scaling.original_max_position_embeddings
    if kind == "llama3":
        # wavelengths longer than the original context / low_freq_factor slow down by factor,
        # shorter than it / high_freq_factor stay, those between are interpolated
        low, high = scaling.low_freq_factor, scaling.high_freq_factor
        wavelength = 2 * math.pi / inv_freq
        scaled = np.where(wavelength > original / low, inv_freq / scaling.factor, inv_freq)
        smooth = (original / wavelength - low) / (high - low)
        smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
        medium = (wavelength >= original / high) & (wavelength <= original / low)
        return np.where(medium, smoothed, scaled), 1.0
    factor = scaling.factor
    # longrope (Phi-3/4): the short factors when the context fits the original one, else the long
    # ones at every position (transformers picks by the current length, so its generate switches
    # mid-sequence once the text passes the original context: with block_size past it, greedy text
    # that long can differ from transformers' there; within it, the tables are the same)
    if kind == "longrope":
        factors = scaling.long_factor if context > original else scaling.short_factor
        attention = scaling.attention_factor or (
            math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1 else 1.0)
        return inv_freq / np.asarray(factors, np.float64), attention
    # yarn: interpolated below the ramp between the beta_fast and beta_slow rotations, kept above it
    def mscale(scale, m=1.0):
        return 0.1 * m * math.log(scale) + 1.0 if scale > 1 else 1.0

    attention = scaling.attention_factor or (mscale(factor, scaling.mscale) / mscale(factor, scaling.mscale_all_dim)
                                             if scaling.mscale and scaling.mscale_all_dim else mscale(factor))

    def correction(rotations):
        return d_rot * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction(scaling.beta_fast), correction(scaling.beta_slow)
    if scaling.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d_rot - 1)
    ramp = np.clip((np.arange(d_rot // 2) - low) / ((high - low) or 0.001), 0, 1)
    return inv_freq / factor * ramp + inv_freq * (1 - ramp), attention


def rope_tables(block_size: int, d_rot: int, theta: float, scaling=None):
    """cos and sin (block_size, d_rot) of Hugging Face's RoPE: frequency i of the first half
    repeated in the second half (the ``rotate_half`` convention)."""
    inv_freq, attention = inverse_frequencies(d_rot, theta, scaling, block_size)  # (R/2,)
    angles = np.outer(np.arange(block_size, dtype=np.float64), inv_freq.astype(np.float32))  # (T, R/2)
    angles = np.concatenate([angles, angles], axis=-1)  # (T, R)
    return (Tensor((np.cos(angles) * attention).astype(np.float32)),
            Tensor((np.sin(angles) * attention).astype(np.float32)))


def rotate(x, cos, sin):  # x (..., T, D), cos/sin (T, R), R <= D: RoPE on the first R of each head
    if cos.shape[-1] < x.shape[-1]:
        turned, kept = ops.split(x, (cos.shape[-1], x.shape[-1] - cos.shape[-1]), axis=-1)
        return ops.cat((rotate(turned, cos, sin), kept), axis=-1)
    x1, x2 = ops.split(x, x.shape[-1] // 2, axis=-1)
    cos, sin = ops.broadcast_to(cos.astype(x.dtype), x.shape), ops.broadcast_to(sin.astype(x.dtype), x.shape)
    return x * cos + ops.cat((-x2, x1), axis=-1) * sin
