"""``train(cfg, resume=...)``: the training API: the core loop with the layers of a run around it.

    from my_project.run.train import train
    from my_project.tasks import load_config

    summary = train(load_config("config/config.yaml", ["train.epochs=1"]), resume="auto")

Around ``engine.loop.fit``: console, health watch, manifest and plot, loggers, your callbacks."""

from __future__ import annotations

from typing import Any

from ..engine.loop import Run, fit, setup
from ..engine.schema import Config
from ..engine.seams import present
from ..engine.task import Task
from ..logs.callbacks import Callback, load_user_callbacks
from ..logs.console import ProgressBar, console
from ..logs.loggers import build_loggers
from ..logs.loggers import require as require_loggers
from ..tasks import get_task
from .watch import Watch


def train(cfg: Config, resume: str | None = None, callbacks: list[Callback] = (), task: Task | None = None,
          run: Run | None = None) -> dict[str, Any]:
    """Train as ``cfg`` says (``resume``: a checkpoint or ``auto``; ``run``: from ``engine.loop.setup``)."""
    require_loggers(cfg.output.loggers)  # before any heavy work
    task = task or (run.task if run else get_task(cfg.task))
    with console() as screen:
        run = run or setup(cfg, task, resume)
        cfg = run.cfg
        layers = [Watch(), ProgressBar(screen)]
        if present("run.manifest"):  # the reports feature's manifest.json, in every run
            from .manifest import Manifest

            layers.append(Manifest())
        if cfg.output.plot:  # the reports feature's (the config refuses output.plot without it)
            from ..logs.reports import CurvePlot

            layers.append(CurvePlot(run.run_dir))
        # Loggers after the files they may upload at the end (mlflow: checkpoints, curves).
        layers += build_loggers(cfg.output.loggers, run.run_dir)
        return fit(cfg, task, callbacks=[*layers, *load_user_callbacks(cfg.train.callbacks), *callbacks], run=run)
