"""Label-first TSV files (the Criteo layout) read as typed columns, one block at a time:
pyarrow parses a block in C++, each column is hashed as it arrives, and only compact codes of
the hashed ids are kept (``Features``: 1-4 bytes a cell), so a Criteo-sized file loads in
bounded memory.

The ids are those of a plain per-line reader: crc32("<column>:<value>") % buckets + 1 (stable
across runs and machines), where the values of an all-integer column are first bucketed by
log(v)^2 (v > 2) and an empty cell is the value "". Integers are plain decimals ("-3", "17").
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv as pacsv

from ...engine.errors import DataError

BLOCK = 1 << 25  # bytes of text parsed at a time (about 120k Criteo rows)
CRC_TABLE = np.arange(256, dtype=np.uint32)  # the crc32 (zlib) byte table
for _ in range(8):
    CRC_TABLE = np.where(CRC_TABLE & 1, (CRC_TABLE >> 1) ^ np.uint32(0xEDB88320), CRC_TABLE >> 1)


class Features:
    """An (N, F) int32 matrix of hashed ids kept as one column of codes per feature: column f
    is ``ids[f][codes[f]]``, ``ids[f]`` its distinct ids (sorted) and ``codes[f]`` uint8,
    uint16 or uint32, the smallest that numbers them (a log-bucketed integer column: 1 byte a
    cell). Indexing rows gives those rows of the int32 matrix, so it batches like one."""

    def __init__(self, codes: list[np.ndarray], ids: list[np.ndarray]):
        self.codes, self.ids = codes, ids

    def __len__(self) -> int:
        return len(self.codes[0])

    @property
    def shape(self) -> tuple[int, int]:
        return len(self), len(self.codes)

    @property
    def nbytes(self) -> int:
        return sum(codes.nbytes + ids.nbytes for codes, ids in zip(self.codes, self.ids, strict=True))

    def __getitem__(self, rows) -> np.ndarray:
        """(len(rows), F) int32: the hashed ids of ``rows`` (an index array or a slice)."""
        return np.stack([ids[codes[rows]] for codes, ids in zip(self.codes, self.ids, strict=True)], axis=-1)

    def part(self, start: int, stop: int) -> Features:
        """Rows ``start:stop``, sharing the codes (no copy)."""
        return Features([codes[start:stop] for codes in self.codes], self.ids)


class _TextFound(Exception):
    """A column hashed as integers so far has a non-integer further on."""


def label_first(path: Path) -> bool:
    """True when the first line starts with a 0/1 label (a Criteo-layout file, no header); an
    interaction table starts with its header."""
    with open(path, encoding="utf-8", errors="replace") as f:
        first = next((line for line in f if line.strip()), "")
    return first.split("\t", 1)[0].strip() in ("0", "1")


def read_tsv(path: Path, buckets: int) -> tuple[np.ndarray, Features]:
    """``label<TAB>feature...`` lines -> labels (N,) float32 and the hashed features (N, F)."""
    text: set[int] = set()  # columns known to hold text
    while True:
        try:
            return _read(path, buckets, _width(path), text)
        except _TextFound as found:  # rare: read the file again with that column as text
            text.add(found.args[0])


def _width(path: Path) -> int:
    with open(path, encoding="utf-8", errors="replace") as f:
        first = next((line for line in f if line.strip()), None)
    if first is None:
        raise DataError(f"{path} is empty")
    width = first.rstrip("\r\n").count("\t") + 1
    if width < 2:
        raise DataError(f"{path}:1: {width} tab-separated fields, expected 2 (label + features)")
    return width


def _read(path: Path, buckets: int, width: int, text: set[int]) -> tuple[np.ndarray, Features]:
    names = [str(j) for j in range(width)]
    read = pacsv.ReadOptions(column_names=names, block_size=2 * BLOCK)  # one batch a block
    options = dict(read_options=read,
                   parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),  # blank lines skipped
                   convert_options=pacsv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()),
                                                        null_values=[""], strings_can_be_null=True))
    labels, rows, integers = [], 0, set()  # integers: columns hashed as integers so far
    parts = [[] for _ in range(width - 1)]  # per feature, per block: (its distinct ids, each cell's code)
    for batch in _batches(path, width, options):
        label = batch.column(0)
        bad = pc.invert(pc.is_in(label, pa.array(["0", "1"]))).to_numpy(zero_copy_only=False)
        if bad.any():
            line = int(np.argmax(bad))
            raise DataError(f"{path}:{rows + line + 1}: label {label[line].as_py() or ''!r} is not 0 or 1")
        labels.append(pc.equal(label, "1").to_numpy(zero_copy_only=False).astype(np.float32))
        rows += batch.num_rows
        for j in range(1, width):
            values = batch.column(j)
            if j not in text:
                try:  # a failed cast is slow (~0.4 us a cell): the first 1,000 cells settle most text columns
                    pc.cast(values.slice(0, 1000), pa.int64())
                    values = _log_buckets(pc.cast(values, pa.int64()))
                    integers.add(j)
                except pa.ArrowInvalid:
                    if j in integers:
                        raise _TextFound(j) from None
                    text.add(j)
            parts[j - 1].append(hash_values(values, f"{j}:", buckets))
        del batch, label, values  # this block's text is freed before the next one is parsed
    codes, ids = zip(*map(_merge, parts), strict=True)
    return np.concatenate(labels) if labels else np.zeros(0, np.float32), Features(list(codes), list(ids))


def _merge(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One feature's blocks -> (codes into its distinct ids, the ids), freeing each block once copied."""
    ids = np.unique(np.concatenate([block_ids for block_ids, _ in parts]))
    codes, at = np.empty(sum(len(block) for _, block in parts), np.min_scalar_type(len(ids) - 1)), 0
    while parts:
        block_ids, block = parts.pop(0)
        codes[at:at + len(block)] = np.searchsorted(ids, block_ids).astype(codes.dtype)[block]
        at += len(block)
    return codes, ids


def _batches(path: Path, width: int, options: dict):
    """Record batches of ``BLOCK`` bytes of whole lines. The file is read here, a block at a time:
    given the path, pyarrow's streaming reader reads up to 32 blocks ahead (2 GB of text)."""
    try:
        with open(path, "rb") as f:
            rest = b""
            while block := f.read(BLOCK):
                block = rest + block
                cut = block.rfind(b"\n") + 1
                if cut:
                    yield from pacsv.open_csv(pa.py_buffer(memoryview(block)[:cut]), **options)
                rest = block[cut:]
            if rest:
                yield from pacsv.open_csv(pa.py_buffer(rest), **options)
    except pa.ArrowInvalid as error:
        raise _describe(path, width, str(error)) from None


def _log_buckets(numbers: pa.Array) -> pa.Array:
    """v -> int(log(v)^2) for v > 2, as decimal text (empty cells stay empty)."""
    v = numbers.fill_null(0).to_numpy(zero_copy_only=False).copy()
    big = v > 2
    v[big] = (np.log(v[big]) ** 2).astype(np.int64)
    return pc.cast(pa.array(v, mask=numbers.is_null().to_numpy(zero_copy_only=False)), pa.string())


def hash_values(values: pa.Array, prefix: str, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """The cells' crc32(prefix + value) % buckets + 1 (empty cells: the value "") as (ids, codes):
    the distinct ids (int32, sorted) and each cell's position among them (``ids[codes]``).
    Each distinct value is hashed once."""
    encoded = pc.dictionary_encode(values.fill_null(""))
    hashed = (crc32(encoded.dictionary, zlib.crc32(prefix.encode())) % buckets + 1).astype(np.int32)
    ids, position = np.unique(hashed, return_inverse=True)
    codes = position.astype(np.min_scalar_type(len(ids) - 1))
    return ids, codes[encoded.indices.to_numpy(zero_copy_only=False)]


def crc32(strings: pa.StringArray, start: int = 0) -> np.ndarray:
    """zlib.crc32(s.encode(), start) of every string, one byte position at a time across all of them."""
    offsets = np.frombuffer(strings.buffers()[1], np.int32)[strings.offset:strings.offset + len(strings) + 1]
    data = np.frombuffer(strings.buffers()[2] or b"\0", np.uint8)
    first, length = offsets[:-1], np.diff(offsets)
    crc = np.full(len(strings), ~np.uint32(start), np.uint32)
    for p in range(int(length.max(initial=0))):
        byte = data[np.minimum(first + p, len(data) - 1)]
        crc = np.where(length > p, CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8), crc)
    return ~crc


def _describe(path: Path, width: int, message: str) -> DataError:
    """The first line whose field count is wrong (read again line by line: only on bad input)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line, row in enumerate((text for text in f if text.strip()), start=1):
            fields = row.rstrip("\r\n").count("\t") + 1
            if fields != width:
                return DataError(f"{path}:{line}: {fields} tab-separated fields, expected {width} "
                                 "(label + features)")
    return DataError(f"{path}: {message.splitlines()[0]}")
