"""Your metrics and losses. Name them in config/config.yaml:

    eval:
      metrics: [custom.metrics:macro_f1]  # reported as macro_f1, beside accuracy and loss
    train:
      monitor: macro_f1                   # best.ckpt: the evaluation with the highest macro_f1
      monitor_mode: max
      loss: custom.metrics:SmoothCE
      loss_kwargs: {smoothing: 0.1}

A metric is ``fn(logits, labels) -> float`` over the whole eval set, in NumPy: logits
(N, classes) float32, labels (N,) int32. A loss is an ``nn.Cell`` class built with
``**loss_kwargs``; ``construct(logits, labels)`` returns a scalar, inside the compiled train step
(MindSpore ops, not NumPy): (B, classes) float32 logits, (B,) int32 labels.
"""

import numpy as np
from mindspore import nn, ops


def macro_f1(logits: np.ndarray, labels: np.ndarray) -> float:
    """F1 per class, averaged over the classes in labels or predictions (scikit-learn's average="macro")."""
    predicted = logits.argmax(1)
    scores = []
    for c in np.union1d(labels, predicted):
        hits = np.sum((predicted == c) & (labels == c))
        scores.append(2 * hits / (np.sum(predicted == c) + np.sum(labels == c)))
    return float(np.mean(scores))


class SmoothCE(nn.Cell):
    """Cross-entropy against (1 - smoothing) * one-hot + smoothing / classes (PyTorch's label_smoothing)."""

    def __init__(self, smoothing: float = 0.1):
        super().__init__()
        self.smoothing = smoothing

    def construct(self, logits, labels):  # (B, classes) float32, (B,) int32 -> scalar
        logp = ops.log_softmax(logits, -1)
        nll = -ops.gather_elements(logp, 1, labels.reshape(-1, 1)).squeeze(1)
        return ((1 - self.smoothing) * nll - self.smoothing * logp.mean(-1)).mean()
