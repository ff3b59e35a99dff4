"""A run's progress: ``State`` (what a checkpoint saves of it), ``Progress`` (what callbacks see: a
read-only view of the loop's ``Run``) and ``Hooks``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from . import distributed


@dataclass
class State:
    """Everything about progress that a resumed run needs; saved in every checkpoint."""

    step: int = 0  # optimizer steps done
    epoch: int = 0
    batch: int = 0  # micro-batches done in this epoch
    best: float | None = None
    evals_since_best: int = 0
    skipped_steps: int = 0  # overflowed (fp16) steps whose update was skipped
    total_steps: int = 0  # the run's length when saved (a resume may change it)
    stretches: list = field(default_factory=list)  # [step, total before, after] per change (optim.lr_schedule)
    evaluated_at: int = -1  # the step of the last evaluation
    unlogged: list = field(default_factory=list)  # micro-step losses since the last log row (a resume's first row)


class Hooks:
    """Calls a hook on every callback; a stop one rank asked for is every rank's."""

    def __init__(self, run, callbacks: list, progress: Progress):  # run: loop.Run
        self.run, self.callbacks, self.progress = run, callbacks, progress

    def __call__(self, name: str, *args) -> None:
        for callback in self.callbacks:
            method = getattr(callback, name, None)
            if method is not None:
                method(self.progress, *args)
        self.run.stop_requested = distributed.any_rank(self.run.stop_requested, self.run.comm)


class Progress:
    """What a callback sees of the run: read-only, plus ``stop()`` to end it after this step."""

    def __init__(self, run):  # loop.Run
        self._run = run

    cfg = property(lambda self: self._run.cfg)
    state = property(lambda self: asdict(self._run.state), doc="a copy of the progress a checkpoint saves")
    step = property(lambda self: self._run.state.step)
    epoch = property(lambda self: self._run.state.epoch)
    total_steps = property(lambda self: self._run.total_steps)
    best = property(lambda self: self._run.state.best)
    evals_since_best = property(lambda self: self._run.state.evals_since_best)
    improved = property(lambda self: self._run.improved, doc="the last evaluation was a new best")
    history = property(lambda self: tuple(self._run.history))
    run_dir = property(lambda self: self._run.run_dir)
    resumed_from = property(lambda self: self._run.resumed_from)
    device = property(lambda self: self._run.device)
    rank = property(lambda self: self._run.comm.rank)
    world_size = property(lambda self: self._run.comm.size)
    is_main = property(lambda self: self._run.comm.is_main)
    skipped_steps = property(lambda self: self._run.state.skipped_steps)
    network = property(lambda self: self._run.network)  # e.g. to inspect or dump weights
    parameters = property(lambda self: self._run.optimizer.parameters)  # what the optimizer updates
    data = property(lambda self: self._run.data)

    def stop(self) -> None:
        self._run.stop_requested = True
