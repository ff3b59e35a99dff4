"""``<name>.json`` beside each exported network: its files, input and output names, shapes (``null``:
the batch axis) and meanings, and the task's ``deploy_meta`` (README.md, "Deploy", shows one)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
from mindspore import Tensor, nn

# Each exported network's output: its name in the graph, and what it means.
OUTPUT_NAMES = {"classifier": "logits", "scorer": "logit", "ctr_model": "logit", "image_encoder": "embedding",
                "text_encoder": "embedding", "lm": "logits"}
MEANINGS = {
    "classifier": "logits over meta.classes (softmax: probabilities)",
    "scorer": "the logit that the user interacts with the item (sigmoid: probability)",
    "ctr_model": "the logit that the user likes the item (sigmoid: probability)",
    "image_encoder": "the L2-normalised image embedding (cosine = dot product with a text embedding)",
    "text_encoder": "the L2-normalised caption embedding (cosine = dot product with an image embedding)",
    "lm": "next-token logits at every position (pad on the right; read the last real position)",
}


def write_spec(stem: Path, files: dict[str, Any], cell: nn.Cell, inputs: tuple[Tensor, ...],
               outputs: list[np.ndarray], task: str, meta: dict[str, Any], checkpoint: str) -> Path:
    """``files``: {"mindir": path} and/or {"onnx": {...}}; earlier ones of this checkpoint stay listed."""
    path = stem.with_suffix(".json")
    earlier = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    names, outputs_named = io_names(stem.name, cell, len(outputs))
    spec = {
        "format": 2,
        "task": task,
        "checkpoint": str(checkpoint),
        **{f: earlier[f] for f in ("mindir", "onnx", "arrays")
           if f in earlier and earlier.get("checkpoint") == str(checkpoint)},
        **{f: _relative(value) for f, value in files.items()},
        "inputs": [{"name": name, **_tensor(x.asnumpy())} for name, x in zip(names, inputs)],
        "outputs": [{"name": name, **_tensor(y), "meaning": MEANINGS.get(stem.name, "")}
                    for name, y in zip(outputs_named, outputs)],
        "meta": meta,
    }
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    partial.replace(path)
    return path


def io_names(name: str, cell: nn.Cell, n_outputs: int) -> tuple[list[str], list[str]]:
    """The graph's input names (``construct``'s arguments) and output names (``OUTPUT_NAMES``)."""
    output = OUTPUT_NAMES.get(name, "output")
    return list(inspect.signature(cell.construct).parameters), [output] if n_outputs == 1 else [
        f"{output}_{i}" for i in range(n_outputs)]


def _relative(value):
    if isinstance(value, Path):
        return value.name
    return {key: _relative(item) for key, item in value.items()} if isinstance(value, dict) else value


def _tensor(array: np.ndarray) -> dict[str, Any]:
    return {"shape": [None, *array.shape[1:]], "dtype": array.dtype.name}
