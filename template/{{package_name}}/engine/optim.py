"""The optimizer (optim.*) and the learning-rate schedule, counted in optimizer steps."""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import nn

from . import seams
from .errors import ConfigError
from .optimizers import AdamW, Momentum
from .schema import Optim


def warmup_steps(cfg: Optim, total_steps: int) -> int:
    """``optim.warmup_steps``, or ``optim.warmup_ratio`` of the run's steps rounded up (as transformers)."""
    return math.ceil(total_steps * cfg.warmup_ratio) if cfg.warmup_ratio is not None else cfg.warmup_steps


def lr_schedule(cfg: Optim, total_steps: int, stretches: list = ()) -> np.ndarray:
    """Each step's rate: warmup, then constant/step/cosine, stretched per resume ``[step, before, after]``."""
    steps = np.arange(total_steps + 1, dtype=np.float64)  # +1: the last step reads index total
    for start, before, after in reversed(stretches):  # each step -> its place in the schedule as planned
        steps = np.where(steps > start, start + (steps - start) * (before - start) / max(after - start, 1), steps)
        total_steps = before
    warmup = warmup_steps(cfg, total_steps)  # of the run as planned
    if seams.is_spec(cfg.schedule):
        factor = your_schedule(cfg.schedule, steps, total_steps)
    elif cfg.schedule == "constant":
        factor = np.ones_like(steps)
    elif cfg.schedule == "step":
        factor = cfg.gamma ** np.floor(steps / cfg.step_size)
    else:  # cosine from the end of warmup to the last step
        span = max(total_steps - warmup, 1)
        progress = np.clip((steps - warmup) / span, 0.0, 1.0)
        factor = cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + np.cos(math.pi * progress))
    if warmup:
        factor = factor * np.minimum((steps + 1) / warmup, 1.0)
    return (cfg.lr * factor).astype(np.float32)


def your_schedule(spec: str, steps: np.ndarray, total_steps: int) -> np.ndarray:
    """optim.schedule as module:function: ``fn(step, total_steps)``, the factor of optim.lr at each step."""
    fn = seams.load("optim.schedule", spec, function=True)
    factor = np.array([fn(int(step) if step == int(step) else float(step), total_steps) for step in steps],
                      dtype=np.float64)
    if bad := np.flatnonzero(~np.isfinite(factor) | (factor < 0)).tolist():
        raise ConfigError(f"optim.schedule={spec}: returned {factor[bad[0]]} at step {bad[0]}; "
                          "a schedule returns a finite factor >= 0")
    return factor


def build_optimizer(cfg: Optim, params: list[ms.Parameter], schedule: np.ndarray,
                    lr_scales: dict[str, float] | None = None, no_decay: tuple[str, ...] = (),
                    builtins: dict | None = None) -> nn.Optimizer:
    """The optimizer of ``params`` (``lr_scales``: ``layer_scales``; ``builtins``: ``Task.optimizers``);
    yours is ``Class(groups, learning_rate=, weight_decay=, **optim.kwargs)``."""
    lr = ms.Tensor(schedule)
    decayed = {p.name for p in params if decays(p, no_decay)}
    if seams.is_spec(cfg.name):
        cls = seams.load("optim.name", cfg.name, base=nn.Optimizer)
        groups = param_groups(params, cfg.weight_decay, schedule, lr_scales, decayed)
        return seams.build("optim.name", cfg.name, cls, params=groups, learning_rate=lr,
                           weight_decay=cfg.weight_decay, **cfg.kwargs)
    if cfg.name == "adamw":  # decoupled: Adam's own (coupled) decay stays 0 in every group
        return AdamW(param_groups(params, 0.0, schedule, lr_scales, decayed) if lr_scales else params, lr,
                     [p for p in params if p.name in decayed], cfg.weight_decay)
    groups = param_groups(params, cfg.weight_decay, schedule, lr_scales, decayed)
    if cfg.name == "sgd":
        return nn.SGD(groups, learning_rate=lr)
    if cfg.name == "momentum":
        return Momentum(groups, learning_rate=lr, momentum=cfg.momentum, nesterov=cfg.nesterov)
    if cfg.name in (builtins or {}):
        return builtins[cfg.name](groups, lr)
    if cfg.name != "adam":
        raise ConfigError(f"optim.name={cfg.name}: not an optimizer of this task; use sgd, momentum, adam, adamw "
                          f"or {seams.HOW}")
    return nn.Adam(groups, learning_rate=lr)


def decays(p: ms.Parameter, no_decay: tuple[str, ...] = ()) -> bool:
    """Decay matrices and embeddings, not vectors (nanoGPT) nor a model's ``no_decay`` names (timm)."""
    return p.ndim >= 2 and p.name.rsplit(".", 1)[-1] not in no_decay


def param_groups(params: list[ms.Parameter], weight_decay: float, schedule: np.ndarray,
                 lr_scales: dict[str, float] | None, decayed: set[str]) -> list[dict]:
    """MindSpore parameter groups: weight decay on the ``decayed`` names only; with
    ``lr_scales``, one group per (factor, decayed or not), stem first, whose lr is the whole schedule times
    the factor (so warmup and the cosine scale every group alike). Optimizer state stays keyed by name."""
    members: dict[tuple[float, bool], list[ms.Parameter]] = {}
    for p in params:
        members.setdefault((lr_scales[p.name] if lr_scales else 1.0, p.name in decayed), []).append(p)
    groups = []
    for scale, decayed in sorted(members, key=lambda key: (key[0], not key[1])):
        group = {"params": members[scale, decayed], "weight_decay": weight_decay if decayed else 0.0}
        if lr_scales:
            group["lr"] = ms.Tensor((schedule * np.float32(scale)).astype(np.float32))
        groups.append(group)
    return groups


def layer_scales(cfg: Optim, model, task: str) -> dict[str, float] | None:
    """optim.layer_decay: each parameter's lr factor (``layer_decay.py``, the recipes feature); None when off."""
    if cfg.layer_decay is None:
        return None
    from .layer_decay import layer_scales

    return layer_scales(cfg, model, task)


def current_lr(optimizer: nn.Optimizer, schedule: np.ndarray) -> float:
    """The next optimizer step's learning rate (with optim.layer_decay: the head's)."""
    return float(schedule[min(int(optimizer.global_step.asnumpy().item()), len(schedule) - 1)])
