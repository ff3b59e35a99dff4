"""Rebuild a trained network from a checkpoint alone (config and task meta travel inside it)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from mindspore import nn

from ..engine import checkpoint, runtime
from ..engine.arrays import budget_note
from ..engine.config import apply_override, flatten, named_in_project
from ..engine.errors import ConfigError
from ..engine.schema import Config
from ..engine.seams import untrusted
from ..engine.task import Comm, Task
from ..tasks import available, build_config, get_task


@dataclass
class Trained:
    cfg: Config
    task: Task
    meta: dict[str, Any]  # the task meta saved at training time (vocabulary, classes...)
    network: nn.Cell
    state: dict[str, Any]


def load_trained(path: str, overrides: list[str] = ()) -> Trained:
    """``overrides`` may point at other data (e.g. ``data.path=...``) but not change the model."""
    params, meta = checkpoint.read(path, tasks=available())
    raw, given = json.loads(json.dumps(meta["config"])), {}
    for item in overrides:
        if item.startswith("model."):
            raise ConfigError(f"--set {item}: the model is the checkpoint's own; only data and runtime may change")
        apply_override(raw, item)
        apply_override(given, item)
    saved = build_config(meta["config"], source=f"{path} (saved config)")
    cfg = build_config(raw, source=f"{path} (saved config)")
    # The code it names (model.arch: my_code:MyCNN) must be named by your config files or --set.
    untrusted(flatten(cfg.to_dict()), named_in_project(flatten(given)), path)
    runtime.setup(cfg)
    task = get_task(cfg.task)
    for key in task.fixed_data:  # what the network was built and evaluated for stays as it was trained
        if getattr(cfg.data, key) != getattr(saved.data, key):
            raise ConfigError(f"data.{key}={getattr(cfg.data, key)!r}: {path} was trained with "
                              f"data.{key}={getattr(saved.data, key)!r}; a checkpoint is evaluated as it was trained")
    network = task.build_model(cfg, meta["task_meta"], Comm()).network
    checkpoint.restore(params, network)
    network.set_train(False)
    return Trained(cfg, task, meta["task_meta"], network, meta["state"])


def evaluate_checkpoint(path: str, overrides: list[str] = ()) -> dict[str, float]:
    """Every eval example, unless ``overrides`` set ``eval.max_examples`` (the note goes to stderr)."""
    trained = load_trained(path, overrides)
    if not any(item.startswith("eval.max_examples=") for item in overrides):
        trained.cfg.eval.max_examples = None  # the training run's budget was for evaluations during training
    task = trained.task
    data = task.load_eval_data(trained.cfg, trained.meta) if task.load_eval_data else task.load_data(trained.cfg)
    data.meta = trained.meta  # evaluate with the training-time meta (normalisation, vocabulary)
    metrics = trained.task.evaluate(trained.network, data, trained.cfg)
    print(budget_note(trained.cfg.eval.max_examples, int(metrics["examples"])), file=sys.stderr)
    return metrics
