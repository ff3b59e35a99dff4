"""Read a Hugging Face checkpoint folder tensor by tensor: ``model.safetensors``, or the shards
that ``model.safetensors.index.json`` lists, in bf16, fp16 or fp32.

The safetensors format is an 8-byte header length, a JSON header (per tensor: dtype, shape,
byte range) and the raw bytes. The file is memory-mapped and each tensor copied out alone
as float32, so at most one tensor (plus the network it goes into) is in memory at a time,
never a whole shard. NumPy has no bfloat16: bf16 is the top half of a float32, so its bits
are shifted into place. Needs neither PyTorch nor the safetensors package (whose NumPy reader has
no bf16), and checks a header as strictly as it does: known dtypes, whole shapes, byte ranges
that match them and tile the data from its first byte to its last, without a gap or an overlap.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ....engine.errors import CheckpointError

INDEX = "model.safetensors.index.json"
DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64,
          "I64": np.int64, "I32": np.int32, "U8": np.uint8, "BOOL": np.bool_}


def shard_files(folder: Path) -> list[Path]:
    """The files of the checkpoint in ``folder``, in the index's order; every one must exist, inside
    ``folder`` (``inside``)."""
    index = folder / INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (ValueError, KeyError, TypeError):
            raise CheckpointError(f"{index} is not a safetensors index (no 'weight_map')") from None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise CheckpointError(f"{index}: 'weight_map' is not a map of tensor names to file names")
        files = [inside(folder, name, INDEX) for name in dict.fromkeys(weight_map.values())]
    elif (folder / "model.safetensors").is_file():
        files = [inside(folder, "model.safetensors", folder.name)]
    else:
        raise CheckpointError(f"{folder} has neither model.safetensors nor {INDEX}")
    missing = next((f for f in files if not f.is_file()), None)
    if missing is not None:
        raise CheckpointError(f"shard {missing.name} listed in {INDEX} is missing from {folder}")
    return files


def inside(folder: Path, name: str, source: str) -> Path:
    """``folder / name``, refused unless it stays in ``folder`` (as Hugging Face resolves shards inside
    the repository only): no absolute path, no ``..``, no symlink out of it. One exception, the
    Hugging Face cache: a ``snapshots/<revision>`` folder's files link into the repository's ``blobs``."""
    path, root = folder / name, folder.resolve()
    if Path(name).is_absolute() or ".." in Path(name).parts or "\\" in name:
        raise CheckpointError(f"{folder / source}: {name!r} is not a file name inside {folder}; refused")
    target = path.resolve()
    blobs = root.parent.parent / "blobs" if root.parent.name == "snapshots" else None
    if not (target.is_relative_to(root) or (blobs is not None and target.is_relative_to(blobs))):
        raise CheckpointError(f"{path} leads out of {folder} (a symlink to {target}); refused: copy the file in")
    return path


def relative_names(folder: Path, files: list[Path]) -> list[str]:
    """Each file's path relative to ``folder`` (what a checkpoint's meta records of its source)."""
    return [f.relative_to(folder).as_posix() for f in files]


MAX_HEADER = 100_000_000  # bytes: the safetensors library's own limit


def header(path: Path) -> tuple[dict, int]:
    """The checked JSON header of a .safetensors file and the offset where its data starts."""
    try:
        file_size = path.stat().st_size
        with open(path, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            if size > min(MAX_HEADER, file_size - 8):
                raise ValueError(f"a header of {size} bytes")
            meta = json.loads(f.read(size))
    except (OSError, struct.error, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{path} is not a readable .safetensors file ({exc})") from None
    problem = header_problem(meta, file_size - 8 - size)
    if problem:
        raise CheckpointError(f"{path} is not a valid .safetensors file: {problem}")
    meta.pop("__metadata__", None)
    return meta, 8 + size


def header_problem(meta, data_size: int) -> str | None:
    """What is wrong with a parsed header for ``data_size`` bytes of data, or None."""
    if not isinstance(meta, dict):
        return "its header is not a JSON object"
    extra = meta.get("__metadata__", {})
    if not isinstance(extra, dict) or not all(isinstance(v, str) for v in extra.values()):
        return "__metadata__ is not a map of strings"
    ranges = []
    for name, info in meta.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or info.get("dtype") not in DTYPES:
            return f"tensor {name!r}: dtype {info.get('dtype') if isinstance(info, dict) else None!r} is not one of " \
                   f"{', '.join(DTYPES)}"
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if not (isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape)):
            return f"tensor {name!r}: shape {shape!r} is not a list of sizes"
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(n) is int for n in offsets)
                and 0 <= offsets[0] <= offsets[1]):
            return f"tensor {name!r}: data_offsets {offsets!r} is not a byte range"
        if offsets[1] - offsets[0] != int(np.prod(shape, dtype=np.int64)) * np.dtype(DTYPES[info["dtype"]]).itemsize:
            return f"tensor {name!r}: {offsets[1] - offsets[0]} bytes for shape {shape} of {info['dtype']}"
        ranges.append((offsets[0], offsets[1], name))
    at = 0
    for begin, end, name in sorted(ranges):
        if begin != at:
            return f"tensor {name!r} starts at byte {begin}, not {at} ({'an overlap' if begin < at else 'a gap'})"
        at = end
    if at != data_size:
        return f"its tensors cover {at} bytes of {data_size} ({'truncated' if at > data_size else 'bytes left over'})"
    return None


def tensors(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """(name, float32 array) for every tensor of one file, one at a time."""
    meta, start = header(path)
    data = np.memmap(path, dtype=np.uint8, mode="r")
    for name, info in meta.items():
        dtype = DTYPES[info["dtype"]]  # header() checked the dtype, the shape and the byte range
        begin, end = (start + offset for offset in info["data_offsets"])
        raw = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
        if info["dtype"] == "BF16":
            array = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            array = raw.astype(np.float32) if raw.dtype.kind == "f" else np.array(raw)
        yield name, array
    del data
