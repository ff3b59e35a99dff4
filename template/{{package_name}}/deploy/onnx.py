"""ONNX export that checks itself: ``onnx.checker``, then onnxruntime against the network.

MindSpore 2.10 writes ONNX with a fixed batch (its exporter refuses dynamic shapes) and opset
11; the ops it cannot write are computed from ones it can during the export (``onnx_ops.py``).
Needs the ``[onnx]`` extra (onnx, onnxruntime).
"""

from __future__ import annotations

import os
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

from ..engine.errors import UserError
from .onnx_ops import exportable, refused_op

TOLERANCE = 1e-4  # max |onnxruntime - MindSpore|, relative to the largest output (at least 1)


def runtime():
    """onnx and onnxruntime, or a one-line error saying how to install them."""
    try:
        import onnx
        import onnxruntime
    except ImportError:
        raise UserError("--format onnx needs onnx and onnxruntime: pip install -e '.[onnx]'") from None
    return onnx, onnxruntime


def export_onnx(cell: nn.Cell, inputs: tuple[Tensor, ...], stem: Path, batch: int) -> tuple[Path, dict]:
    """``stem``.onnx for ``batch`` rows of ``inputs``, or a one-line error and no file. Returns
    the path and what the check measured (``opset``, ``max_abs_diff``)."""
    onnx, onnxruntime = runtime()
    path = stem.with_suffix(".onnx")
    if path.exists():
        raise UserError(f"{path} exists: export to another --out folder, or remove it first")
    cell.set_train(False)
    sample = tuple(Tensor(np.resize(x.asnumpy(), (batch, *x.shape[1:]))) for x in inputs)
    partial = stem.with_name(f".{stem.name}.partial")
    try:
        try:
            with exportable():
                ms.export(cell, *sample, file_name=str(partial), file_format="ONNX")
        except RuntimeError as exc:
            op = refused_op(exc)
            if op is None:
                raise
            raise UserError(f"{stem.name}: MindSpore cannot export the {op} op to ONNX "
                            "(deploy/onnx_ops.py rewrites the ones it can)") from None
        written = partial.with_suffix(".partial.onnx")
        model = onnx.load(str(written))
        onnx.checker.check_model(model)
        opset = max(entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx"))
        diff = _compare(onnxruntime, written, cell, sample, opset)
        os.replace(written, path)
    finally:
        for leftover in stem.parent.glob(f".{stem.name}.partial*"):
            leftover.unlink()
    return path, {"opset": opset, "max_abs_diff": diff}


def _compare(onnxruntime, path: Path, cell: nn.Cell, sample: tuple[Tensor, ...], opset: int) -> float:
    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise UserError(f"onnxruntime {onnxruntime.__version__} cannot run this opset-{opset} graph: "
                        f"{str(exc).splitlines()[0][:160]}") from None
    actual = session.run(None, {x.name: t.asnumpy() for x, t in zip(session.get_inputs(), sample)})
    expected = cell(*sample)
    expected = [t.asnumpy() for t in (expected if isinstance(expected, (tuple, list)) else (expected,))]
    diff = max(float(np.abs(a - e).max()) for a, e in zip(actual, expected))
    scale = max(1.0, *(float(np.abs(e).max()) for e in expected))
    if not diff <= TOLERANCE * scale:
        raise UserError(f"{path.name}: onnxruntime differs from the network by {diff:.2e} "
                        f"(tolerance {TOLERANCE * scale:.1e})")
    return diff
