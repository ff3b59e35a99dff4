"""The training loop of every task: ``fit(cfg, task)`` is a setup block, then the loop.

Every decision (micro-steps, log rows, evaluation, saves, stopping) is in ``fit`` where it happens;
the helpers below say *how*, never *when*. Callbacks see a read-only ``Progress``.
"""

from __future__ import annotations

import logging
import signal
import time
import warnings
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from mindspore import nn

from . import checkpoint, config, distributed, runtime
from .data import Batches
from .errors import ConfigError, Interrupted
from .optim import build_optimizer, current_lr, layer_scales, lr_schedule, warmup_steps
from .progress import Hooks, Progress, State
from .resume import continued_config, find_resume, finished, is_finished, lock_run_dir, new_run_dir, resume_dir
from .schema import Config
from .signals import StopSignals
from .step import TrainStep, build_train_step
from .task import Comm, Data, Task

log = logging.getLogger(__name__)


class NoEMA:
    """``train.ema: null``: no average of the weights; each operation of ``ema.EMA`` does nothing."""

    holders = ()  # nothing saved beside the network
    applied = staticmethod(nullcontext)  # nothing swapped into it
    update = reset = restored = staticmethod(lambda: None)


@dataclass
class Run:
    """What the setup built, and the loop's own record of the run (``history``)."""

    cfg: Config
    task: Task
    comm: Comm
    device: str
    data: Data
    batches: Batches
    network: nn.Cell
    optimizer: nn.Optimizer
    schedule: Any
    step_fn: TrainStep
    total_steps: int
    steps_per_epoch: int
    ema: Any = field(default_factory=NoEMA)  # train.ema: the average of the weights, or nothing
    state: State = field(default_factory=State)
    run_dir: Path | None = None
    resumed_from: Path | None = None
    history: list[dict[str, Any]] = field(default_factory=list)  # every log row and evaluation
    lock: Any = None  # rank 0's lock on run_dir (resume.py), released when fit ends
    improved: bool = False  # the last evaluation was a new best
    finished: dict | None = None  # resumed after the run ended: its saved state (fit says so, changes nothing)
    stop_requested: bool = False
    read_every_step: bool = True  # runtime.host_sync: read each step's outputs at once, or only when needed
    pending: list = field(default_factory=list)  # (loss, finite) of the steps, still on the device, not read yet


def fit(cfg: Config, task: Task, resume: str | None = None, callbacks=(), run: Run | None = None
        ) -> dict[str, Any]:
    """Train, evaluate and checkpoint as ``cfg`` says; ``resume``: a checkpoint or ``auto`` (the newest run)."""
    # -- setup ---------------------------------------------------------------------------
    run = run or setup(cfg, task, resume)
    cfg, state, k = run.cfg, run.state, run.cfg.train.grad_accum_steps
    if run.finished:  # resumed after its end: said, and nothing is trained, evaluated or written
        return finished(run)
    global_batch = cfg.train.batch_size * k * run.comm.size
    log.info(f"{task.name}: {run.total_steps} optimizer steps, global batch {global_batch} = {cfg.train.batch_size} "
             f"x {k} accumulation x {run.comm.size} device(s) on {run.device}, "
             f"{'jit' if cfg.train.jit else 'PyNative'}, amp {cfg.train.amp_level}; run dir {run.run_dir}")
    if run.batches.repeated:  # every example trains every epoch (engine/data.py)
        log.info(f"data: {run.batches.total} examples, {run.batches.repeated} of them twice to fill the last step")
    if (warmup := warmup_steps(cfg.optim, run.total_steps)) >= run.total_steps > 0:
        log.info(f"optim: all {run.total_steps} optimizer steps are inside the {warmup}-step warmup: lr < optim.lr")
    progress = Progress(run)
    hook = Hooks(run, [*callbacks], progress)
    hook("on_train_begin")
    tick, metrics = time.perf_counter(), {}  # (the losses of the next log row: state.unlogged, saved with it)
    stop_signal = None  # a signal every rank has agreed to stop on

    # -- the loop: epochs of optimizer steps of k micro-steps ----------------------------
    # Signals are caught until the last file is written; rank 0 holds its lock on the run folder.
    with StopSignals() as signals, run.lock or nullcontext():  # (the lock's file closes at the end)
        while state.step < run.total_steps and not run.stop_requested and stop_signal is None:
            batches = run.batches.epoch(state.epoch, start=state.batch)
            while state.batch // k < run.steps_per_epoch and state.step < run.total_steps:
                for micro_step in range(k):  # gradients add up; the last micro-step updates
                    run.pending.append(run.step_fn(next(batches), apply=micro_step == k - 1))
                    if run.read_every_step:  # CPU: reading at once keeps the host in step (step.py)
                        read_outputs(run)
                run.ema.update()  # train.ema: the average follows the weights
                state.batch, state.step = state.batch + k, state.step + 1

                # A signal stops every rank at one step: ranks agree at log rows (one process at once).
                if run.comm.size == 1 or state.step % cfg.train.log_every == 0:
                    if distributed.any_rank(signals.received is not None, run.comm):
                        stop_signal = signals.received or signal.SIGTERM
                if state.step % cfg.train.log_every == 0 or state.step == run.total_steps:
                    read_outputs(run)  # (also done by save and evaluate: whatever reads the state first)
                    row, state.unlogged, tick = log_row(run, state.unlogged, tick), [], time.perf_counter()
                    run.history.append({"kind": "train", **row})
                    hook("on_step_end", row)
                if cfg.train.save_every and state.step % cfg.train.save_every == 0:
                    save(run, "last.ckpt", keep_step_copy=True)
                if cfg.train.eval_every and state.step % cfg.train.eval_every == 0:
                    metrics, state.evaluated_at = evaluate(run, hook), state.step
                if run.stop_requested or stop_signal is not None:
                    break
            if state.batch // k == run.steps_per_epoch:  # the epoch is complete
                read_outputs(run)
                hook("on_epoch_end", state.epoch)
                state.epoch, state.batch = state.epoch + 1, 0
                if not cfg.train.eval_every and not run.stop_requested:
                    metrics, state.evaluated_at = evaluate(run, hook), state.step

        # -- the end: a signal saves where it stopped and leaves; otherwise a final evaluation ----
        if stop_signal is not None:
            save(run, "last.ckpt")
            distributed.any_rank(False, run.comm)  # all wait for rank 0's file: msrun ends all at the first exit
            log.info(f"stopped at step {state.step} of {run.total_steps}: saved {run.run_dir / 'last.ckpt'}; "
                     f"continue with: python train.py --resume {run.run_dir / 'last.ckpt'}")
            raise Interrupted(stop_signal)
        if state.evaluated_at != state.step:  # (a run resumed after its last evaluation has its row already)
            metrics, state.evaluated_at = evaluate(run, hook), state.step
        save(run, "last.ckpt")
        if signals.received is not None:
            log.info(f"signal {signals.received} came during the final evaluation and save: both finished; "
                     f"the run is complete in {run.run_dir}")
        summary = {"run_dir": str(run.run_dir), "steps": state.step, "epochs": state.epoch, "skipped_steps":
                   state.skipped_steps, "best": state.best, "monitor": task.monitor_for(cfg), **metrics}
        hook("on_train_end", summary)
        return summary


# -- setup ---------------------------------------------------------------------------------
def setup(cfg: Config, task: Task, resume: str | None = None) -> Run:
    """Device, ranks, data, model, optimizer and step; a resumed run's checkpoint, read once."""
    resume_path = find_resume(cfg.output.dir, resume)
    params, meta = checkpoint.read(resume_path, tasks=(cfg.task,)) if resume_path else (None, None)
    if meta is not None:  # the run goes on with its own saved config (see resume.py)
        cfg = continued_config(cfg, meta["config"], resume_path)
    caps = task.capabilities(cfg)
    caps.check(cfg)
    task.check_seams(cfg)
    device = runtime.setup(cfg, distributed.local_rank())
    cfg = runtime.resolve_amp(cfg, device, caps.amp)  # train.amp_level auto: this device's precision
    comm = distributed.init()
    if comm.size > 1 and not caps.distributed:
        raise ConfigError(f"this {cfg.task} configuration cannot train data parallel"
                          f"{f' ({caps.reason})' if caps.reason else ''}; run it as one process")
    data = task.load_data(cfg)
    batches = Batches(data.train, cfg.train.batch_size, cfg.seed, comm,
                      workers=runtime.resolve_workers(cfg.data.workers), accumulation=cfg.train.grad_accum_steps)
    per_epoch = len(batches) // cfg.train.grad_accum_steps  # whole steps: Batches rounds the epoch up to them

    total_steps = config.check_run_length(cfg, cfg.train.max_steps or cfg.train.epochs * per_epoch, per_epoch)
    if meta is not None and meta["state"]["step"] > total_steps:
        raise ConfigError(f"{resume_path} is at step {meta['state']['step']}, past this run's {total_steps} steps; "
                          f"raise train.max_steps or train.epochs to continue it")

    # Seed policy: data order from cfg.seed on every rank (sharded by rank); the same initial weights
    # on every rank, its own dropout masks on each (as nanoGPT); ranks check their weights are rank 0's.
    runtime.seed_model(cfg.seed, comm.rank)
    model = task.build_model(cfg, data.meta, comm)
    distributed.copy_from_rank_0(model.network, comm)
    # A resume that changes the run's length stretches the rest of its schedule from where it is.
    saved = meta["state"] if meta is not None else {}
    stretches = [*saved.get("stretches", [])]
    if saved.get("total_steps") and saved["total_steps"] != total_steps:
        stretches.append([saved["step"], saved["total_steps"], total_steps])
    schedule = lr_schedule(cfg.optim, total_steps, stretches)
    optimizer = build_optimizer(cfg.optim, model.network.trainable_params(), schedule,
                                layer_scales(cfg.optim, model, cfg.task), model.no_decay, task.optimizers)
    reducer = distributed.grad_reducer(optimizer.parameters, comm)
    step_fn = build_train_step(model, optimizer, reducer, cfg.train, cfg.runtime.jit_level,
                               distributed.mean_reducer(comm))
    model.loss.set_train(True)
    ema = NoEMA()
    if cfg.train.ema is not None:  # the recipes feature's ema.py (the config refuses train.ema without it)
        from .ema import EMA

        ema = EMA(model.network, cfg.train.ema)
    run = Run(cfg, task, comm, device, data, batches, model.network, optimizer, schedule, step_fn, total_steps,
              per_epoch, ema=ema, state=State(total_steps=total_steps),
              resumed_from=resume_path, read_every_step=runtime.reads_every_step(cfg, device))

    if meta is not None and is_finished(meta["state"], total_steps):  # fit says so and returns: nothing changes
        run.run_dir, run.finished = resume_path.parent, meta["state"]
    elif resume_path is None:
        task.warm_start(run.network, cfg)
        run.ema.reset()  # the average starts from the pretrained weights, not the random ones
        run.run_dir = new_run_dir(cfg, comm.is_main)
        run.lock = lock_run_dir(run.run_dir) if comm.is_main else None
    else:
        checkpoint.restore(params, run.network, optimizer, step_fn.scaler, *run.ema.holders)
        run.ema.restored()  # the file's network names hold the average: the training weights back in
        run.state = State(**{k: v for k, v in meta["state"].items() if k in State.__dataclass_fields__})
        run.state.total_steps, run.state.stretches = total_steps, stretches
        run.run_dir, run.lock = resume_dir(cfg, resume_path, run.state.step, comm.is_main)
        log.info(f"resumed from {resume_path} at step {run.state.step} (epoch {run.state.epoch}); "
                 f"writing to {run.run_dir}")
        if any(isinstance(cell, nn.Dropout) and cell.p > 0 for _, cell in run.network.cells_and_names()):
            warnings.warn("resuming with dropout > 0: the weights, optimizer and data continue exactly, the "
                          "dropout masks do not (MindSpore 2.10 keeps a dropout kernel's generator position "
                          "inside the compiled graph, where no checkpoint reaches it)", stacklevel=2)
    if caps.grad_accum == "approximate" and cfg.train.grad_accum_steps > 1:
        warnings.warn(f"train.grad_accum_steps={cfg.train.grad_accum_steps}: {caps.reason}", stacklevel=2)
    return run


# -- how the loop does what it does ----------------------------------------------------------
def read_outputs(run: Run) -> None:
    """Read the steps' outputs still on the device: each loss (next log row) and skip (``skipped_steps``)."""
    for loss, finite in run.pending:
        run.state.skipped_steps += not bool(finite.asnumpy())  # the flag first: reading it waits for the step
        run.state.unlogged.append(float(loss.asnumpy()))
    run.pending.clear()


def log_row(run: Run, losses: list, tick: float) -> dict[str, Any]:
    """The log row of the steps since the last one: mean loss (over ranks), lr, throughput."""
    steps = len(losses) / run.cfg.train.grad_accum_steps
    global_batch = run.cfg.train.batch_size * run.cfg.train.grad_accum_steps * run.comm.size
    loss = sum(losses) / len(losses)
    return {"step": run.state.step, "epoch": run.state.epoch, "loss": distributed.mean(loss, run.comm),
            "lr": current_lr(run.optimizer, run.schedule),
            "samples_per_s": steps * global_batch / max(time.perf_counter() - tick, 1e-9),
            "skipped_steps": run.state.skipped_steps, "loss_scale": float(run.step_fn.scaler.scale_value.asnumpy())}


def evaluate(run: Run, hook: Hooks) -> dict[str, float]:
    """Score the model, save ``best.ckpt`` if it improved and ``last.ckpt``; count toward early stopping."""
    read_outputs(run)  # callbacks and the saved state see every step so far
    sync_running_stats(run)
    run.network.set_train(False)
    with run.ema.applied():  # train.ema: the average is what is scored
        metrics = run.task.evaluate(run.network, run.data, run.cfg)
    run.network.set_train(True)
    state, mode = run.state, run.task.mode_for(run.cfg)
    value = metrics[run.task.monitor_for(run.cfg)]
    better = state.best is None or (value > state.best if mode == "max" else value < state.best)
    run.improved = distributed.any_rank(better, run.comm)  # best.ckpt is saved by all ranks together
    state.best = value if run.improved else state.best
    state.evals_since_best = 0 if run.improved else state.evals_since_best + 1
    run.history.append({"kind": "eval", "step": state.step, "epoch": state.epoch, **metrics})
    if run.improved:
        save(run, "best.ckpt")
    save(run, "last.ckpt")
    patience = run.cfg.train.early_stop_patience
    if patience and state.evals_since_best >= patience:
        run.stop_requested = True
    with run.ema.applied():  # callbacks see the model that was scored (and saved as best.ckpt)
        hook("on_eval_end", metrics)
    return metrics


def save(run: Run, name: str, keep_step_copy: bool = False) -> None:
    """Write ``name`` in the run folder (rank 0); ``keep_step_copy``: also ``step-<N>.ckpt`` (train.keep_last)."""
    read_outputs(run)  # the saved state: every step's loss and skip so far
    sync_running_stats(run)
    if not run.comm.is_main:
        return
    meta = {"format": 1, "state": asdict(run.state), "config": run.cfg.to_dict(), "task_meta": run.data.meta,
            "template_commit": checkpoint.template_version(), "saved": datetime.now().isoformat(timespec="seconds")}
    holders = [run.network, run.optimizer, run.step_fn.scaler, *run.ema.holders]
    keep = run.cfg.train.keep_last
    with run.ema.applied():  # train.ema: the network's names hold the average, ema.* the weights
        checkpoint.save(run.run_dir / name, holders, meta)
        if keep_step_copy and keep:
            checkpoint.save(run.run_dir / f"step-{run.state.step:07d}.ckpt", holders, meta)
    if keep_step_copy and keep:
        for old in sorted(run.run_dir.glob("step-*.ckpt"))[:-keep]:
            old.unlink()


def sync_running_stats(run: Run) -> None:
    """Every rank the same BatchNorm statistics: the network's and, with train.ema, the average's."""
    distributed.average_running_stats(run.network, run.comm)
    if run.ema.holders:
        with run.ema.applied():
            distributed.average_running_stats(run.network, run.comm)
