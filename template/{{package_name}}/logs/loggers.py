"""Metric loggers, chosen by ``output.loggers``: where every logged train row and every
evaluation go. Only rank 0 writes. Each is a callback; ``build_loggers`` makes the chosen ones.

- ``jsonl`` (default): ``metrics.jsonl``, one JSON object a line (``"kind": "train" | "eval"``).
  Non-finite numbers (a diverged loss) are written as ``null``, so every line is strict JSON.
  A line that cannot be written (a full disk) is taken back whole and said once; training goes
  on (its checkpoints say for themselves whether they were written).
- ``csv``: ``metrics_train.csv`` and ``metrics_eval.csv``.
- ``tensorboard``: event files in the run folder, written by tensorboardX (no TensorFlow):
  ``train/loss``, ``train/lr``, ``train/loss_scale``... and ``eval/<metric>``.
  View them with ``tensorboard --logdir runs``.
- ``mlflow``: one MLflow run per training: the resolved config as params (``train.batch_size``),
  the same metrics, and at the end the run folder (checkpoints, curves, manifest) as artifacts.
  Tracks to ``MLFLOW_TRACKING_URI`` or else ``./mlruns``; experiment ``MLFLOW_EXPERIMENT_NAME``
  or else the task's name. View with ``mlflow ui --backend-store-uri ./mlruns``.

``tensorboard`` and ``mlflow`` are optional extras of this project (``pip install -e
".[tensorboard]"``, ``".[mlflow]"``), imported only when chosen; ``require`` checks them
before the run starts.
"""

from __future__ import annotations

import csv
import importlib
import json
import logging
import math
import os
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from ..engine.config import flatten
from ..engine.errors import ConfigError
from .callbacks import Callback

log = logging.getLogger(__name__)

# logger -> the module it imports (the extra of the same name installs it)
OPTIONAL = {"tensorboard": "tensorboardX", "mlflow": "mlflow"}


def require(names: list[str]) -> None:
    """Stop with one line naming the extra to install when a chosen logger's package is missing."""
    for name in names:
        if name in OPTIONAL:
            try:
                importlib.import_module(OPTIONAL[name])
            except ImportError:
                raise ConfigError(f"output.loggers: {name} needs {OPTIONAL[name]}, which is not installed: "
                                  f'pip install -e ".[{name}]"') from None


def build_loggers(names: list[str], run_dir: Path) -> list[Callback]:
    kinds = {"jsonl": JsonlLogger, "csv": CsvLogger, "tensorboard": TensorBoardLogger, "mlflow": MlflowLogger}
    return [kinds[name](run_dir) for name in dict.fromkeys(names)]


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


def scalars(row: dict[str, Any]) -> dict[str, float]:
    """The row's values to plot against its step (its position keys left out)."""
    return {k: float(v) for k, v in row.items() if k not in ("step", "epoch") and isinstance(v, (int, float))}


class JsonlLogger(Logger):
    failing = False  # the last write failed (said once until one succeeds again)

    def write(self, kind, row):
        finite = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}
        line = (json.dumps({"kind": kind, **finite}) + "\n").encode("utf-8")
        path = self.run_dir / "metrics.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            end = os.lseek(fd, 0, os.SEEK_END)
            try:
                rest = memoryview(line)
                while rest:
                    rest = rest[os.write(fd, rest):]
                self.failing = False
            except OSError as exc:  # a full disk, a quota: no half line is left behind
                os.ftruncate(fd, end)
                if not self.failing:
                    log.warning(f"warning: could not write {path} ({exc.strerror}): its rows are missing "
                                f"from step {row.get('step')} until there is space; training goes on")
                self.failing = True
        finally:
            os.close(fd)


class CsvLogger(Logger):
    def write(self, kind, row):
        path = self.run_dir / f"metrics_{kind}.csv"
        new = not path.exists()
        with open(path, "a", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)


class TensorBoardLogger(Logger):
    def on_train_begin(self, progress):
        if progress.is_main:
            from tensorboardX import SummaryWriter

            # A resumed run rewrites what came after its checkpoint: purge those steps.
            self.writer = SummaryWriter(str(self.run_dir), purge_step=progress.step + 1)

    def write(self, kind, row):
        for name, value in scalars(row).items():
            self.writer.add_scalar(f"{kind}/{name}", value, row["step"])

    def on_train_end(self, progress, summary):
        if progress.is_main:
            self.writer.close()


class MlflowLogger(Logger):
    """Logs through ``MlflowClient`` (no global active run), so several trainings in one
    process (tests, sweeps) each get their own MLflow run."""

    def on_train_begin(self, progress):
        if not progress.is_main:
            return
        from mlflow import MlflowClient
        from mlflow.entities import Param

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:  # the plain-folder store; MLflow >= 3.7 asks for this opt-in to use it
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = Path("mlruns").resolve().as_uri()
        self.client = MlflowClient(tracking_uri=uri)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or progress.cfg.task
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
        self.run_id = self.client.create_run(experiment_id, run_name=self.run_dir.name,
                                             tags={"run_dir": str(self.run_dir)}).info.run_id
        params = [Param(key, json.dumps(value) if isinstance(value, (list, dict)) else str(value))
                  for key, value in flatten(progress.cfg.to_dict()).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params per call
            self.client.log_batch(self.run_id, params=params[i:i + 100])

    def write(self, kind, row):
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(f"{kind}/{name}", value, now, row["step"]) for name, value in scalars(row).items()]
        self.client.log_batch(self.run_id, metrics=metrics)

    def on_train_end(self, progress, summary):
        if progress.is_main:  # runs after the checkpoints and the curves are written
            self.client.log_artifacts(self.run_id, str(self.run_dir))
            self.client.set_terminated(self.run_id)
