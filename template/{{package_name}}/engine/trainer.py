"""The training loop: one for every task. ``train(cfg) -> summary`` is what ``train.py`` and the tests call."""

from __future__ import annotations

import signal
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mindspore import nn

from ..tasks import get_task
from . import checkpoint, distributed, ema, manifest, pipeline, runtime
from .callbacks import Callback, build_callbacks
from .console import Console
from .data import Batches
from .errors import ConfigError, Interrupted
from .loggers import require as require_loggers
from .manifest import template_version
from .optim import build_optimizer, current_lr, lr_schedule
from .resume import check_same_run, continues_in_place, drop_rows_after, find_resume
from .schema import Config
from .signals import StopSignals
from .step import build_train_step
from .task import Capabilities, Comm, Task
from .watch import Watch


@dataclass
class State:
    """Everything about progress that a resumed run needs; saved in every checkpoint."""

    step: int = 0  # optimizer steps done
    epoch: int = 0
    batch: int = 0  # micro-batches done in this epoch
    best: float | None = None
    evals_since_best: int = 0
    improved: bool = False
    skipped_steps: int = 0  # overflowed (fp16) steps whose update was skipped


def train(cfg: Config, resume: str | None = None, callbacks: list[Callback] = (), task: Task | None = None
          ) -> dict[str, Any]:
    """Train, evaluate and checkpoint as ``cfg`` says; return the final metrics and where they went."""
    return Trainer(cfg, task or get_task(cfg.task), resume=resume, callbacks=callbacks).fit()


class Trainer:
    def __init__(self, cfg: Config, task: Task, *, resume: str | None = None, callbacks: list[Callback] = ()):
        self.cfg, self.task = cfg, task
        self.monitor = task.monitor_for(cfg)
        caps = task.capabilities(cfg)
        check_capabilities(cfg, caps)
        require_loggers(cfg.output.loggers)
        resume_path = find_resume(cfg.output.dir, resume)
        self.device = runtime.setup(cfg, distributed.local_rank())
        self.comm = distributed.init()
        self.console = Console(self.comm.is_main)  # stdout + the run folder's train.log
        check_distributed(cfg, caps, self.comm)
        self.data = task.load_data(cfg)
        self.batches = Batches(self.data.train, cfg.train.batch_size, cfg.seed, self.comm,
                               workers=pipeline.resolve_workers(getattr(cfg.data, "workers", 1)))
        self.steps_per_epoch = steps_per_epoch(len(self.batches), cfg.train.grad_accum_steps)
        self.total_steps = cfg.train.max_steps or cfg.train.epochs * self.steps_per_epoch

        # Seed policy: splits, data order and sampled rows come from cfg.seed on every rank (one
        # order, sharded by rank); the model is built under seed + rank, so each rank draws its own
        # dropout masks (as nanoGPT offsets its seed), and starts from rank 0's initial weights.
        runtime.seed_everything(cfg.seed + self.comm.rank, mindspore_only=True)
        model = task.build_model(cfg, self.data.meta, self.comm)
        distributed.copy_from_rank_0(model.network, self.comm)
        self.network = model.network
        self.ema = ema.build(self.network, cfg.train.ema)  # EMA hook: the average of the weights, or nothing
        self.schedule = lr_schedule(cfg.optim, self.total_steps)
        self.optimizer = build_optimizer(cfg.optim, self.network.trainable_params(), self.schedule)
        reducer = distributed.grad_reducer(self.optimizer.parameters, self.comm)
        self.step_fn = build_train_step(model, self.optimizer, reducer, cfg.train, cfg.runtime.jit_level)
        self.watch = Watch(cfg.train, self.optimizer.parameters, self._say)
        model.loss.set_train(True)

        self.state = State()
        self.history: list[dict[str, Any]] = []
        self.losses: list = []  # micro-step losses since the last log row
        self.should_stop = False
        self.signals = StopSignals()
        self.stop_signal: int | None = None  # a signal every rank has agreed to stop on
        self.evaluated_at = -1  # the optimizer step of the last evaluation
        self.last_metrics: dict[str, float] = {}
        self.run_dir = self._resume(resume_path) if resume_path else self._start_fresh()
        self.console.attach(self.run_dir)
        if self.comm.is_main:
            manifest.write(self.run_dir, cfg, self.device, self.comm.size, resumed_from=resume_path,
                           step=self.state.step)
        self.callbacks = build_callbacks(cfg, self.run_dir) + list(callbacks)
        if caps.grad_accum == "approximate" and cfg.train.grad_accum_steps > 1:
            warnings.warn(f"train.grad_accum_steps={cfg.train.grad_accum_steps}: {caps.reason}", stacklevel=2)

    # -- the loop -------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.should_stop or self.state.step >= self.total_steps or self.interrupted

    @property
    def interrupted(self) -> bool:
        return self.stop_signal is not None

    def fit(self) -> dict[str, Any]:
        cfg = self.cfg.train
        self._say(f"{self.task.name}: {self.total_steps} optimizer steps, global batch {self.global_batch} "
                  f"= {cfg.batch_size} x {cfg.grad_accum_steps} accumulation x {self.comm.size} device(s) on "
                  f"{self.device}, {'jit' if cfg.jit else 'PyNative'}, amp {cfg.amp_level}; run dir {self.run_dir}")
        self._hook("on_train_begin")
        self.tick = time.perf_counter()
        self.watch.reset(self.state.step, self.state.skipped_steps)
        with self.signals:
            while not self.finished:
                self.train_epoch()
        if self.interrupted:
            self._stop_on_signal()
        if self.evaluated_at != self.state.step:
            self.evaluate()
        summary = {"run_dir": str(self.run_dir), "steps": self.state.step, "epochs": self.state.epoch,
                   "skipped_steps": self.state.skipped_steps, "best": self.state.best, "monitor": self.monitor,
                   **self.last_metrics}
        self._hook("on_train_end", summary)
        return summary

    def train_epoch(self) -> None:
        """Optimizer steps from the current position to the end of the epoch (or of training)."""
        k, eval_every = self.cfg.train.grad_accum_steps, self.cfg.train.eval_every
        batches = self.batches.epoch(self.state.epoch, start=self.state.batch)
        while self.state.batch // k < self.steps_per_epoch and not self.finished:
            self.optimizer_step(batches)
            if eval_every and self.state.step % eval_every == 0:
                self.evaluate()
        if self.state.batch // k == self.steps_per_epoch:  # the epoch is complete
            self._hook("on_epoch_end", self.state.epoch)
            self.state.epoch, self.state.batch = self.state.epoch + 1, 0
            if not eval_every and not self.should_stop:
                self.evaluate()

    def optimizer_step(self, batches: Iterator) -> None:
        """k micro-steps (``train.grad_accum_steps``): gradients add up, the last one updates."""
        k = self.cfg.train.grad_accum_steps
        for micro_step in range(k):
            loss, finite = self.step_fn(next(batches), apply=micro_step == k - 1)
            finite = bool(finite.asnumpy())  # read every step: keeps the host in step (see step.py)
            self.losses.append(loss)
        self.ema.update()  # EMA hook
        self.state.batch += k
        self.state.step += 1
        self.state.skipped_steps += not finite
        # A signal stops every rank at the same step: ranks agree at log rows (a single process at once).
        if self.comm.size == 1 or self.state.step % self.cfg.train.log_every == 0:
            if distributed.any_rank(self.signals.received is not None, self.comm):
                self.stop_signal = self.signals.received or signal.SIGTERM
        if self.state.step % self.cfg.train.log_every == 0 or self.state.step == self.total_steps:
            self._hook("on_step_end", self._step_logs())
        save_every = self.cfg.train.save_every
        if save_every and self.state.step % save_every == 0:
            distributed.average_running_stats(self.network, self.comm)
            self.save_checkpoint("last.ckpt")
            self._keep_step_checkpoint()

    def evaluate(self) -> dict[str, float]:
        distributed.average_running_stats(self.network, self.comm)  # every rank scores one model
        self.network.set_train(False)
        with self.ema.applied():  # EMA hook: the average is what is evaluated
            metrics = self.task.evaluate(self.network, self.data, self.cfg)
        self.network.set_train(True)
        value, best = metrics[self.monitor], self.state.best
        better = best is None or (value > best if self.task.mode == "max" else value < best)
        better = distributed.any_rank(better, self.comm)  # best.ckpt is saved by all ranks together
        self.state.improved = better
        self.state.best = value if better else best
        self.state.evals_since_best = 0 if better else self.state.evals_since_best + 1
        self.evaluated_at = self.state.step
        self.last_metrics = metrics
        self._hook("on_eval_end", metrics)
        return metrics

    # -- checkpoints ----------------------------------------------------------------------
    def save_checkpoint(self, name: str) -> None:
        """Rank 0 writes; the running statistics it saves were averaged over ranks when training
        last paused (an evaluation, a periodic save, a signal), on every rank at once."""
        if not self.comm.is_main:
            return
        meta = {"format": 1, "state": asdict(self.state), "config": self.cfg.to_dict(), "task_meta": self.data.meta,
                "template_commit": template_version(), "saved": datetime.now().isoformat(timespec="seconds")}
        with self.ema.applied():  # EMA hook: the network's names hold the average, ema.* the weights
            checkpoint.save(self.run_dir / name, [self.network, self.optimizer, self.step_fn.scaler,
                                                  *self.ema.holders], meta)

    def _keep_step_checkpoint(self) -> None:
        """``train.keep_last``: a copy of this save as ``step-<N>.ckpt``; older copies beyond N go."""
        keep = self.cfg.train.keep_last
        if not keep or not self.comm.is_main:
            return
        self.save_checkpoint(f"step-{self.state.step:07d}.ckpt")
        for old in sorted(self.run_dir.glob("step-*.ckpt"))[:-keep]:
            old.unlink()

    def _stop_on_signal(self) -> None:
        """Save where training stopped, say how to go on, and leave with 128 + the signal."""
        distributed.average_running_stats(self.network, self.comm)
        self.save_checkpoint("last.ckpt")
        self._say(f"stopped at step {self.state.step} of {self.total_steps}: saved {self.run_dir / 'last.ckpt'}; "
                  f"continue with: python train.py --resume {self.run_dir / 'last.ckpt'}")
        raise Interrupted(self.stop_signal)

    def _start_fresh(self) -> Path:
        self.task.warm_start(self.network, self.cfg)
        return new_run_dir(self.cfg, self.comm.is_main)

    def _resume(self, path: Path) -> Path:
        params, meta = checkpoint.read(path)
        check_same_run(self.cfg, meta.get("config", {}), path)
        checkpoint.restore(params, self.network, self.optimizer, self.step_fn.scaler, *self.ema.holders)
        self.ema.restored()  # EMA hook: the training weights back into the network
        self.state = State(**meta["state"])
        if continues_in_place(path):
            if self.comm.is_main:
                drop_rows_after(path.parent, self.state.step)
            run_dir = path.parent
        else:  # best.ckpt, step-N.ckpt or a copy: never write over the run it came from
            run_dir = new_run_dir(self.cfg.model_copy(update={"output": self.cfg.output.model_copy(
                update={"name": None})}), self.comm.is_main)
        self._say(f"resumed from {path} at step {self.state.step} (epoch {self.state.epoch}); writing to {run_dir}")
        if any(isinstance(cell, nn.Dropout) and cell.p > 0 for _, cell in self.network.cells_and_names()):
            warnings.warn("resuming with dropout > 0: the weights, optimizer and data continue exactly, the dropout "
                          "masks do not (MindSpore 2.10 keeps a dropout kernel's generator position inside the "
                          "compiled graph, where no checkpoint reaches it)", stacklevel=2)
        return run_dir

    # -- helpers --------------------------------------------------------------------------
    @property
    def global_batch(self) -> int:
        return self.cfg.train.batch_size * self.cfg.train.grad_accum_steps * self.comm.size

    def _step_logs(self) -> dict[str, Any]:
        """The log row of the steps since the last one (mean loss, throughput); resets the window."""
        self.watch.check(self.state.step, self.state.skipped_steps)
        losses, self.losses = self.losses, []
        elapsed, self.tick = time.perf_counter() - self.tick, time.perf_counter()
        steps = len(losses) / self.cfg.train.grad_accum_steps
        return {"step": self.state.step, "epoch": self.state.epoch,
                "loss": distributed.mean(sum(float(loss.asnumpy()) for loss in losses) / len(losses), self.comm),
                "lr": current_lr(self.optimizer, self.schedule),
                "samples_per_s": steps * self.global_batch / max(elapsed, 1e-9),
                "skipped_steps": self.state.skipped_steps,
                "loss_scale": float(self.step_fn.scaler.scale_value.asnumpy())}

    def _hook(self, name: str, *args) -> None:
        for callback in self.callbacks:
            getattr(callback, name)(self, *args)
        # Every rank calls each hook at the same step; a stop any of them decided is everyone's.
        self.should_stop = distributed.any_rank(self.should_stop, self.comm)

    def _say(self, text: str) -> None:
        self.console.say(text)


def steps_per_epoch(batches: int, accum_steps: int) -> int:
    steps = batches // accum_steps
    if steps == 0:
        raise ConfigError(f"train.grad_accum_steps={accum_steps} exceeds the {batches} batches in an epoch")
    return steps


def check_distributed(cfg: Config, caps: Capabilities, comm: Comm) -> None:
    if comm.size > 1 and not caps.distributed:
        raise ConfigError(f"this {cfg.task} configuration cannot train data parallel"
                          f"{f' ({caps.reason})' if caps.reason else ''}; run it as one process")


def check_capabilities(cfg: Config, caps: Capabilities) -> None:
    """Refuse, before any heavy work, engine features this task cannot use in this configuration."""
    why = f" ({caps.reason})" if caps.reason else ""
    if caps.grad_accum == "none" and cfg.train.grad_accum_steps > 1:
        raise ConfigError(f"train.grad_accum_steps={cfg.train.grad_accum_steps} is not supported by "
                          f"this {cfg.task} configuration{why}; set it to 1")
    if not caps.amp and cfg.train.amp_level != "O0":
        raise ConfigError(f"train.amp_level={cfg.train.amp_level} is not supported by this {cfg.task} "
                          f"configuration{why}; use O0")
    if not caps.amp and cfg.train.on_nonfinite == "skip":  # the same gradient check as AMP's
        raise ConfigError(f"train.on_nonfinite=skip is not supported by this {cfg.task} configuration{why}; use stop")
    if not caps.grad_clip and cfg.train.grad_clip is not None:
        raise ConfigError(f"train.grad_clip is not supported by this {cfg.task} configuration{why}; set it to null")


def new_run_dir(cfg: Config, is_main: bool) -> Path:
    name = cfg.output.name or datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = Path(cfg.output.dir) / name
    if is_main:
        if run_dir.exists() and any(run_dir.iterdir()):
            raise ConfigError(f"run folder {run_dir} exists; pick another output.name "
                              f"or pass --resume {run_dir}/last.ckpt")
        run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir
