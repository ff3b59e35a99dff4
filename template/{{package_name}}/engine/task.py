"""The contract between the engine and a task: what a task provides, what the engine does with it.

A task contributes data, a network, a loss, an evaluator and exports. It declares which
engine features are valid for it (``Capabilities``); the engine refuses the rest before
training starts. The engine never branches on the task's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np
from mindspore import Tensor, nn


@dataclass(frozen=True)
class Comm:
    """Where this process sits in a data-parallel job (rank 0 of 1 when run plainly)."""

    rank: int = 0
    size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


@dataclass(frozen=True)
class Capabilities:
    """Engine features a task (in a given configuration) supports."""

    # "exact": k micro-batches == one batch of k*b; "approximate": trains, but the loss
    # depends on the batch (e.g. contrastive negatives), so the engine warns; "none": refused.
    grad_accum: Literal["exact", "approximate", "none"] = "exact"
    amp: bool = True  # mixed precision with loss scaling and the overflow check
    grad_clip: bool = True
    distributed: bool = True  # data parallel under msrun (gradient all-reduce)
    reason: str = ""  # shown when a feature is refused or approximate


@dataclass
class Data:
    """Arrays for training and evaluation. Columns keep their order: it is the order in
    which ``Model.loss`` receives them. ``meta`` is JSON-serialisable (vocabulary, class
    names, id maps...) and is saved in every checkpoint so inference can rebuild it."""

    train: dict[str, np.ndarray]
    eval: Any
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Model:
    """``network`` is what gets evaluated, exported and mixed-precision cast;
    ``loss`` is a Cell whose ``construct(*train_columns)`` returns a scalar loss."""

    network: nn.Cell
    loss: nn.Cell


@dataclass(frozen=True)
class Task:
    name: str
    load_data: Callable[[Any], Data]  # (cfg) -> Data, full data; the engine shards by rank
    build_model: Callable[[Any, dict, Comm], Model]  # (cfg, meta, comm)
    evaluate: Callable[[nn.Cell, Data, Any], dict[str, float]]  # whole eval set -> metrics
    monitor: str | Callable[[Any], str]  # metric that picks the best checkpoint (or cfg -> metric)
    mode: Literal["max", "min"]
    exports: Callable[[nn.Cell, dict, Any], dict[str, tuple[nn.Cell, tuple[Tensor, ...]]]]
    capabilities: Callable[[Any], Capabilities] = lambda cfg: Capabilities()
    # Called on fresh training runs only (not on resume or inference), e.g. to load pretrained weights.
    warm_start: Callable[[nn.Cell, Any], None] = lambda network, cfg: None

    def monitor_for(self, cfg) -> str:
        return self.monitor(cfg) if callable(self.monitor) else self.monitor
