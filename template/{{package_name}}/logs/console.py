"""What a run prints (rank 0) through ``logging``, kept in ``train.log`` too: a tqdm bar on a terminal,
else one plain line every ``train.log_every`` steps."""

from __future__ import annotations

import logging
import sys
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from tqdm import tqdm

from ..engine.arrays import budget_note
from .callbacks import Callback

PROJECT_LOGGER = logging.getLogger(__package__.partition(".")[0])  # every module of this project


class Console(logging.Handler):
    """Rank 0's messages on stdout and in ``train.log``; held until the run folder is known."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.log_path: Path | None = None
        self.enabled = True
        self.pending: list[str] = []  # said before the run folder existed

    def attach(self, run_dir: Path, is_main: bool) -> None:
        self.log_path, self.enabled = run_dir / "train.log", is_main
        pending, self.pending = self.pending, []
        for line in pending:
            self.say(line)

    def emit(self, record: logging.LogRecord) -> None:
        self.say(record.getMessage())

    def say(self, text: str) -> None:
        if self.log_path is None:
            self.pending.append(text)
        elif self.enabled:
            tqdm.write(text, file=sys.stdout)  # above a running progress bar, not through it
            sys.stdout.flush()
            self.record(text)

    def record(self, text: str) -> None:
        """``train.log`` only (the bar already shows it on screen)."""
        if self.enabled and self.log_path is not None:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(text + "\n")


@contextmanager
def console():
    """A ``Console`` on the project's logger (INFO and up) while the block runs."""
    handler, level = Console(), PROJECT_LOGGER.level
    PROJECT_LOGGER.addHandler(handler)
    PROJECT_LOGGER.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        for line in handler.pending:  # a run that never had a folder (e.g. a finished one)
            print(line, flush=True)
        PROJECT_LOGGER.removeHandler(handler)
        PROJECT_LOGGER.setLevel(level)


class ProgressBar(Callback):
    """A tqdm bar on a terminal, plain lines elsewhere; eval results and the end as lines."""

    def __init__(self, console: Console, interactive: bool | None = None):
        self.console = console
        self.interactive = sys.stdout.isatty() and sys.stderr.isatty() if interactive is None else interactive
        self.bar = None

    def on_train_begin(self, progress):
        self.console.attach(progress.run_dir, progress.is_main)
        self.start_step, self.start_time, self.evaluations = progress.step, time.perf_counter(), 0
        if self.interactive and progress.is_main:
            self.bar = tqdm(total=progress.total_steps, initial=progress.step, unit="step", dynamic_ncols=True)

    def on_step_end(self, progress, logs):
        line = self.step_line(progress, logs)
        if self.bar is None:
            self.console.say(line)
            return
        self.bar.update(logs["step"] - self.bar.n)
        self.bar.set_postfix(loss=f"{logs['loss']:.4f}", lr=f"{logs['lr']:.2e}",
                             samples_s=f"{logs['samples_per_s']:.0f}", refresh=False)
        self.console.record(line)

    def on_eval_end(self, progress, metrics):
        text = "  ".join(f"{k} {v}" if isinstance(v, int) else f"{k} {v:.4f}" for k, v in metrics.items())
        self.console.say(f"eval @ step {progress.step}: {text}")
        if self.evaluations == 0 and "examples" in metrics:  # what the eval budget means, said once
            self.console.say(budget_note(progress.cfg.eval.max_examples, int(metrics["examples"])))
        self.evaluations += 1

    def on_train_end(self, progress, summary):
        if self.bar is not None:
            self.bar.close()
        best = "none" if summary["best"] is None else f"{summary['best']:.4f}"
        self.console.say(f"done: {summary['steps']} steps, best {summary['monitor']} {best}, "
                            f"run dir {summary['run_dir']}")

    def step_line(self, progress, logs) -> str:
        step, total = logs["step"], progress.total_steps
        done = step - self.start_step
        eta = (time.perf_counter() - self.start_time) / done * (total - step) if done else 0.0
        line = (f"step {step}/{total}  epoch {logs['epoch']}  loss {logs['loss']:.4f}  lr {logs['lr']:.2e}  "
                f"{logs['samples_per_s']:.0f} samples/s  ETA {timedelta(seconds=round(eta))}")
        return line + (f"  skipped {logs['skipped_steps']}" if logs["skipped_steps"] else "")
