"""Run folders and resume, a continuation with the saved config (README: "Runs, checkpoints, resume").
Code a checkpoint names is imported only if your config names it too: a checkpoint is data."""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime
from pathlib import Path
from typing import IO, Any

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; the folder is not locked
    fcntl = None

from .config import apply_override, build_config, flatten, named_in_project
from .errors import CheckpointError, ConfigError
from .schema import Config
from .seams import untrusted

log = logging.getLogger(__name__)

# Keys a resumed run may change: how long it trains, how often it evaluates, logs and saves.
SAFE_ON_RESUME = ("train.epochs", "train.max_steps", "train.eval_every", "train.log_every",
                  "train.early_stop_patience", "train.save_every", "train.keep_last", "train.callbacks",
                  "output.dir", "output.plot", "output.loggers")


STARTED = ".started"  # in each run folder, written when the run starts: --resume auto orders runs by it


def find_resume(output_dir: str, resume: str | None) -> Path | None:
    """``auto``: the newest started run's ``last.ckpt`` (None: start fresh); else the given path."""
    if resume is None:
        return None
    if resume == "auto":
        root = Path(output_dir)
        runs = [d for d in root.iterdir() if (d / STARTED).is_file() or (d / "last.ckpt").is_file()] \
            if root.is_dir() else []
        if not runs:
            return None
        newest = max(runs, key=started_at)
        if not (newest / "last.ckpt").is_file():
            raise CheckpointError(f"{newest} never saved a checkpoint: nothing to resume; start again "
                                  f"(python train.py), or resume another run by its path (--resume RUN/last.ckpt)")
        return newest / "last.ckpt"
    path = Path(resume)
    if path.is_dir():
        raise CheckpointError(f"--resume {resume} is a folder; pass a checkpoint, e.g. {path / 'last.ckpt'}")
    if not path.is_file():
        raise CheckpointError(f"--resume {resume}: no such checkpoint")
    return path


def is_finished(state: dict[str, Any], total_steps: int) -> bool:
    """Did the run of a checkpoint's ``state`` end (all its steps, then its final evaluation)?"""
    return state["step"] == total_steps == state.get("evaluated_at")


def finished(run) -> dict[str, Any]:
    """What ``fit`` says and returns for a finished ``loop.Run``."""
    state = run.finished
    log.info(f"{run.run_dir} is finished (step {state['step']} of {run.total_steps}, evaluated): nothing to do; "
             "to train it longer, resume with --set train.max_steps=N (or train.epochs=N)")
    return {"run_dir": str(run.run_dir), "steps": state["step"], "epochs": state["epoch"], "finished": True,
            "best": state["best"], "monitor": run.task.monitor_for(run.cfg)}


def started_at(run_dir: Path) -> float:
    """The ``.started`` stamp's time (older folders without one: their oldest file's)."""
    stamp = run_dir / STARTED
    if stamp.is_file():
        return stamp.stat().st_mtime
    return min((f.stat().st_mtime for f in run_dir.iterdir() if f.is_file()), default=run_dir.stat().st_mtime)


def reserve_run_dir(cfg: Config) -> Config:
    """``cfg`` naming a run folder made now, so a run stopped while it starts is ``--resume auto``'s."""
    run_dir = new_run_dir(cfg, True)
    return cfg.model_copy(update={"output": cfg.output.model_copy(update={"name": run_dir.name})})


def unreserve_run_dir(cfg: Config, output_dir_too: bool = False) -> None:
    """Remove a reserved folder of a run refused before writing anything (and an empty ``output.dir``)."""
    run_dir = Path(cfg.output.dir) / cfg.output.name
    if run_dir.is_dir() and all(f.name in (STARTED, ".lock") for f in run_dir.iterdir()):
        for f in run_dir.iterdir():
            f.unlink()
        run_dir.rmdir()
    if output_dir_too and run_dir.parent.is_dir() and not any(run_dir.parent.iterdir()):
        run_dir.parent.rmdir()


def continued_config(cfg: Config, saved: dict[str, Any], path: Path) -> Config:
    """The saved config plus the ``--set`` overrides of ``cfg`` that change it."""
    if saved.get("task") != cfg.task:
        raise CheckpointError(f"{path} was trained for task {saved.get('task')!r}, not {cfg.task!r}")
    named = list((saved.get("train") or {}).get("callbacks") or [])
    if dropped := [spec for spec in named if spec not in cfg.train.callbacks]:
        log.warning(f"{path} names train.callbacks {dropped} that the current config does not: not imported "
                    "(code runs only when your config names it)")
    saved = {**saved, "train": {**(saved.get("train") or {}), "callbacks": list(cfg.train.callbacks)}}
    # Validated like any config, so keys added to the schema since the checkpoint take defaults.
    then = flatten(build_config(saved, type(cfg), source=f"{path} (saved config)").to_dict())
    now = flatten(cfg.to_dict())
    untrusted(then, named_in_project(now), str(path))
    changes = [item for item in cfg.origin.get("overrides", [])
               if (key := item.partition("=")[0]) not in now or now[key] != then.get(key)]
    return resume_config(saved, changes, str(path), type(cfg))


def resume_config(saved: dict[str, Any], overrides: list[str], source: str, schema: type[Config]) -> Config:
    """The run's saved config with ``overrides`` applied, refusing those not safe mid-run."""
    for item in overrides:
        key = item.partition("=")[0]
        if key not in SAFE_ON_RESUME:
            raise ConfigError(f"--set {key}: a resumed run keeps its own config; only "
                              f"{', '.join(SAFE_ON_RESUME)} may change (start a new run to change {key})")
    raw = json.loads(json.dumps(saved))
    for item in overrides:
        apply_override(raw, item)
    return build_config(raw, schema, source=f"{source} (saved config)")


def continues_in_place(path: Path) -> bool:
    """Is ``path`` a run folder's ``last.ckpt`` (stamped at its start; before stamps: with a manifest)?"""
    return path.name == "last.ckpt" and any((path.parent / f).is_file() for f in (STARTED, "manifest.json"))


def drop_rows_after(run_dir: Path, step: int) -> None:
    """Remove metrics.jsonl's rows past ``step``: work lost with the interruption (the csv tables:
    ``logs/reports.py``)."""
    jsonl = run_dir / "metrics.jsonl"
    if jsonl.is_file():
        rows = [line for line in jsonl.read_text(encoding="utf-8").splitlines() if line.strip()]
        kept = [line for line in rows if (row := json_row(line)) is not None and row.get("step", 0) <= step]
        if cut := sum(json_row(line) is None for line in rows):
            log.warning(f"{jsonl}: dropped {cut} unreadable line(s) (a write cut short, e.g. by a full disk)")
        jsonl.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")


def json_row(line: str) -> dict | None:
    """A metrics.jsonl line as a dict, or None if it was cut short."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def new_run_dir(cfg: Config, is_main: bool) -> Path:
    """A new ``output.dir/output.name`` (unnamed: a timestamp, then ``-2``...), made by rank 0."""
    name = cfg.output.name or datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = Path(cfg.output.dir) / name
    if not is_main:
        return run_dir
    if cfg.output.name:
        # A folder holding only its stamp was reserved at launch for this run (reserve_run_dir).
        if run_dir.exists() and any(f.name != STARTED for f in run_dir.iterdir()):
            raise ConfigError(f"run folder {run_dir} exists; pick another output.name "
                              f"or pass --resume {run_dir}/last.ckpt")
        run_dir.mkdir(parents=True, exist_ok=True)
        return stamped(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):  # mkdir is atomic: of two runs started at once, one gets each name
        candidate = run_dir if n == 1 else run_dir.with_name(f"{name}-{n}")
        try:
            candidate.mkdir()
            return stamped(candidate)
        except FileExistsError:
            continue
    raise ConfigError(f"{run_dir}: no free run folder name; set output.name")


def stamped(run_dir: Path) -> Path:
    stamp = run_dir / STARTED
    if not stamp.exists():
        stamp.write_text(f"{datetime.now().isoformat(timespec='seconds')} pid {os.getpid()}\n", encoding="utf-8")
    return run_dir


def lock_run_dir(run_dir: Path) -> IO | None:
    """Lock ``run_dir/.lock`` until the returned file closes or the process ends; refuse a second writer."""
    if fcntl is None:
        return None
    f = open(run_dir / ".lock", "a+", encoding="utf-8")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise ConfigError(f"run folder {run_dir} is in use by {holder}; wait for it to end, or resume a copy "
                          f"of the checkpoint (it continues in a new folder)") from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()}\n")
    f.flush()
    return f


def resume_dir(cfg: Config, path: Path, step: int, is_main: bool) -> tuple[Path, IO | None]:
    """The folder a resume writes to (``last.ckpt``: its own, else a new one) and rank 0's lock."""
    if not continues_in_place(path):
        run_dir = new_run_dir(cfg.model_copy(update={"output": cfg.output.model_copy(update={"name": None})}),
                              is_main)
        return run_dir, lock_run_dir(run_dir) if is_main else None
    if not is_main:
        return path.parent, None
    lock = lock_run_dir(path.parent)  # before the rows change: a run still writing them keeps its folder
    drop_rows_after(path.parent, step)
    return path.parent, lock
