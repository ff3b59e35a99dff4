"""The language-model losses: training's cross-entropy of the next token (a mean, or a sum and
its weight for chat data), and evaluation's per-token losses."""

from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops


class LanguageModelLoss(nn.Cell):
    """Cross-entropy of predicting token t+1 from tokens 0..t. Without a ``mask`` every position
    is a target: the mean. With a ``mask`` of the targets (chat data: the assistant's tokens),
    ``summed`` (config ``loss.normalize: token``): (sum, count), which the train step divides by
    the count of the whole optimizer step (engine/step.py); else (``row``) each row's mean over
    its targets, averaged over the rows."""

    def __init__(self, network: nn.Cell, summed: bool = False):
        super().__init__()
        self.network = network
        self.summed = summed
        # One fused softmax + NLL kernel: much cheaper on CPU than nn.CrossEntropyLoss's small ops.
        self.cross_entropy = ops.SparseSoftmaxCrossEntropyWithLogits()

    def construct(self, tokens, mask=None):  # (B, T + 1) int32, (B, T) float32
        logits = self.network(tokens[:, :-1])  # (B, T, vocab)
        targets = tokens[:, 1:]  # the same blocks shifted left by one
        if mask is None:
            return self.cross_entropy(logits.reshape(-1, logits.shape[-1]).astype(ms.float32), targets.reshape(-1))
        log_probs = ops.log_softmax(logits.astype(ms.float32), -1)
        losses = -ops.gather_elements(log_probs, -1, targets.expand_dims(-1)).squeeze(-1)  # (B, T)
        if self.summed:
            return (losses * mask).sum(), mask.sum()
        per_row = (losses * mask).sum(-1) / ops.maximum(mask.sum(-1), 1.0)  # a row without targets: 0
        return per_row.mean()


class TokenLosses(nn.Cell):
    """Evaluation's per-token cross-entropy (B, T), float32, computed where the logits are: only
    these B x T numbers reach the host, never the (B, T, vocab) logits."""

    def __init__(self, network: nn.Cell):
        super().__init__(auto_prefix=False)  # the network's parameters keep their names
        self.network = network

    def construct(self, inputs, targets):  # (B, T) int32 each
        logits = self.network(inputs).astype(ms.float32)  # (B, T, vocab)
        log_probs = ops.log_softmax(logits, -1)
        return -ops.gather_elements(log_probs, -1, targets.expand_dims(-1)).squeeze(-1)
