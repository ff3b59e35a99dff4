"""An exponential moving average of the weights (``train.ema``: its decay; the recipes feature).

After each optimizer step ``shadow = decay * shadow + (1 - decay) * weights``, BatchNorm statistics
included (timm's ``ModelEmaV2``). The loop swaps the average into the network to evaluate and save,
so every reader of a checkpoint uses it unaware; the training weights are saved as ``ema.<name>``.
A decay d averages about 1 / (1 - d) steps (0.999 for thousands of steps, 0.9998 as timm on ImageNet).
"""

from __future__ import annotations

from contextlib import contextmanager

import mindspore as ms
from mindspore import nn, ops


class EMA:
    def __init__(self, network: nn.Cell, decay: float):
        self.weights = ms.ParameterTuple(network.get_parameters())
        self.holders = (Shadow(self.weights),)  # what a checkpoint saves of it
        self.shadow = self.holders[0].shadow
        self.decay = decay
        self.hyper_map = ops.HyperMap()
        self._update = ms.jit(self._average)

    def update(self) -> None:
        """After an optimizer step: move the average towards the weights."""
        self._update()

    def _average(self):
        return self.hyper_map(ops.partial(_towards, self.decay), self.shadow, self.weights)

    def reset(self) -> None:
        """The average starts again from the weights (after ``model.pretrained`` loaded them)."""
        for weight, average in zip(self.weights, self.shadow):
            average.copy_(weight.value())

    def swap(self) -> None:
        """Exchange the network's weights and the average."""
        for weight, average in zip(self.weights, self.shadow):
            kept = weight.value().copy()
            weight.copy_(average)
            average.copy_(kept)

    @contextmanager
    def applied(self):
        """The average in the network (and the training weights in ``ema.*``) while inside."""
        self.swap()
        try:
            yield
        finally:
            self.swap()

    def restored(self) -> None:
        """After loading a checkpoint (the average in the network): training weights back in."""
        self.swap()


def _towards(decay, average, weight):
    return average.copy_(average * decay + weight * (1 - decay))


class Shadow(nn.Cell):
    """The averaged copies, named ``ema.<parameter name>``."""

    def __init__(self, weights: ms.ParameterTuple):
        super().__init__(auto_prefix=False)
        self.shadow = weights.clone(prefix="ema", init="same")
