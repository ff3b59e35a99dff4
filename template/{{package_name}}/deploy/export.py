"""MINDIR export (dynamic batch axis, reloaded and checked), ONNX (the ``onnx`` feature) and ``<name>.json``
(``spec.py``). Files are staged in a hidden folder, then moved: a failure leaves ``--out`` as it was."""

from __future__ import annotations

import io
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

from ..engine.errors import UserError
from ..engine.seams import feature
from .inference import load_trained
from .spec import io_names, write_spec

FORMATS = ("mindir", "onnx")


def export_checkpoint(path: str, out_dir: str, overrides: list[str] = (), formats: tuple[str, ...] = ("mindir",),
                      batch: int | None = None, dtype: str = "fp32") -> dict[str, Path]:
    """Each network in each format (``batch``: ONNX's, None: dynamic), or a task's folder format alone."""
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
        feature("deploy.onnx", "onnx", "--format onnx")  # the optional feature's files
        from .onnx import runtime

        runtime()  # before anything is written
    trained = load_trained(path, overrides)
    out = Path(out_dir)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return export_networks(trained, path, out, formats, batch)
    except BaseException:
        if created and not any(out.iterdir()):  # the folder this export made, and nothing in it
            out.rmdir()
        raise


def export_networks(trained, path: str, out: Path, formats: tuple[str, ...], batch: int | None) -> dict[str, Path]:
    written = {}
    meta = trained.task.deploy_meta(trained.meta, trained.cfg)
    arrays = trained.task.deploy_arrays(trained.meta, trained.cfg)
    exports = trained.task.exports(trained.network, trained.meta, trained.cfg)  # may refuse: nothing written yet
    if "onnx" in formats and (taken := [out / f"{name}.onnx" for name in exports if (out / f"{name}.onnx").exists()]):
        raise UserError(f"{taken[0]} exists: export to another --out folder, or remove it first")
    for name, (cell, inputs) in exports.items():
        files, output = {}, trained.task.outputs.get(name, ("output", ""))
        with staged(out, name) as stage:  # files named as in out, moved there when all are written
            if arrays:  # built in memory: a failed write then leaves no half-closed zip behind
                buffer = io.BytesIO()
                np.savez(buffer, **arrays)
                (stage / f"{name}.npz").write_bytes(buffer.getvalue())
                files["arrays"] = out / f"{name}.npz"
            if "mindir" in formats:
                export_and_check(cell, inputs, stage / name)
                written[name] = files["mindir"] = out / f"{name}.mindir"
            if "onnx" in formats:
                from .onnx import export_onnx

                names = io_names(cell, len(_numpy(cell(*inputs))), output[0])
                checked = export_onnx(cell, inputs, stage / name, batch, names)[1]
                written[f"{name}.onnx"] = out / f"{name}.onnx"
                files["onnx"] = {"file": written[f"{name}.onnx"], **checked}
            if (out / f"{name}.json").is_file():  # an earlier export's formats stay listed (spec.py)
                shutil.copyfile(out / f"{name}.json", stage / f"{name}.json")
            write_spec(stage / name, files, cell, inputs, _numpy(cell(*inputs)), trained.task.name, meta, path,
                       output)
    return written


@contextmanager
def staged(out: Path, name: str):
    """A hidden folder for ``name``'s files, renamed into ``out`` when the block ends; removed on failure."""
    stage = out / f".{name}.partial"
    shutil.rmtree(stage, ignore_errors=True)  # left by an export that was killed
    try:
        stage.mkdir()
        yield stage
        for entry in sorted(stage.iterdir()):
            target = out / entry.name
            if entry.is_dir() and target.is_dir():  # MINDIR's external weights of a large network
                shutil.rmtree(target)
            os.replace(entry, target)
    except OSError as exc:
        raise UserError(f"could not export {name} into {out} ({exc.strerror or exc}); "
                        f"none of its files was written") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


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
