"""The contract between the engine and a task: data, a network and its loss, an evaluator, exports.

The engine never branches on the task's name. ``Data.train`` is arrays, a ``TrainSource`` or an
``ExampleSource``; the engine shards it by rank. ``Data.eval`` stays raw: ``evaluate`` prepares it with
``data.meta`` (a checkpoint's own in ``eval.py``, so no statistic of new data leaks in)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from mindspore import Tensor, nn

from . import seams
from .errors import ConfigError
from .schema import Config


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

    # exact: k micro-batches == one batch of k*b; approximate (the loss depends on the batch): a warning
    grad_accum: Literal["exact", "approximate", "none"] = "exact"
    amp: bool = True  # mixed precision with loss scaling and the overflow check
    grad_clip: bool = True
    distributed: bool = True  # data parallel under msrun (gradient all-reduce)
    reason: str = ""  # shown when a feature is refused or approximate

    def check(self, cfg: Config) -> None:
        """Refuse, before any heavy work, what ``cfg`` asks for that is not supported."""
        why = f" ({self.reason})" if self.reason else ""
        if self.grad_accum == "none" and cfg.train.grad_accum_steps > 1:
            raise ConfigError(f"train.grad_accum_steps={cfg.train.grad_accum_steps} is not supported by "
                              f"this {cfg.task} configuration{why}; set it to 1")
        if not self.amp and cfg.train.amp_level not in ("O0", "auto"):
            raise ConfigError(f"train.amp_level={cfg.train.amp_level} is not supported by this {cfg.task} "
                              f"configuration{why}; use O0")
        if not self.amp and cfg.train.on_nonfinite == "skip":  # the same gradient check as AMP's
            raise ConfigError(f"train.on_nonfinite=skip is not supported by this {cfg.task} configuration{why}; "
                              "use stop")
        if not self.grad_clip and cfg.train.grad_clip is not None:
            raise ConfigError(f"train.grad_clip is not supported by this {cfg.task} configuration{why}; "
                              "set it to null")


class TrainSource(Protocol):
    """Rows made on demand: ``take(indices, epoch)``, one array per loss input, the same row for an (index,
    epoch) in any batch (draw randomness from them). Optional ``block_rows``: rows it prefers per call."""

    def __len__(self) -> int: ...
    def take(self, indices: np.ndarray, epoch: int) -> tuple[np.ndarray, ...]: ...


class ExampleSource(Protocol):
    """Examples read cheaply by ``read(index, epoch)`` (randomness from (seed, epoch, index)), made into
    ``outputs`` by ``operations()`` in parallel workers (prefer C++ ops); ``check(index)`` names a bad one."""

    columns: tuple[str, ...]
    outputs: tuple[str, ...]

    def __len__(self) -> int: ...
    def read(self, index: int, epoch: int) -> tuple[np.ndarray, ...]: ...
    def operations(self) -> list[tuple[list, list[str], list[str]]]: ...
    def check(self, index: int) -> None: ...


@dataclass
class Data:
    """Training columns in ``Model.loss``'s order, raw eval data, ``meta`` (JSON, saved in checkpoints)."""

    train: dict[str, np.ndarray] | TrainSource | ExampleSource
    eval: Any  # raw held-out examples, prepared by ``Task.evaluate`` with ``meta``
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Model:
    """``loss(*train_columns)``: a float32 mean, or (sum, weight) when ``loss.summed``; ``constrain()`` runs
    after every applied update (e.g. CLIP's temperature clamp)."""

    network: nn.Cell
    loss: nn.Cell
    constrain: nn.Cell | None = None
    float32_cells: tuple[type, ...] = ()  # Cell classes amp O2 keeps in float32 besides MindSpore's norms
    # For optim.layer_decay: a parameter's name in ``network.parameters_and_names()`` -> its layer,
    # 0 (stem, embeddings) .. ``num_layers`` (the head). None: no layer map, layer_decay is refused.
    layer_id: Callable[[str], int] | None = None
    num_layers: int = 0
    # Names weight decay leaves out besides vectors (timm's ``no_weight_decay``: a ViT's class token).
    no_decay: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    name: str
    load_data: Callable[[Config], Data]  # full data; the engine shards Data.train by rank
    build_model: Callable[[Config, dict, Comm], Model]  # (cfg, meta, comm)
    evaluate: Callable[[nn.Cell, Data, Config], dict[str, float]]  # on arrays.budget's examples; "examples"
    monitor: str | Callable[[Config], str]  # metric that picks the best checkpoint (or cfg -> metric)
    mode: Literal["max", "min"]
    # The metrics ``evaluate`` always returns (or cfg -> them); the monitor is one.
    metrics: tuple[str, ...] | Callable[[Config], tuple[str, ...]]
    # name -> (cell, example inputs) for MINDIR export; axis 0 of every input becomes dynamic
    exports: Callable[[nn.Cell, dict, Config], dict[str, tuple[nn.Cell, tuple[Tensor, ...]]]]
    # An exported network's output: name -> (its name in the graph, what it means), in <name>.json
    outputs: dict[str, tuple[str, str]] = field(default_factory=dict)
    capabilities: Callable[[Config], Capabilities] = lambda cfg: Capabilities()
    warm_start: Callable[[nn.Cell, Config], None] = lambda network, cfg: None  # fresh runs only: pretrained
    # export.py --format NAME of a folder (nlp: hf): NAME -> (Trained, --out, --dtype) -> {what: path}
    folder_formats: dict[str, Callable[[Any, Path, str], dict[str, Path]]] = field(default_factory=dict)
    fixed_data: tuple[str, ...] = ()  # ``data`` keys the network is built for: eval.py keeps them
    deploy_meta: Callable[[dict, Config], dict] = lambda meta, cfg: meta  # what serving needs: <name>.json
    deploy_arrays: Callable[[dict, Config], dict[str, np.ndarray]] = lambda meta, cfg: {}  # too big for JSON
    # eval.py: (cfg, checkpoint meta) -> data prepared with that meta, not a new fit. None: load_data.
    load_eval_data: Callable[[Config, dict], Data] | None = None

    # What your own eval.metrics functions and train.loss Cell receive ("" = the task does not take them).
    metric_inputs: str = ""
    loss_inputs: str = ""
    # A task's own optim.name values: name -> fn(parameter groups, lr schedule)
    optimizers: dict[str, Callable[[list, Tensor], nn.Optimizer]] = field(default_factory=dict)

    def monitor_for(self, cfg: Config) -> str:
        """train.monitor, or the task's own."""
        return cfg.train.monitor or (self.monitor(cfg) if callable(self.monitor) else self.monitor)

    def mode_for(self, cfg: Config) -> Literal["max", "min"]:
        """train.monitor_mode, or the task's own for its own monitor."""
        return cfg.train.monitor_mode or self.mode

    def metrics_for(self, cfg: Config) -> tuple[str, ...]:
        """The task's metrics, then eval.metrics' names."""
        own = self.metrics(cfg) if callable(self.metrics) else self.metrics
        return (*own, *(seams.metric_name(spec) for spec in cfg.eval.metrics))

    def check_seams(self, cfg: Config) -> None:
        """Refuse user code the task does not take, and a train.monitor not reported or without its mode."""
        for key, value, takes in (("eval.metrics", cfg.eval.metrics, self.metric_inputs),
                                  ("train.loss", cfg.train.loss, self.loss_inputs)):
            if value and not takes:
                raise ConfigError(f"{key}: the {cfg.task} task does not take your own yet; leave it empty")
        # Your code is imported now, before any data is read: a wrong name or kind costs nothing.
        named = [("optim.name", cfg.optim.name, {"base": nn.Optimizer}), ("optim.schedule", cfg.optim.schedule,
                 {"function": True}), ("train.loss", cfg.train.loss, {"base": nn.Cell}),
                 ("model.arch", getattr(cfg.model, "arch", None), {"base": nn.Cell}),
                 *(("eval.metrics", spec, {"function": True}) for spec in cfg.eval.metrics)]
        for key, value, kind in named:
            if seams.is_spec(value):
                seams.load(key, value, **kind)
        monitor, reported = self.monitor_for(cfg), self.metrics_for(cfg)
        if len(set(reported)) < len(reported):
            twice = next(name for name in reported if reported.count(name) > 1)
            raise ConfigError(f"eval.metrics: {twice} is reported twice (the {cfg.task} task reports "
                              f"{', '.join(self.metrics_for(cfg)[:-len(cfg.eval.metrics)])}); rename your function")
        if monitor not in reported:
            raise ConfigError(f"train.monitor={monitor}: this {cfg.task} run reports {', '.join(reported)}; "
                              "pick one, or add your metric to eval.metrics")
        own = self.monitor(cfg) if callable(self.monitor) else self.monitor
        if cfg.train.monitor_mode is None and monitor != own:
            raise ConfigError(f"train.monitor={monitor}: set train.monitor_mode (max: higher is better, or min)")
