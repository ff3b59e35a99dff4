"""``<name>.json`` beside each exported network: its files, input and output names, shapes (``null``:
the batch axis) and meanings, and the task's ``deploy_meta`` (README.md, "Deploy", shows one)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
from mindspore import Tensor, nn


def write_spec(stem: Path, files: dict[str, Any], cell: nn.Cell, inputs: tuple[Tensor, ...],
               outputs: list[np.ndarray], task: str, meta: dict[str, Any], checkpoint: str,
               output: tuple[str, str] = ("output", "")) -> Path:
    """``files``: {"mindir": path} and/or {"onnx": {...}}; earlier ones of this checkpoint stay listed.
    ``output``: the output's name in the graph and its meaning (``Task.outputs``)."""
    path = stem.with_suffix(".json")
    earlier = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    names, outputs_named = io_names(cell, len(outputs), output[0])
    spec = {
        "format": 2,
        "task": task,
        "checkpoint": str(checkpoint),
        **{f: earlier[f] for f in ("mindir", "onnx", "arrays")
           if f in earlier and earlier.get("checkpoint") == str(checkpoint)},
        **{f: _relative(value) for f, value in files.items()},
        "inputs": [{"name": name, **_tensor(x.asnumpy())} for name, x in zip(names, inputs)],
        "outputs": [{"name": name, **_tensor(y), "meaning": output[1]}
                    for name, y in zip(outputs_named, outputs)],
        "meta": meta,
    }
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    partial.replace(path)
    return path


def io_names(cell: nn.Cell, n_outputs: int, output: str = "output") -> tuple[list[str], list[str]]:
    """The graph's input names (``construct``'s arguments) and output names (``output``, numbered if several)."""
    return list(inspect.signature(cell.construct).parameters), [output] if n_outputs == 1 else [
        f"{output}_{i}" for i in range(n_outputs)]


def _relative(value):
    if isinstance(value, Path):
        return value.name
    return {key: _relative(item) for key, item in value.items()} if isinstance(value, dict) else value


def _tensor(array: np.ndarray) -> dict[str, Any]:
    return {"shape": [None, *array.shape[1:]], "dtype": array.dtype.name}
