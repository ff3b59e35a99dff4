"""Optimizers and learning-rate schedules, both counted in optimizer steps."""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import nn, ops

from .schema import Optim


def lr_schedule(cfg: Optim, total_steps: int) -> np.ndarray:
    """Learning rate for each optimizer step: linear warmup, then constant/step/cosine."""
    steps = np.arange(total_steps + 1, dtype=np.float64)  # +1: the last step reads index total
    if cfg.schedule == "constant":
        factor = np.ones_like(steps)
    elif cfg.schedule == "step":
        factor = cfg.gamma ** np.floor(steps / cfg.step_size)
    else:  # cosine from the end of warmup to the last step
        span = max(total_steps - cfg.warmup_steps, 1)
        progress = np.clip((steps - cfg.warmup_steps) / span, 0.0, 1.0)
        factor = cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + np.cos(math.pi * progress))
    if cfg.warmup_steps:
        factor = factor * np.minimum((steps + 1) / cfg.warmup_steps, 1.0)
    return (cfg.lr * factor).astype(np.float32)


def build_optimizer(cfg: Optim, params: list[ms.Parameter], schedule: np.ndarray) -> nn.Optimizer:
    lr = ms.Tensor(schedule)
    # Decay matrices and embeddings, not biases or normalisation scales (as nanoGPT).
    decay = [p for p in params if p.ndim >= 2]
    rest = [p for p in params if p.ndim < 2]
    if cfg.name == "adamw":
        return AdamW(params, lr, decay, cfg.weight_decay)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    groups = [group for group in groups if group["params"]]
    if cfg.name == "sgd":
        return nn.SGD(groups, learning_rate=lr)
    if cfg.name == "momentum":
        return nn.Momentum(groups, learning_rate=lr, momentum=cfg.momentum, use_nesterov=cfg.nesterov)
    # lazy_adam updates only the embedding rows a sparse gradient touches (and their moments).
    return nn.Adam(groups, learning_rate=lr, use_lazy=cfg.name == "lazy_adam")


class AdamW(nn.Adam):
    """Adam with decoupled weight decay, as ``torch.optim.AdamW``: p <- p * (1 - lr * wd),
    then the bias-corrected Adam update. (``nn.AdamWeightDecay`` skips bias correction.)"""

    def __init__(self, params, learning_rate, decay_params, weight_decay: float):
        super().__init__(params, learning_rate=learning_rate)
        self.decay_params = ms.ParameterTuple(decay_params)
        self.decoupled_wd = weight_decay

    def construct(self, gradients):
        lr = self.get_lr()  # this step's rate (Adam's construct then advances global_step)
        factor = 1 - lr * self.decoupled_wd
        for param in self.decay_params:
            ops.assign(param, param * factor)
        return super().construct(gradients)


def current_lr(optimizer: nn.Optimizer, schedule: np.ndarray) -> float:
    """The learning rate the next optimizer step will use (skipped overflow steps count too)."""
    return float(schedule[min(int(optimizer.global_step.asnumpy().item()), len(schedule) - 1)])
