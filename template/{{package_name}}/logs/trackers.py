"""The TensorBoard and MLflow loggers of ``output.loggers`` (the optional ``loggers`` feature).

- ``tensorboard``: event files in the run folder, written by tensorboardX (no TensorFlow):
  ``train/loss``, ``train/lr``, ``train/loss_scale``... and ``eval/<metric>``.
  View them with ``tensorboard --logdir runs``.
- ``mlflow``: one MLflow run per training: the resolved config as params (``train.batch_size``),
  the same metrics, and at the end the run folder (checkpoints, curves, manifest) as artifacts.
  Tracks to ``MLFLOW_TRACKING_URI`` or else ``./mlruns``; experiment ``MLFLOW_EXPERIMENT_NAME``
  or else the task's name. View with ``mlflow ui --backend-store-uri ./mlruns``.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from pathlib import Path
from typing import Any

from ..engine.config import flatten
from ..engine.errors import ConfigError
from .callbacks import Logger

# logger -> the module it imports (the extra of the same name installs it)
OPTIONAL = {"tensorboard": "tensorboardX", "mlflow": "mlflow"}


def require(names: list[str]) -> None:
    """Refuse, naming the extra to install, a chosen logger whose package is missing."""
    for name in names:
        if name in OPTIONAL:
            try:
                importlib.import_module(OPTIONAL[name])
            except ImportError:
                raise ConfigError(f"output.loggers: {name} needs {OPTIONAL[name]}, which is not installed: "
                                  f'pip install -e ".[{name}]"') from None


def scalars(row: dict[str, Any]) -> dict[str, float]:
    """The row's values to plot against its step (its position keys left out)."""
    return {k: float(v) for k, v in row.items() if k not in ("step", "epoch") and isinstance(v, (int, float))}


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


TRACKERS: dict[str, type[Logger]] = {"tensorboard": TensorBoardLogger, "mlflow": MlflowLogger}
