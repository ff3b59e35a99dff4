"""Callbacks: the trainer calls every hook in order; a hook may set ``trainer.should_stop``.

Built in: progress bar, metrics log (JSONL or CSV), checkpoints (last + best), early
stopping, curve plot. Add your own in config (``train.callbacks: ["my_module:MyCallback"]``,
constructed without arguments) or pass instances to ``engine.trainer.train``::

    class StopAtLoss(Callback):
        def on_step_end(self, trainer, logs):
            trainer.should_stop = logs["loss"] < 0.1

Only rank 0 writes files; every rank runs the hooks (so all ranks stop together).
"""

from __future__ import annotations

import csv
import importlib
import json
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .errors import ConfigError
from .schema import Config


class Callback:
    def on_train_begin(self, trainer) -> None: ...
    def on_step_end(self, trainer, logs: dict[str, Any]) -> None: ...
    def on_epoch_end(self, trainer, epoch: int) -> None: ...
    def on_eval_end(self, trainer, metrics: dict[str, float]) -> None: ...
    def on_train_end(self, trainer, summary: dict[str, Any]) -> None: ...


class ProgressBar(Callback):
    def on_train_begin(self, trainer):
        self.bar = tqdm(total=trainer.total_steps, initial=trainer.state.step, unit="step",
                        disable=None if trainer.comm.is_main else True, dynamic_ncols=True)

    def on_step_end(self, trainer, logs):
        self.bar.update(logs["step"] - self.bar.n)
        self.bar.set_postfix(loss=f"{logs['loss']:.4f}", lr=f"{logs['lr']:.2e}",
                             samples_s=f"{logs['samples_per_s']:.0f}", refresh=False)

    def on_eval_end(self, trainer, metrics):
        if trainer.comm.is_main:
            text = "  ".join(f"{k} {v:.4f}" for k, v in metrics.items())
            self.bar.write(f"eval @ step {trainer.state.step}: {text}")

    def on_train_end(self, trainer, summary):
        self.bar.close()


class MetricsLog(Callback):
    """One row per logged train step and per evaluation, in the run folder."""

    def __init__(self, run_dir: Path, fmt: str):
        self.run_dir, self.fmt = run_dir, fmt

    def on_step_end(self, trainer, logs):
        self._write(trainer, "train", logs)

    def on_eval_end(self, trainer, metrics):
        self._write(trainer, "eval", {"step": trainer.state.step, "epoch": trainer.state.epoch, **metrics})

    def _write(self, trainer, kind: str, row: dict[str, Any]) -> None:
        trainer.history.append({"kind": kind, **row})
        if not trainer.comm.is_main:
            return
        if self.fmt == "jsonl":
            with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps({"kind": kind, **row}) + "\n")
            return
        path = self.run_dir / f"metrics_{kind}.csv"
        new = not path.exists()
        with open(path, "a", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)


class Checkpoints(Callback):
    """``last.ckpt`` after every evaluation and at the end; ``best.ckpt`` when the monitored metric improves."""

    def on_eval_end(self, trainer, metrics):
        if trainer.state.improved:
            trainer.save_checkpoint("best.ckpt")
        trainer.save_checkpoint("last.ckpt")

    def on_train_end(self, trainer, summary):
        trainer.save_checkpoint("last.ckpt")


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
        names = [k for k in (evals[0] if evals else {}) if k not in ("kind", "step", "epoch")]
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
    callbacks = [ProgressBar(), MetricsLog(run_dir, cfg.output.metrics_format), Checkpoints()]
    if cfg.train.early_stop_patience:
        callbacks.append(EarlyStopping(cfg.train.early_stop_patience))
    if cfg.output.plot:
        callbacks.append(CurvePlot(run_dir))
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
