"""Callbacks: the trainer calls every hook in order; a hook may set ``trainer.should_stop``.

Built in: progress (``console.py``), history, checkpoints (last + best), the eval budget
note, early stopping, curve plot, and the metric loggers of ``output.loggers``
(``loggers.py``). Add your own in config (``train.callbacks: ["my_module:MyCallback"]``,
constructed without arguments) or pass instances to ``engine.trainer.train``::

    class StopAtLoss(Callback):
        def on_step_end(self, trainer, logs):
            trainer.should_stop = logs["loss"] < 0.1

Only rank 0 writes files; every rank runs the hooks (so all ranks stop together).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from . import manifest
from .arrays import budget_note
from .errors import ConfigError
from .schema import Config


class Callback:
    def on_train_begin(self, trainer) -> None: ...
    def on_step_end(self, trainer, logs: dict[str, Any]) -> None: ...
    def on_epoch_end(self, trainer, epoch: int) -> None: ...
    def on_eval_end(self, trainer, metrics: dict[str, float]) -> None: ...
    def on_train_end(self, trainer, summary: dict[str, Any]) -> None: ...


class History(Callback):
    """``trainer.history``: every logged train row and evaluation, in memory, on every rank."""

    def on_step_end(self, trainer, logs):
        trainer.history.append({"kind": "train", **logs})

    def on_eval_end(self, trainer, metrics):
        trainer.history.append({"kind": "eval", "step": trainer.state.step, "epoch": trainer.state.epoch, **metrics})


class Checkpoints(Callback):
    """``last.ckpt`` after every evaluation and at the end; ``best.ckpt`` when the monitored metric improves."""

    def on_eval_end(self, trainer, metrics):
        if trainer.state.improved:
            trainer.save_checkpoint("best.ckpt")
        trainer.save_checkpoint("last.ckpt")

    def on_train_end(self, trainer, summary):
        trainer.save_checkpoint("last.ckpt")


class EvalExamples(Callback):
    """Says once how many eval examples the evaluations use (``eval.max_examples``) and
    records it as ``eval_examples`` in ``manifest.json``."""

    def __init__(self):
        self.said = False

    def on_eval_end(self, trainer, metrics):
        if self.said or "examples" not in metrics:
            return
        self.said = True
        trainer.console.say(budget_note(trainer.cfg.eval.max_examples, int(metrics["examples"])))
        if trainer.comm.is_main:
            manifest.update(trainer.run_dir, eval_examples=int(metrics["examples"]))


class EarlyStopping(Callback):
    def __init__(self, patience: int):
        self.patience = patience

    def on_eval_end(self, trainer, metrics):
        if trainer.state.evals_since_best >= self.patience:
            trainer.should_stop = True


class CurvePlot(Callback):
    """``curves.png``: train loss and every eval metric against optimizer steps."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir

    def on_train_end(self, trainer, summary):
        if not trainer.comm.is_main or not trainer.history:
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        train = [row for row in trainer.history if row["kind"] == "train"]
        evals = [row for row in trainer.history if row["kind"] == "eval"]
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


def build_callbacks(cfg: Config, run_dir: Path) -> list[Callback]:
    """The built-in callbacks ``cfg`` asks for, then the user's own from ``train.callbacks``."""
    from .console import Progress  # both build on Callback, defined above
    from .loggers import build_loggers

    callbacks = [Progress(), History(), Checkpoints(), EvalExamples()]
    if cfg.train.early_stop_patience:
        callbacks.append(EarlyStopping(cfg.train.early_stop_patience))
    if cfg.output.plot:
        callbacks.append(CurvePlot(run_dir))
    # Loggers after the files they may upload at the end (mlflow: checkpoints, curves).
    callbacks += build_loggers(cfg.output.loggers, run_dir)
    return callbacks + load_user_callbacks(cfg.train.callbacks)


def load_user_callbacks(specs: list[str]) -> list[Callback]:
    callbacks = []
    for spec in specs:
        module_name, _, class_name = spec.partition(":")
        try:
            callbacks.append(getattr(importlib.import_module(module_name), class_name)())
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigError(f"train.callbacks: cannot load {spec!r} ({exc})") from None
    return callbacks
