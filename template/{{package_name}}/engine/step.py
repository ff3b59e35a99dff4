"""The train step: ``ms.value_and_grad`` + ``ms.jit``, with accumulation, loss scaling and clipping.

One optimizer step = ``k`` micro-steps: the first ``k - 1`` add their gradients into buffers; the
k-th adds its own, then all-reduces, divides by the step's weight, unscales, checks overflow, clips
and updates, so k micro-batches of b update like one batch of k*b.

O2/O3 cast the network alone, never the loss around it: a float16 cell runs all its ops in float16,
even after an ``astype(float32)``. ``train.jit: false`` runs the same functions eagerly."""

from __future__ import annotations

import functools

import mindspore as ms
from mindspore import Parameter, amp, nn, ops

from .distributed import identity
from .inplace import add_to, zero
from .schema import Train
from .task import Model


def build_train_step(model: Model, optimizer: nn.Optimizer, reducer, cfg: Train, jit_level: str = "O0",
                     weight_reducer=None) -> TrainStep:
    """The step ``cfg`` describes; ``reducer``/``weight_reducer``: distributed's (None: one process)."""
    amp_on, loss_net, dtype = cfg.amp_level != "O0", model.loss, getattr(ms, cfg.amp_dtype)
    # O2/O3 cast model.network in place (model.loss holds it); their float32 output wrapper is not needed.
    if cfg.amp_level == "O1":  # a rewritten copy with float16 matmuls/convolutions
        loss_net = amp.auto_mixed_precision(loss_net, "O1", dtype)
    elif cfg.amp_level == "O2":  # norms stay float32: MindSpore's list has BatchNorm and LayerNorm, not GroupNorm
        amp.custom_mixed_precision(model.network, black_list=[*amp.get_black_list(), nn.GroupNorm,
                                                               *model.float32_cells], dtype=dtype)
    elif amp_on:
        amp.auto_mixed_precision(model.network, cfg.amp_level, dtype)
    scaler = amp.DynamicLossScaler(cfg.loss_scale, 2, cfg.loss_scale_window) if amp_on else None
    # Gradients are checked under AMP (overflow) and with on_nonfinite: skip; a bad update is skipped.
    check = amp_on or cfg.on_nonfinite == "skip"
    return TrainStep(loss_net, optimizer, reducer, accum_steps=cfg.grad_accum_steps, loss_scaler=scaler,
                     check_overflow=check, grad_clip=cfg.grad_clip, jit=cfg.jit, constrain=model.constrain,
                     jit_level=jit_level, weight_reducer=weight_reducer, summed=getattr(model.loss, "summed", False))


class TrainStep:
    def __init__(self, loss_net: nn.Cell, optimizer: nn.Optimizer, reducer, *, accum_steps: int = 1,
                 loss_scaler=None, check_overflow: bool = False, grad_clip: float | None = None,
                 jit: bool = True, constrain=None, jit_level: str = "O0", weight_reducer=None, summed: bool = False):
        self.loss_net = loss_net
        self.constrain = constrain or _unconstrained
        self.optimizer = optimizer
        self.reducer = reducer
        self.weight_reducer = weight_reducer or identity
        # A mean is divided by k before the backward; a sum by the step's weight in the clipping pass.
        self.summed, self.accum_steps = summed, accum_steps
        self.scaler = loss_scaler or NoLossScaling()  # fp32 too: one code path
        self.check_overflow = check_overflow
        self.grad_clip = grad_clip
        self.grad_fn = ms.value_and_grad(self._scaled_loss, None, optimizer.parameters, has_aux=summed)
        self.accum = optimizer.parameters.clone(prefix="grad_accum", init="zeros") if accum_steps > 1 else None
        self.accum_weight = Parameter(ms.Tensor(0.0, ms.float32), name="grad_accum_weight", requires_grad=False)
        self.hyper_map = ops.HyperMap()
        compile_ = functools.partial(ms.jit, jit_level=jit_level) if jit else lambda fn: fn
        self._accumulate = compile_(self.accumulate)
        self._apply = compile_(self.accumulate_and_apply)

    def __call__(self, batch, apply: bool):
        """One micro-step, updating when ``apply``: (unscaled loss, False if the update was skipped)."""
        return (self._apply if apply else self._accumulate)(*batch)

    def _scaled_loss(self, *batch):
        if self.summed:
            total, weight = self.loss_net(*batch)
            return self.scaler.scale(total), weight
        return self.scaler.scale(self.loss_net(*batch) / self.accum_steps)

    def _loss_and_grads(self, batch):
        """The micro-batch's mean loss, its weight (None: a mean) and the gradients."""
        if self.summed:
            (total, weight), grads = self.grad_fn(*batch)
            return self.scaler.unscale(total) / ops.maximum(weight, 1e-12), weight, grads
        loss, grads = self.grad_fn(*batch)
        return self.scaler.unscale(loss) * self.accum_steps, None, grads

    def accumulate(self, *batch):
        loss, weight, grads = self._loss_and_grads(batch)
        self.hyper_map(add_to, self.accum, grads)
        if weight is not None:
            add_to(self.accum_weight, weight)
        # A constant output the loop reads keeps the host in step (unread: 3-20x slower on CPU).
        return loss, ms.Tensor(True)

    def accumulate_and_apply(self, *batch):
        loss, weight, grads = self._loss_and_grads(batch)
        if self.accum is not None:
            grads = self.hyper_map(ops.add, self.accum, grads)
            self.hyper_map(zero, self.accum)
            if weight is not None:
                weight = weight + self.accum_weight
                zero(self.accum_weight)
        if weight is not None:  # the step's whole weight, every micro-batch and rank (0: zero gradients)
            weight = ops.maximum(self.weight_reducer(weight), 1e-12)
        grads = self.scaler.unscale(self.reducer(grads))
        finite = amp.all_finite(grads) if self.check_overflow else ms.Tensor(True)
        if finite:
            self.optimizer(clip_by_global_norm(grads, self.grad_clip, weight))
            self.constrain()
        else:  # a skipped step keeps its place in the schedule (as torch's scheduler.step() does)
            add_to(self.optimizer.global_step, ops.ones_like(self.optimizer.global_step))
        if self.check_overflow:
            self.scaler.adjust(finite)  # overflow: skip the update and shrink the scale
        return loss, finite


def clip_by_global_norm(grads: tuple, max_norm: float | None, weight=None) -> tuple:
    """grads / ``weight`` (None: 1), clipped as torch's ``clip_grad_norm_``, one gradient copy at a time."""
    if max_norm is None:
        return grads if weight is None else _hyper_map(ops.partial(_scaled, 1 / weight), grads)
    norm = ops.sqrt(ops.addn(_hyper_map(_squared_norm, grads)))
    if weight is None:
        return _hyper_map(ops.partial(_scaled, ops.minimum(max_norm / (norm + 1e-6), 1.0)), grads)
    factor = ops.minimum(max_norm / (norm / weight + 1e-6), 1.0) / weight
    return _hyper_map(ops.partial(_scaled, factor), grads)


_hyper_map = ops.HyperMap()


def _squared_norm(g):
    flat = g.reshape(-1).astype(ms.float32)
    return ops.tensor_dot(flat, flat, 1)


def _scaled(factor, g):
    return g * factor.astype(g.dtype)


def _unconstrained():
    return True


class NoLossScaling:
    """fp32's loss scaler, the identity (``StaticLossScaler(1.0)`` rejects sparse gradients)."""

    scale_value = ms.Tensor(1.0)

    def scale(self, x):
        return x

    def unscale(self, x):
        return x

    def adjust(self, finite):
        return finite
