"""Run a sweep: ask the study for parameters, train them in a fresh ``train.py`` process, tell the result.

- Each trial is ``python train.py --config ... --set key=value ...`` (compile state and
  thread pools are per process), its run folder ``<output.dir>/sweeps/<name>/trial-NNNN``,
  its output in ``logs/trial-NNNN.log`` beside it. The callback ``report.ReportToStudy``
  inside the trial reports every evaluation to the study and stops a trial the pruner gives
  up on; the trial's environment (``SWEEP_*``) tells it which study and trial it is.
- The study lives in a journal file, ``<output.dir>/sweeps/<name>/journal.log``, unless
  ``--storage`` names another (an RDB URL such as ``sqlite:///sweep.db``, or a journal file
  path): several ``sweep.py`` processes on the same storage share one study.
- A crashed trial (non-zero exit) is recorded FAIL with its error line, and the sweep goes on.
- Interrupted (Ctrl-C, SIGTERM): running trials stop (each saves its last.ckpt), are recorded
  FAIL with ``requeued`` and their parameters are queued again. Killed outright (SIGKILL):
  the trials die with the sweep (Linux), and the next ``sweep.py`` on this machine finds
  them RUNNING under a dead process and does the same. Either way no finished trial runs
  again and no trial is lost: the study ends with ``trials`` finished ones (COMPLETE, PRUNED
  or crashed FAIL); re-queued ones run again under a new number and do not count.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..engine.errors import UserError
from .spec import Sweep

HOST = socket.gethostname()
CALLBACK = f"{__package__}.report:ReportToStudy"


def optuna():
    try:
        import optuna
    except ImportError:
        raise UserError("sweep.py needs Optuna, the optional extra [sweep]: pip install -e \".[sweep]\"") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def open_storage(url: str):
    """An RDB URL (``sqlite:///x.db``, ``postgresql://...``) or a journal file path."""
    opt = optuna()
    if "://" in url:
        return opt.storages.RDBStorage(url)
    from optuna.storages.journal import JournalFileBackend

    Path(url).parent.mkdir(parents=True, exist_ok=True)
    return opt.storages.JournalStorage(JournalFileBackend(url))


def make_pruner(prune: bool, startup_trials: int, warmup_steps: int):
    opt = optuna()
    if not prune:
        return opt.pruners.NopPruner()
    return opt.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=warmup_steps)


def distributions(sweep: Sweep) -> dict[str, Any]:
    d = optuna().distributions
    out = {}
    for key, p in sweep.params.items():
        if p.type == "categorical":
            out[key] = d.CategoricalDistribution(p.choices)
        elif p.type == "int":
            out[key] = d.IntDistribution(p.low, p.high, log=p.log, step=p.step or 1)
        else:
            out[key] = d.FloatDistribution(p.low, p.high, log=p.log, step=p.step)
    return out


def counts(trial) -> bool:
    """Does this trial count towards ``trials``? All but the re-queued (interrupted) ones."""
    return not trial.user_attrs.get("requeued")


class Runner:
    def __init__(self, sweep: Sweep, *, storage: str | None, prune: bool, trials: int, root: Path):
        opt = optuna()
        self.sweep, self.root, self.trials = sweep, root, trials
        self.dir = Path(sweep.base.output.dir) / "sweeps" / sweep.name
        self.storage_url = storage or str(self.dir / "journal.log")
        fresh = not storage and not (self.dir / "journal.log").exists()
        if fresh and self.dir.is_dir() and any(self.dir.glob("trial-*")):
            raise UserError(f"{self.dir} holds trials of a sweep whose journal.log is gone: "
                            "remove the folder, or rename the sweep file")
        self.storage = open_storage(self.storage_url)
        self.prune = prune
        pruner = make_pruner(prune, sweep.spec.pruner.startup_trials, sweep.spec.pruner.warmup_steps)
        existing = self._existing()
        # A restarted sweep draws on from a new seed (else the sampler would propose its first
        # parameters again); a shared storage mixes in this process too, so workers differ.
        seed = sweep.spec.seed + 7919 * existing + (hash((HOST, os.getpid())) % 10**6 if storage else 0)
        self.study = opt.create_study(study_name=sweep.name, storage=self.storage, load_if_exists=True,
                                      direction=sweep.direction, pruner=pruner,
                                      sampler=opt.samplers.TPESampler(seed=seed))
        if self.study.direction.name.lower() != sweep.direction:
            raise UserError(f"study {sweep.name!r} in {self.storage_url} was created to "
                            f"{self.study.direction.name.lower()}, not {sweep.direction}")
        self.study.set_user_attr("metric", sweep.metric)
        if existing == 0:
            for values in sweep.spec.enqueue:
                self.study.enqueue_trial(values)
        self.distributions = distributions(sweep)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.procs: dict[int, subprocess.Popen] = {}
        self.say = lambda text: print(f"sweep {sweep.name}: {text}", flush=True)

    def _existing(self) -> int:
        try:
            return len(optuna().load_study(study_name=self.sweep.name, storage=self.storage).trials)
        except KeyError:
            return 0

    # -- recovering a killed sweep ----------------------------------------------------------
    def recover(self) -> None:
        """RUNNING trials started by a dead ``sweep.py`` on this machine: FAIL, parameters queued again."""
        for trial in self.study.get_trials(deepcopy=False, states=[optuna().trial.TrialState.RUNNING]):
            host, _, pid = str(trial.user_attrs.get("worker", "")).rpartition(":")
            if host == HOST and pid.isdigit() and not alive(int(pid)):
                self.requeue(trial, "its sweep.py was killed")

    def requeue(self, trial, why: str) -> None:
        trial_id = getattr(trial, "_trial_id", None)
        if trial_id is None:
            trial_id = self.storage.get_trial_id_from_study_id_trial_number(self.study._study_id, trial.number)
        self.storage.set_trial_user_attr(trial_id, "requeued", why)
        self.storage.set_trial_state_values(trial_id, optuna().trial.TrialState.FAIL)
        if trial.params:
            self.study.enqueue_trial(trial.params, user_attrs={"requeued_from": trial.number})
        self.say(f"trial {trial.number} {why}: recorded FAIL (requeued), its parameters queued again")

    # -- the trials -------------------------------------------------------------------------
    def run(self, workers: int) -> None:
        self.recover()
        threads = [threading.Thread(target=self.worker, daemon=True) for _ in range(workers)]
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            for thread in threads:
                thread.start()
            while any(thread.is_alive() for thread in threads):
                for thread in threads:
                    thread.join(0.2)
        except KeyboardInterrupt:
            self.stopping.set()
            for proc in list(self.procs.values()):
                proc.send_signal(signal.SIGTERM)  # train.py saves last.ckpt and leaves
            for thread in threads:
                thread.join()
            raise
        finally:
            signal.signal(signal.SIGTERM, previous)

    def next_trial(self):
        """A new trial, or None when the study has its ``trials`` (counting those running elsewhere)."""
        with self.lock:
            done = [t for t in self.study.get_trials(deepcopy=False) if counts(t)]
            if len(done) >= self.trials or self.stopping.is_set():
                return None
            trial = self.study.ask(self.distributions)
            trial.set_user_attr("worker", f"{HOST}:{os.getpid()}")
            # Another process may have asked at the same moment: the later numbers give way.
            before = [t for t in self.study.get_trials(deepcopy=False)
                      if t.number < trial.number and counts(t)]
            if len(before) >= self.trials:
                queued = self.storage.get_trial(trial._trial_id).system_attrs.get("fixed_params")
                self.storage.set_trial_user_attr(trial._trial_id, "requeued", "surplus")
                self.study.tell(trial, state=optuna().trial.TrialState.FAIL)
                if queued:  # it took a queued trial's parameters: give them back
                    self.study.enqueue_trial(trial.params)
                return None
            return trial

    def worker(self) -> None:
        while (trial := self.next_trial()) is not None:
            self.run_trial(trial)

    def run_trial(self, trial) -> None:
        opt, name = optuna(), f"trial-{trial.number:04d}"
        run_dir, log = self.dir / name, self.dir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        callbacks = [*self.sweep.base.train.callbacks, CALLBACK]
        cmd = [sys.executable, "train.py", *(a for c in self.sweep.configs[1:] for a in ("--config", c))]
        for item in [*self.sweep.overrides(trial.params), f"output.dir={self.dir}", f"output.name={name}",
                     f"train.callbacks={json.dumps(callbacks)}"]:
            cmd += ["--set", item]
        env = {**os.environ, "SWEEP_STORAGE": self.storage_url, "SWEEP_STUDY": self.sweep.name,
               "SWEEP_TRIAL_ID": str(trial._trial_id), "SWEEP_METRIC": self.sweep.metric,
               "SWEEP_DIRECTION": self.sweep.direction,
               "SWEEP_PRUNER": json.dumps([self.prune, self.sweep.spec.pruner.startup_trials,
                                           self.sweep.spec.pruner.warmup_steps])}
        params = "  ".join(f"{k}={_short(v)}" for k, v in trial.params.items())
        self.say(f"trial {trial.number} started: {params}")
        start = time.time()
        with open(log, "w", encoding="utf-8") as out:
            proc = subprocess.Popen(cmd, cwd=self.root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
            self.procs[trial.number] = proc
            code = proc.wait()
            self.procs.pop(trial.number, None)
        result = _read_json(run_dir / "sweep.json")
        took = f"{time.time() - start:.0f} s"
        if self.stopping.is_set() and code != 0:
            self.requeue(trial, "was interrupted")
        elif code != 0 or result is None or result.get("value") is None:
            why = _error_line(log) or f"exit status {code}"
            trial.set_user_attr("error", why)
            self.study.tell(trial, state=opt.trial.TrialState.FAIL)
            self.say(f"trial {trial.number} FAILED ({why}); see {log}")
        elif result["pruned"]:
            self.study.tell(trial, state=opt.trial.TrialState.PRUNED)
            self.say(f"trial {trial.number} pruned at step {result['step']} ({self.sweep.metric} "
                     f"{result['last']:.4g}), {took}")
        else:
            self.study.tell(trial, result["value"])
            self.say(f"trial {trial.number} done: {self.sweep.metric} {result['value']:.4g}, {took}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:
    """In the trial process before exec: SIGTERM when the sweep dies, even by SIGKILL (Linux)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _error_line(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ") or "Error" in line]
    return (errors or lines or [""])[-1][:200]


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
