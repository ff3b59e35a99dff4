"""Read a Hugging Face checkpoint folder tensor by tensor: ``model.safetensors``, or the shards
that ``model.safetensors.index.json`` lists, in bf16, fp16 or fp32.

The safetensors format is an 8-byte header length, a JSON header (per tensor: dtype, shape,
byte range) and the raw bytes. The file is memory-mapped and each tensor copied out alone
as float32, so at most one tensor (plus the network it goes into) is in memory at a time,
never a whole shard. NumPy has no bfloat16: bf16 is the top half of a float32, so its bits
are shifted into place. Needs neither PyTorch nor the safetensors package.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ...engine.errors import CheckpointError

INDEX = "model.safetensors.index.json"
DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64,
          "I64": np.int64, "I32": np.int32, "U8": np.uint8, "BOOL": np.bool_}


def shard_files(folder: Path) -> list[Path]:
    """The files of the checkpoint in ``folder``, in the index's order; every one must exist."""
    index = folder / INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (ValueError, KeyError, TypeError):
            raise CheckpointError(f"{index} is not a safetensors index (no 'weight_map')") from None
        files = [folder / name for name in dict.fromkeys(weight_map.values())]
    elif (folder / "model.safetensors").is_file():
        files = [folder / "model.safetensors"]
    else:
        raise CheckpointError(f"{folder} has neither model.safetensors nor {INDEX}")
    missing = next((f for f in files if not f.is_file()), None)
    if missing is not None:
        raise CheckpointError(f"shard {missing.name} listed in {INDEX} is missing from {folder}")
    return files


def header(path: Path) -> tuple[dict, int]:
    """The JSON header of a .safetensors file and the offset where its data starts."""
    try:
        with open(path, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            meta = json.loads(f.read(size))
    except (OSError, struct.error, ValueError, UnicodeDecodeError):
        raise CheckpointError(f"{path} is not a readable .safetensors file") from None
    meta.pop("__metadata__", None)
    return meta, 8 + size


def tensors(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """(name, float32 array) for every tensor of one file, one at a time."""
    meta, start = header(path)
    data = np.memmap(path, dtype=np.uint8, mode="r")
    for name, info in meta.items():
        dtype = DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise CheckpointError(f"{path.name}: tensor {name!r} has dtype {info.get('dtype')}, which this reader "
                                  f"does not know ({', '.join(DTYPES)})")
        begin, end = (start + offset for offset in info["data_offsets"])
        if end > len(data):
            raise CheckpointError(f"{path} is truncated (tensor {name!r} ends past the end of the file)")
        raw = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
        if info["dtype"] == "BF16":
            array = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            array = raw.astype(np.float32) if raw.dtype.kind == "f" else np.array(raw)
        yield name, array
    del data
