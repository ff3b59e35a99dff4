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


class CurvePlot(Callback):
    """``curves.png``: train loss and every eval metric against optimizer steps."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir

    def on_train_end(self, progress, summary):
        if not progress.is_main or not progress.history:
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        train = [row for row in progress.history if row["kind"] == "train"]
        evals = [row for row in progress.history if row["kind"] == "eval"]
        names = [k for k in (evals[0] if evals else {}) if k not in ("kind", "step", "epoch", "examples")]
        fig, axes = plt.subplots(1, 1 + len(names), figsize=(4 * (1 + len(names)), 3), squeeze=False)
        axes[0, 0].plot([r["step"] for r in train], [r["loss"] for r in train])
        axes[0, 0].set(title="train loss", xlabel="step")
        for ax, name in zip(axes[0, 1:], names):
            ax.plot([r["step"] for r in evals], [r[name] for r in evals], marker="o")
            ax.set(title=f"eval {name}", xlabel="step")
        fig.tight_layout()
        fig.savefig(self.run_dir / "curves.png", dpi=100)
        plt.close(fig)


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
