"""The training loop: one for every task. ``train(cfg) -> summary`` is what ``train.py`` and the tests call."""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import mindspore as ms
from mindspore import amp

from ..tasks import get_task
from . import checkpoint, distributed, manifest, runtime
from .callbacks import Callback, Checkpoints, CurvePlot, EarlyStopping, MetricsLog, ProgressBar, load_user_callbacks
from .config import Config
from .data import Batches
from .errors import CheckpointError, ConfigError
from .manifest import template_version
from .optim import build_optimizer, current_lr, lr_schedule
from .step import NoLossScaling, TrainStep


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


def train(cfg: Config, resume: str | None = None, callbacks: list[Callback] = ()) -> dict[str, Any]:
    """Train, evaluate and checkpoint as ``cfg`` says; return the final metrics and where they went."""
    return Trainer(cfg, resume, list(callbacks)).fit()


class Trainer:
    def __init__(self, cfg: Config, resume: str | None, callbacks: list[Callback]):
        self.cfg = cfg
        self.task = get_task(cfg.task)
        self.monitor = self.task.monitor_for(cfg)
        caps = self.task.capabilities(cfg)
        _check_capabilities(cfg, caps)
        resume_path = _find_resume(cfg, resume)
        self.device = runtime.setup(cfg)
        self.comm = distributed.init()
        if self.comm.size > 1 and not caps.distributed:
            raise ConfigError(f"this {cfg.task} configuration cannot train data parallel"
                              f"{f' ({caps.reason})' if caps.reason else ''}; run it as one process")
        self.data = self.task.load_data(cfg)
        self.batches = Batches(self.data.train, cfg.train.batch_size, cfg.seed, self.comm)
        self.steps_per_epoch = len(self.batches) // cfg.train.grad_accum_steps
        if self.steps_per_epoch == 0:
            raise ConfigError(f"train.grad_accum_steps={cfg.train.grad_accum_steps} exceeds the "
                              f"{len(self.batches)} batches in an epoch")
        self.total_steps = cfg.train.max_steps or cfg.train.epochs * self.steps_per_epoch

        model = self.task.build_model(cfg, self.data.meta, self.comm)
        self.network = model.network
        self.schedule = lr_schedule(cfg.optim, self.total_steps)
        self.optimizer = build_optimizer(cfg.optim, self.network.trainable_params(), self.schedule)
        amp_on = cfg.train.amp_level != "O0"
        loss_net = amp.auto_mixed_precision(model.loss, cfg.train.amp_level, getattr(ms, cfg.train.amp_dtype)) \
            if amp_on else model.loss
        self.scaler = amp.DynamicLossScaler(cfg.train.loss_scale, 2, cfg.train.loss_scale_window) \
            if amp_on else NoLossScaling()
        reducer = distributed.grad_reducer(self.optimizer.parameters, self.comm)
        self.step_fn = TrainStep(loss_net, self.optimizer, reducer,
                                 accum_steps=cfg.train.grad_accum_steps, loss_scaler=self.scaler,
                                 check_overflow=amp_on, grad_clip=cfg.train.grad_clip, jit=cfg.train.jit)

        self.state = State()
        self.history: list[dict[str, Any]] = []
        self.should_stop = False
        self.last_metrics: dict[str, float] = {}
        model.loss.set_train(True)
        if resume_path:
            self._resume(resume_path)
        else:
            self.task.warm_start(self.network, cfg)
            self.run_dir = _new_run_dir(cfg, self.comm.is_main)
        if self.comm.is_main:
            manifest.write(self.run_dir, cfg, self.device, self.comm.size)
        self.callbacks = [ProgressBar(), MetricsLog(self.run_dir, cfg.output.metrics_format), Checkpoints()]
        if cfg.train.early_stop_patience:
            self.callbacks.append(EarlyStopping(cfg.train.early_stop_patience))
        if cfg.output.plot:
            self.callbacks.append(CurvePlot(self.run_dir))
        self.callbacks += load_user_callbacks(cfg.train.callbacks) + callbacks
        if caps.grad_accum == "approximate" and cfg.train.grad_accum_steps > 1:
            warnings.warn(f"train.grad_accum_steps={cfg.train.grad_accum_steps}: {caps.reason}", stacklevel=2)

    # -- the loop -------------------------------------------------------------------------
    def fit(self) -> dict[str, Any]:
        cfg, k = self.cfg, self.cfg.train.grad_accum_steps
        global_batch = cfg.train.batch_size * k * self.comm.size
        self._say(f"{self.task.name}: {self.total_steps} optimizer steps, global batch {global_batch} "
                  f"= {cfg.train.batch_size} x {k} accumulation x {self.comm.size} device(s) on {self.device}, "
                  f"{'jit' if cfg.train.jit else 'PyNative'}, amp {cfg.train.amp_level}; run dir {self.run_dir}")
        self._hook("on_train_begin")
        losses, tick, last_eval = [], time.perf_counter(), -1
        while self.state.step < self.total_steps and not self.should_stop:
            for i, batch in enumerate(self.batches.epoch(self.state.epoch, self.state.batch), self.state.batch):
                apply = (i + 1) % k == 0
                loss, finite = self.step_fn(batch, apply)
                finite = bool(finite.asnumpy())  # read every step: keeps the host in step (see step.py)
                losses.append(loss)
                if not apply:
                    continue
                self.state.batch = i + 1
                self.state.step += 1
                self.state.skipped_steps += not finite
                if self.state.step % cfg.train.log_every == 0 or self.state.step == self.total_steps:
                    elapsed, tick = time.perf_counter() - tick, time.perf_counter()
                    self._hook("on_step_end", self._step_logs(losses, elapsed, global_batch))
                    losses = []
                if cfg.train.eval_every and self.state.step % cfg.train.eval_every == 0:
                    self.evaluate()
                    last_eval = self.state.step
                if self.should_stop or self.state.step >= self.total_steps or \
                        self.state.batch + k > len(self.batches):
                    break
            if self.state.batch + k > len(self.batches):  # epoch finished
                self._hook("on_epoch_end", self.state.epoch)
                self.state.epoch, self.state.batch = self.state.epoch + 1, 0
                if not cfg.train.eval_every and not self.should_stop:
                    self.evaluate()
                    last_eval = self.state.step
        if last_eval != self.state.step:
            self.evaluate()
        summary = {"run_dir": str(self.run_dir), "steps": self.state.step, "epochs": self.state.epoch,
                   "skipped_steps": self.state.skipped_steps, "best": self.state.best, "monitor": self.monitor,
                   **self.last_metrics}
        self._hook("on_train_end", summary)
        return summary

    def evaluate(self) -> dict[str, float]:
        self.network.set_train(False)
        metrics = self.task.evaluate(self.network, self.data, self.cfg)
        self.network.set_train(True)
        value, best = metrics[self.monitor], self.state.best
        better = best is None or (value > best if self.task.mode == "max" else value < best)
        self.state.improved = better
        self.state.best = value if better else best
        self.state.evals_since_best = 0 if better else self.state.evals_since_best + 1
        self.last_metrics = metrics
        self._hook("on_eval_end", metrics)
        return metrics

    # -- checkpoints ----------------------------------------------------------------------
    def save_checkpoint(self, name: str) -> None:
        if not self.comm.is_main:
            return
        meta = {"format": 1, "state": asdict(self.state), "config": self.cfg.to_dict(), "task_meta": self.data.meta,
                "template_commit": template_version(), "saved": datetime.now().isoformat(timespec="seconds")}
        checkpoint.save(self.run_dir / name, [self.network, self.optimizer, self.scaler], meta)

    def _resume(self, path: Path) -> None:
        params, meta = checkpoint.read(path)
        if meta.get("config", {}).get("task") != self.cfg.task:
            raise CheckpointError(f"{path} was trained for task {meta.get('config', {}).get('task')!r}, "
                                  f"not {self.cfg.task!r}")
        checkpoint.restore(params, self.network, self.optimizer, self.scaler)
        self.state = State(**meta["state"])
        self.run_dir = path.parent
        self._say(f"resumed from {path} at step {self.state.step} (epoch {self.state.epoch})")

    # -- helpers --------------------------------------------------------------------------
    def _step_logs(self, losses, elapsed: float, global_batch: int) -> dict[str, Any]:
        steps = len(losses) / self.cfg.train.grad_accum_steps
        return {"step": self.state.step, "epoch": self.state.epoch,
                "loss": sum(float(loss.asnumpy()) for loss in losses) / len(losses),
                "lr": current_lr(self.optimizer, self.schedule),
                "samples_per_s": steps * global_batch / max(elapsed, 1e-9),
                "skipped_steps": self.state.skipped_steps, "loss_scale": float(self.scaler.scale_value.asnumpy())}

    def _hook(self, name: str, *args) -> None:
        for callback in self.callbacks:
            getattr(callback, name)(self, *args)

    def _say(self, text: str) -> None:
        if self.comm.is_main:
            print(text, flush=True)


def _check_capabilities(cfg: Config, caps) -> None:
    """Refuse, before any heavy work, engine features this task cannot use in this configuration."""
    why = f" ({caps.reason})" if caps.reason else ""
    if caps.grad_accum == "none" and cfg.train.grad_accum_steps > 1:
        raise ConfigError(f"train.grad_accum_steps={cfg.train.grad_accum_steps} is not supported by "
                          f"this {cfg.task} configuration{why}; set it to 1")
    if not caps.amp and cfg.train.amp_level != "O0":
        raise ConfigError(f"train.amp_level={cfg.train.amp_level} is not supported by this {cfg.task} "
                          f"configuration{why}; use O0")
    if not caps.grad_clip and cfg.train.grad_clip is not None:
        raise ConfigError(f"train.grad_clip is not supported by this {cfg.task} configuration{why}; set it to null")


def _find_resume(cfg: Config, resume: str | None) -> Path | None:
    """``auto``: the newest ``last.ckpt`` under ``output.dir`` (or none: start fresh); else a path."""
    if resume is None:
        return None
    if resume == "auto":
        found = sorted(Path(cfg.output.dir).glob("*/last.ckpt"), key=lambda p: p.stat().st_mtime)
        return found[-1] if found else None
    path = Path(resume)
    if not path.is_file():
        raise CheckpointError(f"--resume {resume}: no such checkpoint")
    return path


def _new_run_dir(cfg: Config, is_main: bool) -> Path:
    name = cfg.output.name or datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = Path(cfg.output.dir) / name
    if is_main:
        if run_dir.exists() and any(run_dir.iterdir()):
            raise ConfigError(f"run folder {run_dir} exists; pick another output.name "
                              f"or pass --resume {run_dir}/last.ckpt")
        run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir

