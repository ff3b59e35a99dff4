"""The contract between the engine and a task: what a task provides, what the engine does with it.

A task contributes data, a network, a loss, an evaluator and exports. It declares which
engine features are valid for it (``Capabilities``); the engine refuses the rest before
training starts. The engine never branches on the task's name.

What the engine relies on:
- ``load_data(cfg)`` returns all of the data; the engine shards ``Data.train`` by rank.
- ``Data.train`` is one of three kinds, all batched, shuffled, sharded and resumed alike
  (``engine/data.py``):
  - a dict of equal-length arrays, ready to batch (normalised, tokenised...): small data;
  - a ``TrainSource`` that makes rows on demand in NumPy (e.g. sampled negatives, drawn
    anew each epoch), for rows too many to materialise;
  - an ``ExampleSource`` that reads one example at a time (e.g. an image file's bytes and its
    label) and names the transforms (decode, augment, resize, normalise) that
    ``mindspore.dataset`` runs in ``data.workers`` parallel workers (``engine/pipeline.py``):
    data bigger than memory, decoded as it is read, never up front.
  ``Data.eval`` stays raw: ``evaluate`` prepares it with ``data.meta``, which is the training
  run's own meta when ``eval.py`` scores a checkpoint on other data (so no statistic of the
  new data leaks in). A task whose data is prepared with a fitted vocabulary says how to read
  eval data with a checkpoint's meta (``Task.load_eval_data``: e.g. a tokenizer), so
  ``eval.py`` never fits a new one only to throw it away; the same hook maps other data onto
  the checkpoint's labels (e.g. class folders by name) without measuring anything.
- ``data.meta`` is JSON-serialisable and is everything ``build_model``, ``evaluate`` and
  ``exports`` need besides the config: it is saved in every checkpoint.
- ``evaluate`` scores at most ``cfg.eval.max_examples`` eval examples: the subset
  ``engine.arrays.budget`` picks (the same at every evaluation), and says how many in the
  ``examples`` entry of its metrics.
- The loss lives next to the network, in the task's ``model.py``.
"""

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

    # "exact": k micro-batches == one batch of k*b; "approximate": trains, but the loss
    # depends on the batch (e.g. contrastive negatives), so the engine warns; "none": refused.
    grad_accum: Literal["exact", "approximate", "none"] = "exact"
    amp: bool = True  # mixed precision with loss scaling and the overflow check
    grad_clip: bool = True
    distributed: bool = True  # data parallel under msrun (gradient all-reduce)
    reason: str = ""  # shown when a feature is refused or approximate

    def check(self, cfg: Config) -> None:
        """Refuse, before any heavy work, the engine features ``cfg`` asks for that are not supported."""
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
    """Training rows made on demand. ``take(indices, epoch)`` returns one array per loss input
    (in the order ``Model.loss`` receives them), row i of each for example ``indices[i]`` in
    that epoch. An (index, epoch) pair must give the same row every time, whatever else is in
    the batch: exact resume, accumulation and sharding rely on it (so draw randomness from
    (seed, epoch, index), not from a running generator); a new epoch draws anew (fresh
    negatives, other window offsets). Optionally ``block_rows``: rows it prefers per ``take``
    when each call has a fixed cost (the engine then asks for several batches at once)."""

    def __len__(self) -> int: ...
    def take(self, indices: np.ndarray, epoch: int) -> tuple[np.ndarray, ...]: ...


class ExampleSource(Protocol):
    """Examples read one at a time and transformed by ``mindspore.dataset``.

    ``read(index, epoch)`` returns one array per name in ``columns`` and must be cheap (file
    bytes, a label, a few numbers): decoding belongs in ``operations()``, a list of
    ``(ops, input_columns, output_columns)`` applied in order in parallel workers (prefer
    ``mindspore.dataset.vision`` C++ ops: Python ops hold the GIL). After them, ``outputs``
    name the columns a batch holds, in the order ``Model.loss`` receives them. Randomness
    (augmentation) must come from (seed, epoch, index), drawn in ``read`` and passed as a
    column, so a resumed run and any number of workers see the same examples.
    ``check(index)`` raises ``DataError`` naming the example if it cannot be read: the engine
    calls it to say which one stopped the pipeline. A source of files may name them,
    ``files`` (one path per example): the engine then reads their bytes in C++ as a first
    column ``image``, zipped with what ``read`` returns (``images/files.py``)."""

    columns: tuple[str, ...]
    outputs: tuple[str, ...]

    def __len__(self) -> int: ...
    def read(self, index: int, epoch: int) -> tuple[np.ndarray, ...]: ...
    def operations(self) -> list[tuple[list, list[str], list[str]]]: ...
    def check(self, index: int) -> None: ...


@dataclass
class Data:
    """Arrays for training and evaluation. Columns (a dict, or a ``TrainSource``'s ``take``)
    keep their order: it is the order in which ``Model.loss`` receives them. ``meta`` is
    JSON-serialisable (vocabulary, class names, id maps...) and is saved in every checkpoint
    so inference can rebuild it."""

    train: dict[str, np.ndarray] | TrainSource | ExampleSource
    eval: Any  # raw held-out examples, prepared by ``Task.evaluate`` with ``meta``
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Model:
    """``network`` is what gets evaluated, exported and mixed-precision cast;
    ``loss`` is a Cell whose ``construct(*train_columns)`` returns a scalar loss (float32), a
    mean; or, when the Cell's ``summed`` is true, a (sum, weight) pair that the step divides by
    the whole optimizer step's weight (e.g. token losses and their count: engine/step.py);
    ``constrain``, if any, a Cell whose ``construct()`` the step runs after every applied
    update (e.g. CLIP's temperature clamp)."""

    network: nn.Cell
    loss: nn.Cell
    constrain: nn.Cell | None = None
    float32_cells: tuple[type, ...] = ()  # Cell classes amp O2 keeps in float32 besides MindSpore's norms
    # For optim.layer_decay: a parameter's name in ``network.parameters_and_names()`` -> its layer,
    # 0 (stem, embeddings) .. ``num_layers`` (the head). None: no layer map, layer_decay is refused.
    layer_id: Callable[[str], int] | None = None
    num_layers: int = 0
    # Parameters weight decay leaves out besides vectors (biases, norms), by their last name (timm's
    # ``no_weight_decay``: a ViT's class token and position embedding).
    no_decay: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    name: str
    load_data: Callable[[Config], Data]  # full data; the engine shards Data.train by rank
    build_model: Callable[[Config, dict, Comm], Model]  # (cfg, meta, comm)
    # (network, data, cfg) -> metrics over the eval set, or over cfg.eval.max_examples of it; with "examples"
    evaluate: Callable[[nn.Cell, Data, Config], dict[str, float]]
    monitor: str | Callable[[Config], str]  # metric that picks the best checkpoint (or cfg -> metric)
    mode: Literal["max", "min"]
    # The metrics ``evaluate`` always returns (or cfg -> them): what sweep.py may optimise; the monitor is one.
    metrics: tuple[str, ...] | Callable[[Config], tuple[str, ...]]
    # name -> (cell, example inputs) for MINDIR export; axis 0 of every input becomes dynamic
    exports: Callable[[nn.Cell, dict, Config], dict[str, tuple[nn.Cell, tuple[Tensor, ...]]]]
    capabilities: Callable[[Config], Capabilities] = lambda cfg: Capabilities()
    # Called on fresh training runs only (not on resume or inference), e.g. to load pretrained weights.
    warm_start: Callable[[nn.Cell, Config], None] = lambda network, cfg: None
    # export.py --format NAME for formats that are a folder of their own (nlp: hf):
    # NAME -> (the loaded deploy.inference.Trained, the --out folder, --dtype) -> {what: path}
    folder_formats: dict[str, Callable[[Any, Path, str], dict[str, Path]]] = field(default_factory=dict)
    # ``data`` keys the trained network is built for: eval.py refuses to change them.
    fixed_data: tuple[str, ...] = ()
    # (meta, cfg) -> what a deployed MINDIR needs besides the graph, written to <name>.json by export.py
    deploy_meta: Callable[[dict, Config], dict] = lambda meta, cfg: meta
    # (meta, cfg) -> arrays serving needs that are too big for JSON (recommender: each user's seen
    # items), written to <name>.npz beside <name>.json
    deploy_arrays: Callable[[dict, Config], dict[str, np.ndarray]] = lambda meta, cfg: {}
    # eval.py: (cfg, the checkpoint's meta) -> the data, prepared with that meta (e.g. tokenised with
    # the training-time vocabulary) instead of fitting a new one. None: ``load_data(cfg)``.
    load_eval_data: Callable[[Config, dict], Data] | None = None

    # What your own eval.metrics functions and train.loss Cell receive ("" = the task does not take them).
    metric_inputs: str = ""
    loss_inputs: str = ""
    # A task's own optimizers besides the engine's (optim.name): name -> fn(parameter groups, lr schedule)
    optimizers: dict[str, Callable[[list, Tensor], nn.Optimizer]] = field(default_factory=dict)

    def monitor_for(self, cfg: Config) -> str:
        """train.monitor, or the task's own."""
        return cfg.train.monitor or (self.monitor(cfg) if callable(self.monitor) else self.monitor)

    def mode_for(self, cfg: Config) -> Literal["max", "min"]:
        """train.monitor_mode, or the task's own for its own monitor."""
        return cfg.train.monitor_mode or self.mode

    def metrics_for(self, cfg: Config) -> tuple[str, ...]:
        """What ``evaluate`` reports: the task's metrics, then eval.metrics' (each function's name)."""
        own = self.metrics(cfg) if callable(self.metrics) else self.metrics
        return (*own, *(seams.metric_name(spec) for spec in cfg.eval.metrics))

    def check_seams(self, cfg: Config) -> None:
        """Refuse eval.metrics or train.loss where the task does not take them, a train.monitor the
        run does not report, or another metric than the task's without its mode."""
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
