"""``<name>.json`` beside each exported ``<name>.mindir``: what serving the graph needs.

    {"format": 1, "task": "vision", "mindir": "classifier.mindir", "checkpoint": "runs/<run>/best.ckpt",
     "inputs": [{"name": "x", "shape": [null, 1, 8, 8], "dtype": "float32"}],
     "outputs": [{"shape": [null, 10], "dtype": "float32"}],
     "meta": {"classes": [...], "mean": 0.33, "std": 0.38, ...}}

``null`` in a shape is the dynamic batch axis. ``meta`` is the task's ``deploy_meta``: the
preprocessing statistics, class names, vocabulary or id maps that turn raw input into the
graph's input and its output into an answer. README.md ("Deploy") shows it in use.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
from mindspore import Tensor, nn


def write_spec(mindir: Path, cell: nn.Cell, inputs: tuple[Tensor, ...], outputs: list[np.ndarray],
               task: str, meta: dict[str, Any], checkpoint: str) -> Path:
    names = list(inspect.signature(cell.construct).parameters)
    spec = {
        "format": 1,
        "task": task,
        "mindir": mindir.name,
        "checkpoint": str(checkpoint),
        "inputs": [{"name": name, **_tensor(x.asnumpy())} for name, x in zip(names, inputs)],
        "outputs": [_tensor(y) for y in outputs],
        "meta": meta,
    }
    path = mindir.with_suffix(".json")
    path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    return path


def _tensor(array: np.ndarray) -> dict[str, Any]:
    return {"shape": [None, *array.shape[1:]], "dtype": array.dtype.name}
