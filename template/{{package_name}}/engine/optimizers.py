"""``AdamW`` and ``Momentum`` as PyTorch computes them, where MindSpore's own differ (tested)."""

from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops


class AdamW(nn.Adam):
    """``torch.optim.AdamW``: p <- p * (1 - lr * wd), then bias-corrected Adam (unlike AdamWeightDecay)."""

    def __init__(self, params, learning_rate, decay_params, weight_decay: float):
        super().__init__(params, learning_rate=learning_rate)
        self.decay_params = ms.ParameterTuple(decay_params)
        names = [p.name for p in self._parameters]
        self.decay_index = tuple(names.index(p.name) for p in decay_params)  # into get_lr()'s per-parameter rates
        self.decoupled_wd = weight_decay

    # Compiled even under train.jit: false: nn.Adam's jit construct called eagerly would decay twice.
    @ms.jit
    def construct(self, gradients):
        lr = self.get_lr()  # this step's rate(s) (Adam's construct then advances global_step)
        for param, index in zip(self.decay_params, self.decay_index):
            rate = lr[index] if self.is_group_lr else lr
            # After its gradient: computed as soon as lr is known, every decayed copy waited out the backward.
            param.copy_(ops.depend(param, gradients[index]) * (1 - rate * self.decoupled_wd))
        return super().construct(gradients)


class Momentum(nn.Optimizer):
    """``torch.optim.SGD`` momentum, replacing the deprecated ``nn.Momentum`` (same state names)."""

    def __init__(self, params, learning_rate, momentum: float, nesterov: bool = False):
        super().__init__(learning_rate, params)
        self.momentum = ms.Parameter(ms.Tensor(momentum, ms.float32), name="momentum")
        self.moments, self.nesterov = self._parameters.clone(prefix="moments", init="zeros"), nesterov

    @ms.jit
    def construct(self, gradients):
        gradients = self.decay_weight(gradients)  # coupled, as torch's SGD weight_decay
        lr = self.get_lr()
        self.assignadd(self.global_step, self.global_step_increase_tensor)
        if self.is_group_lr:
            return self.hyper_map(ops.partial(_momentum, self.momentum, self.nesterov), lr, gradients,
                                  self._parameters, self.moments)
        return self.hyper_map(ops.partial(_momentum, self.momentum, self.nesterov, lr), gradients,
                              self._parameters, self.moments)


def _momentum(momentum, nesterov, lr, gradient, param, buf):
    buf = buf.copy_(buf * momentum + gradient)
    return param.copy_(param - lr * (gradient + momentum * buf if nesterov else buf))
