"""Callbacks: every hook gets a read-only ``Progress`` (``engine/progress.py``); ``progress.stop()``
ends the run after this step. Yours: ``train.callbacks: ["my_module:MyCallback"]`` (no arguments)::

    class StopAtLoss(Callback):
        def on_step_end(self, progress, logs):
            if logs["loss"] < 0.1:
                progress.stop()

Every rank runs the hooks (so all ranks stop together); only rank 0 writes files."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from ..engine.errors import ConfigError


class Callback:
    """Every hook, doing nothing: override the ones you need."""

    def on_train_begin(self, progress) -> None: ...
    def on_step_end(self, progress, logs: dict[str, Any]) -> None: ...
    def on_epoch_end(self, progress, epoch: int) -> None: ...
    def on_eval_end(self, progress, metrics: dict[str, float]) -> None: ...
    def on_train_end(self, progress, summary: dict[str, Any]) -> None: ...


def load_user_callbacks(specs: list[str]) -> list[Callback]:
    callbacks = []
    for spec in specs:
        module_name, _, class_name = spec.partition(":")
        try:
            callbacks.append(getattr(importlib.import_module(module_name), class_name)())
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigError(f"train.callbacks: cannot load {spec!r} ({exc})") from None
    return callbacks


class Logger(Callback, ABC):
    """Calls ``write(kind, row)`` on rank 0 for every logged train row and every evaluation."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir

    def on_step_end(self, progress, logs):
        if progress.is_main:
            self.write("train", logs)

    def on_eval_end(self, progress, metrics):
        if progress.is_main:
            self.write("eval", {"step": progress.step, "epoch": progress.epoch, **metrics})

    @abstractmethod
    def write(self, kind: str, row: dict[str, Any]) -> None:
        """Record one row (``kind`` is "train" or "eval"): each logger says where."""
