"""``python sweep.py``: parse, check the sweep file against the schema, run the trials, report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn

from ..run.cli import guarded

EXAMPLE = "config/sweeps/example.yaml"


def sweep_main() -> NoReturn:
    p = argparse.ArgumentParser(description="Search hyper-parameters with Optuna; each trial runs train.py.")
    p.add_argument("sweep", nargs="?", default=EXAMPLE, help="a sweep file (default: %(default)s)")
    p.add_argument("--trials", type=int, help="finished trials the study should have (default: the file's)")
    p.add_argument("--workers", type=int, default=1, help="trials run at once by this process (default: 1)")
    p.add_argument("--storage", metavar="URL", help="where the study lives: an RDB URL (sqlite:///sweep.db) "
                                                    "or a journal file; default <output.dir>/sweeps/<name>/journal.log")
    p.add_argument("--best", metavar="YAML", help="where the best trial's experiment goes "
                                                  "(default: config/experiments/<name>-best.yaml)")
    p.add_argument("--no-prune", dest="prune", action="store_false", help="run every trial to its end")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="a config override for every trial, e.g. --set train.max_steps=50 (repeatable)")
    args = p.parse_args()

    def main():
        from ..engine.errors import ConfigError
        from .spec import check_sweep
        from .study import Runner, optuna

        if args.workers < 1 or (args.trials is not None and args.trials < 1):
            raise ConfigError("--workers and --trials must be at least 1")
        optuna()  # the extra is installed, before any slower check
        sweep = check_sweep(args.sweep, args.overrides)  # keys and values against the schema
        task = _task(sweep.base)
        sweep.resolve(task.metrics_for(sweep.base), task.monitor_for(sweep.base), task.mode_for(sweep.base))
        runner = Runner(sweep, storage=args.storage, prune=args.prune, trials=args.trials or sweep.spec.trials,
                        root=Path.cwd())
        runner.say(f"{runner.trials} trials, {sweep.direction} {sweep.metric}, study in {runner.storage_url}")
        try:
            runner.run(args.workers)
        except KeyboardInterrupt:
            runner.say("interrupted; run the same command again to continue the study")
            raise
        report(runner, args.best)

    guarded(main)


def _task(cfg):
    from ..tasks import get_task  # imports MindSpore (the task's metrics and mode)

    return get_task(cfg.task)


def report(runner, best: str | None) -> None:
    from .results import plot_history, table, write_best

    print(table(runner.study, runner.sweep))
    plot = plot_history(runner.study, runner.sweep, runner.dir / "history.png")
    best = write_best(runner.study, runner.sweep, Path(best) if best else None)
    runner.say(f"best {runner.sweep.metric} {runner.study.best_value:.4g} (trial {runner.study.best_trial.number}): "
               f"{best}; history: {plot}")
    runner.say(f"train with it: python train.py --config {best}")
