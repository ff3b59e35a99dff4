"""MINDIR export with a dynamic batch axis and a reload check against the live network, ONNX
export checked by onnxruntime (``onnx.py``), and a ``<name>.json`` beside each network with what
inference needs (``spec.py``)."""

from __future__ import annotations

from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

from ..engine.errors import UserError
from .inference import load_trained
from .spec import io_names, write_spec

FORMATS = ("mindir", "onnx")


def export_checkpoint(path: str, out_dir: str, overrides: list[str] = (), formats: tuple[str, ...] = ("mindir",),
                      batch: int | None = None, dtype: str = "fp32") -> dict[str, Path]:
    """Each of the task's networks in each format; ``batch``: ONNX's batch, None for a dynamic one
    (where the graph allows: onnx.py). A task's folder format (nlp: ``hf``, in ``dtype``) is the
    whole ``out_dir``, exported alone. Returns ``{"<name>" or "<name>.onnx": path}``."""
    if batch is not None and batch < 1:
        raise UserError(f"--batch {batch}: expected a positive number of rows")
    if folder := next((f for f in formats if f not in FORMATS), None):
        trained = load_trained(path, overrides)
        known = (*FORMATS, *trained.task.folder_formats)
        if folder not in known:
            raise UserError(f"--format {folder}: expected {' or '.join(known)} (mindir,onnx: both)")
        if len(formats) > 1:
            raise UserError(f"--format {','.join(formats)}: {folder} writes a folder of its own: export it alone")
        return trained.task.folder_formats[folder](trained, Path(out_dir), dtype)
    if "onnx" in formats:
        from .onnx import runtime

        runtime()  # before anything is written
    trained = load_trained(path, overrides)
    out = Path(out_dir)
    written = {}
    meta = trained.task.deploy_meta(trained.meta, trained.cfg)
    arrays = trained.task.deploy_arrays(trained.meta, trained.cfg)
    exports = trained.task.exports(trained.network, trained.meta, trained.cfg)  # may refuse: before any write
    out.mkdir(parents=True, exist_ok=True)
    if "onnx" in formats and (taken := [out / f"{name}.onnx" for name in exports if (out / f"{name}.onnx").exists()]):
        raise UserError(f"{taken[0]} exists: export to another --out folder, or remove it first")
    for name, (cell, inputs) in exports.items():
        files = {}
        if arrays:
            np.savez(out / f"{name}.npz", **arrays)
            files["arrays"] = out / f"{name}.npz"
        if "mindir" in formats:
            written[name] = files["mindir"] = export_and_check(cell, inputs, out / name)
        if "onnx" in formats:
            from .onnx import export_onnx

            names = io_names(name, cell, len(_numpy(cell(*inputs))))
            written[f"{name}.onnx"], checked = export_onnx(cell, inputs, out / name, batch, names)
            files["onnx"] = {"file": written[f"{name}.onnx"], **checked}
        write_spec(out / name, files, cell, inputs, _numpy(cell(*inputs)), trained.task.name, meta, path)
    return written


def export_and_check(cell: nn.Cell, inputs: tuple[Tensor, ...], stem: Path, atol: float = 1e-4) -> Path:
    """Export ``cell`` with axis 0 of every input dynamic; reload it and compare on ``inputs``."""
    cell.set_train(False)
    dynamic = [Tensor(shape=[None, *x.shape[1:]], dtype=x.dtype) for x in inputs]
    ms.export(cell, *dynamic, file_name=str(stem), file_format="MINDIR")
    path = stem.with_suffix(".mindir")
    graph = nn.GraphCell(ms.load(str(path)))
    for batch in (1, 3):  # the batch axis really is dynamic
        sample = tuple(Tensor(np.repeat(x.asnumpy(), batch, axis=0)) for x in inputs)
        expected, actual = _numpy(cell(*sample)), _numpy(graph(*sample))
        if any(not np.allclose(e, a, atol=atol) for e, a in zip(expected, actual)):
            raise UserError(f"exported {path} disagrees with the network (batch {batch})")
    return path


def _numpy(output) -> list[np.ndarray]:
    return [t.asnumpy() for t in (output if isinstance(output, (tuple, list)) else (output,))]
