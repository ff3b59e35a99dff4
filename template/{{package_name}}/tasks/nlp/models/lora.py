"""LoRA (low-rank adapters, Hu et al. 2021) for the llama arch: ``model.lora`` in config.yaml.

A target projection y = W x + b becomes y = W x + b + (alpha / rank) * B A dropout(x), with
A (rank, in) drawn as PEFT draws it and B (out, rank) zero, so training starts from the base
model exactly. ``freeze_base`` leaves only A and B trainable: the engine builds its optimizer
from ``network.trainable_params()``, so only the adapters have gradients, accumulation buffers
and Adam moments. Checkpoints hold the base weights and the adapters (resume is exact without
dropout: MindSpore 2.10's CPU dropout kernel keeps its generator in the compiled graph);
``merge`` folds B A alpha / rank into W for ``generate.py`` and MINDIR export (the adapters'
matmuls leave the graph).

Adapter-only checkpoints (a few MB for a model of GB): add the callback ``SaveAdapters`` in
config.yaml, ``train.callbacks: ["<package>.tasks.nlp.models.lora:SaveAdapters"]``; every new best
evaluation writes ``best-adapters.ckpt`` beside ``best.ckpt``. Such a file works as
``model.pretrained``: the base checkpoint its own config names is loaded, then the adapters.
"""

from __future__ import annotations

import math
from pathlib import Path

import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import HeUniform, Normal, initializer

from ....logs.callbacks import Callback

ADAPTERS = (".lora_A", ".lora_B")  # parameter name endings


class LoRADense(nn.Dense):
    """``nn.Dense`` (same ``weight``/``bias`` names and shapes) plus ``lora_A``/``lora_B``."""

    def __init__(self, d_in: int, d_out: int, bias: bool, rank: int, alpha: float, dropout: float):
        super().__init__(d_in, d_out, weight_init=Normal(0.02), has_bias=bias, bias_init="zeros")
        self.lora_A = Parameter(initializer(HeUniform(math.sqrt(5)), (rank, d_in)), name="lora_A")  # as PEFT
        self.lora_B = Parameter(initializer("zeros", (d_out, rank)), name="lora_B")
        self.scaling = alpha / rank
        self.lora_dropout = nn.Dropout(p=dropout)
        self.matmul_t = ops.MatMul(transpose_b=True)
        self.merged = False  # a Python constant to ms.jit: set before the first call (merge)

    def construct(self, x):  # (..., in) -> (..., out)
        shape = x.shape
        x = x.reshape(-1, shape[-1])  # (N, in)
        y = self.matmul_t(x, self.weight)  # (N, out)
        if self.has_bias:
            y = y + self.bias
        if not self.merged:
            low = self.matmul_t(self.lora_dropout(x), self.lora_A) * self.scaling  # (N, rank): scaled where small
            y = y + self.matmul_t(low, self.lora_B)
        return y.reshape(shape[:-1] + (-1,))

    def delta(self) -> ms.Tensor:
        """alpha / rank * B A, the (out, in) update the adapter adds to ``weight``."""
        return ops.matmul(self.lora_B, self.lora_A) * self.scaling


def adapters(network: nn.Cell) -> list[LoRADense]:
    return [cell for _, cell in network.cells_and_names() if isinstance(cell, LoRADense)]


def is_adapter(name: str) -> bool:
    return name.endswith(ADAPTERS)


def freeze_base(network: nn.Cell) -> None:
    """Only the adapters train; every other weight keeps its (pretrained) value."""
    for p in network.get_parameters():
        p.requires_grad = is_adapter(p.name)


def merge(network: nn.Cell) -> int:
    """W <- W + alpha / rank * B A in every adapted layer, which then runs as a plain Dense.
    Returns how many layers were merged."""
    merged = 0
    for cell in adapters(network):
        if not cell.merged:
            cell.weight.set_data(cell.weight + cell.delta().astype(cell.weight.dtype))
            cell.merged = True
            merged += 1
    return merged


class SaveAdapters(Callback):
    """A callback (see the module docstring): ``best-adapters.ckpt`` at every new best."""

    def on_eval_end(self, progress, metrics) -> None:
        if progress.improved and progress.is_main:
            meta = {"format": 1, "state": progress.state, "config": progress.cfg.to_dict(),
                    "task_meta": progress.data.meta}
            save_adapters(progress.run_dir / "best-adapters.ckpt", progress.network, meta)


def save_adapters(path: str | Path, network: nn.Cell, meta: dict) -> int:
    """An adapter-only checkpoint: the A and B matrices (a fraction of a percent of a large
    model) and ``meta`` (its config names the base in ``model.pretrained``). Returns bytes written."""
    from ....engine import checkpoint

    params = [p for p in network.get_parameters() if is_adapter(p.name)]
    holder = _Holder(params)
    checkpoint.save(Path(path), [holder], {**meta, "adapters_only": True})
    return Path(path).stat().st_size


class _Holder:
    """A plain object whose attributes are the parameters to save (``checkpoint.save`` reads vars())."""

    def __init__(self, params):
        for i, p in enumerate(params):
            setattr(self, f"p{i}", p)
