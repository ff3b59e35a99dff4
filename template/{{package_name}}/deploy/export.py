"""MINDIR export with a dynamic batch axis, a reload check against the live network, and a
``<name>.json`` beside each graph with what inference needs (``deploy.py``)."""

from __future__ import annotations

from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

from ..engine.errors import UserError
from .inference import load_trained
from .spec import write_spec


def export_checkpoint(path: str, out_dir: str, overrides: list[str] = ()) -> dict[str, Path]:
    trained = load_trained(path, overrides)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    meta = trained.task.deploy_meta(trained.meta, trained.cfg)
    for name, (cell, inputs) in trained.task.exports(trained.network, trained.meta, trained.cfg).items():
        written[name] = export_and_check(cell, inputs, out / name)
        write_spec(written[name], cell, inputs, _numpy(cell(*inputs)), trained.task.name, meta, path)
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
