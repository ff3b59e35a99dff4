"""Self-describing checkpoints: weights, optimizer and scaler state, and a JSON ``meta`` (progress, config,
task meta, template version). Writes are atomic (temp file, fsync, rename); loads check CRCs."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import yaml
from mindspore import log as ms_log

from .errors import CheckpointError

META_KEY = "msscaffold_meta"
ANSWERS_FILE = Path(".copier-answers.yml")
# Rebuilt from the config on every start, so a resumed run may change the schedule's length.
_NOT_RESTORED = re.compile(r"learning_rate(_group_\d+)?")


def template_version() -> str | None:
    """The msscaffold template commit this project was generated or last updated from."""
    try:
        return str(yaml.safe_load(ANSWERS_FILE.read_text(encoding="utf-8")).get("_commit"))
    except (OSError, AttributeError, yaml.YAMLError):
        return None


def save(path: Path, holders: Iterable[Any], meta: dict[str, Any]) -> None:
    """Save the parameters of ``holders`` (Cells, optimizers, loss scalers) with ``meta``."""
    params = {p.name: p for holder in holders for p in _parameters(holder)}
    bad = next((name for name, p in params.items() if not np.isfinite(p.asnumpy()).all()), None)
    if bad is not None:
        raise CheckpointError(f"not writing {path}: parameter {bad!r} is not finite (NaN or inf)")
    tmp = path.with_name(f".{path.stem}.tmp.ckpt")  # MindSpore appends .ckpt to other names
    try:
        with _quiet_mindspore_log():  # its own log line would repeat ours
            ms.save_checkpoint([{"name": name, "data": p} for name, p in params.items()], str(tmp),
                               append_dict={META_KEY: json.dumps(meta)}, crc_check=True)
        with open(tmp, "rb+") as f:  # on disk before the rename makes it the checkpoint
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:  # a full disk, a quota (MindSpore raises RuntimeError for them)
        for partial in partial_files(path):
            partial.unlink(missing_ok=True)
        kept = f"the previous {path.name} is kept, unchanged" if path.exists() else f"no {path.name} was written"
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
        raise CheckpointError(f"could not write {path} ({reason}); {kept}") from None


def partial_files(path: Path) -> tuple[Path, Path]:
    """The temporary files of a write of ``path`` (ours, MindSpore's); one left behind was cut off."""
    return path.with_name(f".{path.stem}.tmp.ckpt"), path.with_name(f".{path.stem}.tmp.tmp")


def read(path: str | Path, tasks: Iterable[str] | None = None) -> tuple[dict[str, ms.Parameter], dict[str, Any]]:
    """Weights and meta (of one of ``tasks``); adapters alone come with their ``model.pretrained`` base's."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"checkpoint {path} is a folder; pass a .ckpt file, e.g. {path / 'best.ckpt'}")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    for partial in (p for p in partial_files(path) if p.exists()):
        print(f"note: {partial} is a write of {path.name} that was cut off (the process was killed); "
              f"{path} is the previous checkpoint, whole", file=sys.stderr, flush=True)
    params, meta = _load(path, tasks)
    del params[META_KEY]
    if meta.get("adapters_only"):
        base = meta["config"].get("model", {}).get("pretrained")
        if not base:
            raise CheckpointError(f"{path} holds adapters only and names no base checkpoint "
                                  "(its model.pretrained is null)")
        params = {**read(base, tasks)[0], **params}
    return params, meta


def read_meta(path: str | Path, tasks: Iterable[str] | None = None) -> dict[str, Any]:
    """The meta of a checkpoint, without reading its weights."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist" + (" (a folder)" if path.is_dir() else ""))
    return _load(path, tasks, lambda name: name == META_KEY)[1]


def _load(path: Path, tasks: Iterable[str] | None, choice_func=None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The file's entries (those ``choice_func`` picks), its meta checked to be this project's, of ``tasks``."""
    try:
        with _quiet_mindspore_log():  # its own log line would repeat ours
            params = ms.load_checkpoint(str(path), crc_check=True, choice_func=choice_func)
        meta = json.loads(params[META_KEY])
    except (ValueError, RuntimeError, KeyError, TypeError, json.JSONDecodeError):
        raise CheckpointError(f"{path} is corrupt or not a checkpoint written by this project "
                              "(its checksums or format do not match)") from None
    task = meta.get("config", {}).get("task")
    if tasks is not None and task not in tasks:
        raise CheckpointError(f"{path} was trained for task {task!r}, not {' or '.join(map(repr, tasks))}")
    return params, meta


def restore(params: dict[str, ms.Parameter], *holders: Any) -> None:
    """Load ``params`` into ``holders``; every parameter they own must be in the file."""
    for holder in holders:
        wanted = [p for p in _parameters(holder) if not _NOT_RESTORED.fullmatch(p.name)]
        missing = [p.name for p in wanted if p.name not in params]
        if missing:
            raise CheckpointError(f"checkpoint lacks {len(missing)} parameters, e.g. {missing[0]!r}: "
                                  "was it written with another model config?")
        for p in wanted:
            if p.shape != params[p.name].shape:
                raise CheckpointError(f"checkpoint parameter {p.name!r} has shape {params[p.name].shape}, "
                                      f"the model expects {p.shape}")
            p.set_data(params[p.name].astype(p.dtype))


def _parameters(holder: Any) -> list[ms.Parameter]:
    if isinstance(holder, ms.nn.Cell):
        return list(holder.get_parameters())
    return [v for v in vars(holder).values() if isinstance(v, ms.Parameter)]  # e.g. a loss scaler


@contextmanager
def _quiet_mindspore_log():
    logger = ms_log._get_logger()
    logger.disabled, was = True, logger.disabled
    try:
        yield
    finally:
        logger.disabled = was
