"""Published weights -> a checkpoint of this project, for every task that imports them.

A task's ``convert_weights.py`` says only how its parameter names map onto the file's
(``source_name``) and which layouts differ (``transform``); this module reads the
``.safetensors`` file (NumPy only, no PyTorch), checks that the file holds exactly the
network's tensors with the right shapes, and writes a checkpoint that ``eval.py``,
``export.py`` and ``model.pretrained`` accept. Any mismatch is one line naming the first
tensor at fault, and nothing is written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from mindspore import nn

from ..engine import checkpoint
from ..engine.checkpoint import template_version
from ..engine.errors import CheckpointError, UserError
from ..engine.schema import Config


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of a ``.safetensors`` file, floats as float32, in the file's order."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist")
    try:
        from safetensors import safe_open
    except ImportError:
        raise UserError("reading .safetensors files needs the safetensors package: pip install safetensors") from None
    try:
        with safe_open(str(path), framework="np") as f:
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except Exception as exc:  # safetensors has its own error types (truncated, odd dtype...)
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CheckpointError(f"{path} is not a readable .safetensors file ({reason})") from None
    if not tensors:
        raise CheckpointError(f"{path} holds no tensors")
    return {name: t.astype(np.float32) if t.dtype.kind == "f" else t for name, t in tensors.items()}


def map_weights(network: nn.Cell, tensors: dict[str, np.ndarray], source_name: Callable[[str], str],
                transform: Callable[[str, np.ndarray], np.ndarray] | None = None,
                ignored: Callable[[str], bool] = lambda name: False) -> dict[str, np.ndarray]:
    """Our parameter name (relative to ``network``) -> the file's tensor for it, transformed
    to our layout.

    Refuses the first tensor the network needs and the file lacks, then the first tensor of
    the file the network has no place for (unless ``ignored``), then the first of the wrong
    shape. Several parameters may read one tensor (tied weights)."""
    params = dict(network.parameters_and_names())
    wanted = {name: source_name(name) for name in params}
    missing = next((src for src in wanted.values() if src not in tensors), None)
    if missing is not None:
        raise CheckpointError(f"missing tensor {missing!r}")
    used = set(wanted.values())
    unexpected = next((name for name in tensors if name not in used and not ignored(name)), None)
    if unexpected is not None:
        raise CheckpointError(f"unexpected tensor {unexpected!r} {tensors[unexpected].shape}")
    mapped = {}
    for name, p in params.items():
        src = wanted[name]
        value = transform(name, tensors[src]) if transform else tensors[src]
        if tuple(value.shape) != tuple(p.shape):
            raise CheckpointError(f"tensor {src!r} has shape {tuple(tensors[src].shape)}; "
                                  f"{name} needs {tuple(p.shape)}")
        mapped[name] = np.ascontiguousarray(value, dtype=np.float32).reshape(np.shape(value))  # 0-d stays 0-d
    return mapped


def load(network: nn.Cell, mapped: dict[str, np.ndarray]) -> None:
    import mindspore as ms

    for name, p in network.parameters_and_names():
        p.set_data(ms.Tensor(mapped[name], p.dtype))


def save_imported(path: str | Path, network: nn.Cell, cfg: Config, task_meta: dict[str, Any],
                  source: dict[str, Any]) -> None:
    """A checkpoint like the loop's (config, task meta, step 0) holding only the network."""
    from ..engine.progress import State

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"format": 1, "state": asdict(State()), "config": cfg.to_dict(), "task_meta": task_meta,
            "template_commit": template_version(), "saved": datetime.now().isoformat(timespec="seconds"),
            "imported_from": source}
    checkpoint.save(path, [network], meta)


def sha256(path: str | Path) -> str:
    """The source file's digest, recorded in the checkpoint."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
