"""What a run prints, and ``train.log``, the same lines kept in the run folder (rank 0 only).

On a terminal, training shows a tqdm progress bar. When stdout is a file or a pipe (nohup,
msrun's worker logs, CI) it prints one plain line every ``train.log_every`` steps instead::

    step 40/200  epoch 1  loss 0.4123  lr 2.87e-03  5120 samples/s  ETA 0:00:12

``train.log`` gets those lines either way, with every other message of the run.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from pathlib import Path

from tqdm import tqdm

from .callbacks import Callback


class Console:
    """Prints messages (rank 0) and appends them to ``train.log`` once the run folder is known."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.log_path: Path | None = None
        self.pending: list[str] = []  # said before the run folder existed

    def attach(self, run_dir: Path) -> None:
        self.log_path = run_dir / "train.log"
        pending, self.pending = self.pending, []
        for line in pending:
            self.record(line)

    def say(self, text: str) -> None:
        if self.enabled:
            tqdm.write(text, file=sys.stdout)  # above a running progress bar, not through it
            sys.stdout.flush()
            self.record(text)

    def record(self, text: str) -> None:
        """``train.log`` only (the bar already shows it on screen)."""
        if not self.enabled:
            return
        if self.log_path is None:
            self.pending.append(text)
            return
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(text + "\n")


class Progress(Callback):
    """A tqdm bar on a terminal, plain lines elsewhere; eval results and the end as lines."""

    def __init__(self, interactive: bool | None = None):
        self.interactive = sys.stdout.isatty() and sys.stderr.isatty() if interactive is None else interactive
        self.bar = None

    def on_train_begin(self, trainer):
        self.start_step, self.start_time = trainer.state.step, time.perf_counter()
        if self.interactive and trainer.comm.is_main:
            self.bar = tqdm(total=trainer.total_steps, initial=trainer.state.step, unit="step", dynamic_ncols=True)

    def on_step_end(self, trainer, logs):
        line = self.step_line(trainer, logs)
        if self.bar is None:
            trainer.console.say(line)
            return
        self.bar.update(logs["step"] - self.bar.n)
        self.bar.set_postfix(loss=f"{logs['loss']:.4f}", lr=f"{logs['lr']:.2e}",
                             samples_s=f"{logs['samples_per_s']:.0f}", refresh=False)
        trainer.console.record(line)

    def on_eval_end(self, trainer, metrics):
        text = "  ".join(f"{k} {v}" if isinstance(v, int) else f"{k} {v:.4f}" for k, v in metrics.items())
        trainer.console.say(f"eval @ step {trainer.state.step}: {text}")

    def on_train_end(self, trainer, summary):
        if self.bar is not None:
            self.bar.close()
        best = "none" if summary["best"] is None else f"{summary['best']:.4f}"
        trainer.console.say(f"done: {summary['steps']} steps, best {summary['monitor']} {best}, "
                            f"run dir {summary['run_dir']}")

    def step_line(self, trainer, logs) -> str:
        step, total = logs["step"], trainer.total_steps
        done = step - self.start_step
        eta = (time.perf_counter() - self.start_time) / done * (total - step) if done else 0.0
        line = (f"step {step}/{total}  epoch {logs['epoch']}  loss {logs['loss']:.4f}  lr {logs['lr']:.2e}  "
                f"{logs['samples_per_s']:.0f} samples/s  ETA {timedelta(seconds=round(eta))}")
        return line + (f"  skipped {logs['skipped_steps']}" if logs["skipped_steps"] else "")
