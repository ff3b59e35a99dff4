"""ONNX export that checks itself: ``onnx.checker``, then onnxruntime against the network.

``mindspore.onnx.export`` (opset 11) with named inputs and outputs and a dynamic batch axis:
the graph is checked by onnxruntime at batches 1, 7 and 64. A network that reshapes with its
batch as a number (a ViT's class token, an embedding's lowering) cannot run at another batch:
it is exported again with the batch fixed at ``FALLBACK_BATCH`` rows, and the spec says so
(``onnx.batch``; null: any). ``--batch N`` fixes it at N. The ops 2.10 cannot write are
computed from ones it can during the export (``onnx_ops.py``). Needs the ``[onnx]`` extra.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from contextlib import contextmanager
from pathlib import Path

import mindspore.onnx
import numpy as np
from mindspore import Tensor, nn
from mindspore import log as ms_log

from ..engine.errors import UserError
from .onnx_ops import exportable, refused_op

TOLERANCE = 1e-4  # max |onnxruntime - MindSpore|, relative to the largest output (at least 1)
BATCHES = (1, 7, 64)  # a dynamic batch axis is checked at each
FALLBACK_BATCH = 1  # where the batch cannot be dynamic


def runtime():
    """onnx and onnxruntime, or a one-line error saying how to install them."""
    try:
        import onnx
        import onnxruntime
    except ImportError:
        raise UserError("--format onnx needs onnx and onnxruntime: pip install -e '.[onnx]'") from None
    return onnx, onnxruntime


def export_onnx(cell: nn.Cell, inputs: tuple[Tensor, ...], stem: Path, batch: int | None,
                names: tuple[list[str], list[str]]) -> tuple[Path, dict]:
    """``stem``.onnx with ``names`` (inputs, outputs) and a dynamic batch (``batch`` None) or
    ``batch`` rows, or a one-line error and no file. Returns the path and what the check
    measured (``batch``: null when dynamic, ``opset``, ``max_abs_diff``)."""
    onnx, onnxruntime = runtime()
    path = stem.with_suffix(".onnx")
    if path.exists():
        raise UserError(f"{path} exists: export to another --out folder, or remove it first")
    cell.set_train(False)
    partial = stem.with_name(f".{stem.name}.partial.onnx")
    try:
        # One export per cell: MindSpore 2.10 cannot export a cell a second time at other shapes
        # ("i: 3 out of range" in its compiler). A dynamic graph that only runs at the batch it was
        # traced with becomes the fixed one by setting its input's batch to that number.
        rows = batch or len(inputs[0])
        traced = inputs if batch is None else tuple(Tensor(np.resize(x.asnumpy(), (batch, *x.shape[1:])))
                                                    for x in inputs)
        _write(onnx, cell, traced, partial, names, stem.name, dynamic=batch is None)
        checked = _check(onnx, onnxruntime, partial, cell, inputs, BATCHES, dynamic=True) if batch is None else None
        if checked is None:
            if batch is None:
                _fix_batch(onnx, partial, rows)
            checked = _check(onnx, onnxruntime, partial, cell, inputs, (rows,), dynamic=False)
        os.replace(partial, path)
    finally:
        for leftover in stem.parent.glob(f".{stem.name}.partial*"):
            leftover.unlink()
    return path, {"batch": None if checked.pop("dynamic") else rows, **checked}


def _write(onnx, cell: nn.Cell, inputs: tuple[Tensor, ...], path: Path, names: tuple[list[str], list[str]],
           label: str, dynamic: bool = False) -> None:
    """The ONNX file, its inputs named by the exporter and its outputs renamed here (2.10's
    ``output_names`` can name an output no node writes)."""
    inputs_named, outputs_named = names
    try:
        with exportable(), mindspore_errors() as said:
            mindspore.onnx.export(cell, *inputs, file_name=str(path), input_names=inputs_named,
                                  dynamic_axes={n: {0: "batch"} for n in inputs_named} if dynamic else None)
    except RuntimeError as exc:
        op = refused_op(exc)
        if op is None:
            raise
        raise UserError(f"{label}: MindSpore cannot export the {op} op to ONNX "
                        "(deploy/onnx_ops.py rewrites the ones it can)") from None
    if not path.is_file():  # 2.10 logs a failed write (e.g. a full disk) and returns: its error, raised
        failed = re.search(r"\[Errno (\d+)\] (.*)", said[-1] if said else "")
        raise OSError(*(int(failed[1]), failed[2]) if failed else (errno.EIO, "MindSpore wrote no ONNX file"))
    model = onnx.load(str(path))
    renamed = {output.name: new for output, new in zip(model.graph.output, outputs_named)}
    for node in model.graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
        node.output[:] = [renamed.get(name, name) for name in node.output]
    for output in model.graph.output:
        output.name = renamed.get(output.name, output.name)
    onnx.save(model, str(path))


@contextmanager
def mindspore_errors():
    """MindSpore's own error log lines while the block runs, kept in a list instead of printed."""
    logger, said = ms_log._get_logger(), []

    class Keep(logging.Handler):
        def emit(self, record):
            said.append(record.getMessage())

    handlers, logger.handlers = logger.handlers, [Keep(logging.ERROR)]
    try:
        yield said
    finally:
        logger.handlers = handlers


def _fix_batch(onnx, path: Path, rows: int) -> None:
    """Every input's batch axis set to ``rows``."""
    model = onnx.load(str(path))
    for graph_input in model.graph.input:
        graph_input.type.tensor_type.shape.dim[0].dim_value = rows
    onnx.save(model, str(path))


def _check(onnx, onnxruntime, path: Path, cell: nn.Cell, inputs: tuple[Tensor, ...], batches: tuple[int, ...],
           dynamic: bool) -> dict | None:
    """onnxruntime against the network at each of ``batches``; None where a dynamic graph cannot
    run at one of them (its batch was baked in)."""
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    opset = max(entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx"))
    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise UserError(f"onnxruntime {onnxruntime.__version__} cannot run this opset-{opset} graph: "
                        f"{str(exc).splitlines()[0][:160]}") from None
    diff = 0.0
    for batch in batches:
        sample = tuple(Tensor(np.resize(x.asnumpy(), (batch, *x.shape[1:]))) for x in inputs)
        try:
            actual = session.run(None, {x.name: t.asnumpy() for x, t in zip(session.get_inputs(), sample)})
        except Exception:  # a shape baked into the graph: not dynamic after all
            if dynamic:
                return None
            raise
        expected = cell(*sample)
        expected = [t.asnumpy() for t in (expected if isinstance(expected, (tuple, list)) else (expected,))]
        if dynamic and any(a.shape != e.shape for a, e in zip(actual, expected)):
            return None
        diff = max(diff, *(float(np.abs(a - e).max()) for a, e in zip(actual, expected)))
        scale = max(1.0, *(float(np.abs(e).max()) for e in expected))
        if dynamic and not diff <= TOLERANCE * scale:  # right at one batch only: a batch baked in somewhere
            return None
        if not diff <= TOLERANCE * scale:
            raise UserError(f"{path.name}: onnxruntime differs from the network by {diff:.2e} at batch {batch} "
                            f"(tolerance {TOLERANCE * scale:.1e})")
    return {"dynamic": dynamic, "opset": opset, "max_abs_diff": diff}
