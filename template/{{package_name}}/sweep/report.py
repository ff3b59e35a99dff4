"""Inside a trial: report each evaluation of the sweep's metric to the study, stop when pruned.

``sweep.py`` adds this callback to the trial's ``train.callbacks`` and says which study and
trial it is in the ``SWEEP_*`` environment variables. At the end the trial's outcome goes to
``sweep.json`` in its run folder, which ``sweep.py`` reads (it alone tells the study).
"""

from __future__ import annotations

import json
import logging
import os

from ..engine.errors import ConfigError
from ..logs.callbacks import Callback
from .study import make_pruner, open_storage, optuna

log = logging.getLogger(__name__)


class ReportToStudy(Callback):
    def __init__(self):
        env = os.environ
        self.metric, self.maximize = env["SWEEP_METRIC"], env["SWEEP_DIRECTION"] == "maximize"
        prune, startup, warmup = json.loads(env["SWEEP_PRUNER"])
        study = optuna().load_study(study_name=env["SWEEP_STUDY"], storage=open_storage(env["SWEEP_STORAGE"]),
                                    pruner=make_pruner(prune, startup, warmup))
        self.trial = optuna().trial.Trial(study, int(env["SWEEP_TRIAL_ID"]))
        self.best = self.last = None
        self.step, self.pruned, self.reported = 0, False, set()

    def on_eval_end(self, progress, metrics):
        if self.metric not in metrics:
            raise ConfigError(f"sweep metric {self.metric!r} is not among this run's metrics "
                              f"({', '.join(metrics)})")
        value, step = float(metrics[self.metric]), progress.step
        self.last, self.step = value, step
        if self.best is None or (value > self.best if self.maximize else value < self.best):
            self.best = value
        if not progress.is_main or step in self.reported:
            return
        self.reported.add(step)
        self.trial.report(value, step)
        if self.trial.should_prune():
            self.pruned = True
            progress.stop()
            log.info(f"sweep: pruned at step {step} ({self.metric} {value:.4g} is behind the median "
                                "of the finished trials)")

    def on_train_end(self, progress, summary):
        if progress.is_main:
            result = {"value": self.best, "last": self.last, "step": self.step, "pruned": self.pruned}
            (progress.run_dir / "sweep.json").write_text(json.dumps(result), encoding="utf-8")
