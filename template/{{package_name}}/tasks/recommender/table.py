"""Interaction tables as they come: any file name, CSV/TSV (separator sniffed or ``data.separator``)
or Parquet, the columns named in ``data.columns`` (user, item[, rating][, timestamp]), ids that
are integers or strings, and any other column kept as a side feature (read by CTR, listed as
ignored by top-K). The cells are parsed by pyarrow into typed columns; bad input stops with one
line naming the file, the line and the column.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv as pacsv

from ...engine.errors import DataError
from .csvfile import _describe

SEPARATORS = ",\t;|"  # what the sniffer chooses among
ROLES = ("user", "item", "rating", "timestamp")  # the keys of data.columns; user and item are required
GUESSES = {"user": ("user", "user_id", "userId", "uid"), "item": ("item", "item_id", "itemId", "movieId", "iid"),
           "rating": ("rating", "score"), "timestamp": ("timestamp", "time", "ts")}


def read_table(file: Path, columns: dict[str, str] | None, separator: str | None, numeric: list[str],
               ignore: list[str]) -> dict[str, np.ndarray]:
    """``{"user", "item", "rating"?, "timestamp"?}`` plus each side column by its own name: ids as
    int64 when every cell is an integer, else str; rating float32; timestamp int64 (integers, or
    ISO dates as ns); side columns str, or float64 where ``numeric`` names them."""
    separator = {"\\t": "\t", "tab": "\t"}.get(separator, separator)  # as typed in --set
    parquet = file.suffix.lower() in (".parquet", ".pq")
    table = _parquet(file) if parquet else None
    header = table.column_names if table is not None else _header(file, separator := separator or sniff(file))
    if len(set(header)) < len(header):
        twice = next(name for name in header if header.count(name) > 1)
        raise DataError(f"{file}:1: column {twice!r} appears twice in the header")
    mapping = _mapping(file, header, columns)
    for key, names in (("data.numeric", numeric), ("data.ignore", ignore)):
        if missing := [name for name in names if name not in header]:
            raise DataError(f"{file}: {key} names {missing[0]!r}, not a column (header: {','.join(header)})")
    if table is None:
        table = _csv(file, header, separator)
    if table.num_rows == 0:
        raise DataError(f"{file} has a header but no rows")
    line = 1 if parquet else 2  # the line of row 0 (Parquet: its row number)
    out = {}
    for role, name in mapping.items():
        out[role] = _convert(file, table.column(name), name, role, line)
    for name in header:
        if name not in mapping.values() and name not in ignore:
            out[name] = _convert(file, table.column(name), name, "numeric" if name in numeric else "side", line)
    return out


def sniff(file: Path) -> str:
    """The separator of ``file``: the one of ``SEPARATORS`` its header line holds most often (the
    rows are then held to it: a row split otherwise is named by its line)."""
    with open(file, newline="", encoding="utf-8-sig") as f:
        first = next((line for line in f if line.strip()), "")
    if not first:
        raise DataError(f"{file} is empty")
    counts = {sep: first.count(sep) for sep in SEPARATORS}
    best = max(counts, key=counts.get)
    if not counts[best]:
        raise DataError(f"{file}:1: no separator among {SEPARATORS!r} in the header ({first.strip()[:80]!r}); "
                        "set data.separator")
    return best


def _header(file: Path, separator: str) -> list[str]:
    with open(file, newline="", encoding="utf-8-sig") as f:
        first = next(csv.reader(f, delimiter=separator), None)
    if not first:
        raise DataError(f"{file} is empty")
    return [name.strip() for name in first]


def _mapping(file: Path, header: list[str], columns: dict[str, str] | None) -> dict[str, str]:
    """Role -> column name: ``data.columns`` as given, else the usual names found in the header."""
    if columns is None:
        columns = {role: next((n for n in names if n in header), None) for role, names in GUESSES.items()}
        columns = {role: name for role, name in columns.items() if name}
        if "user" not in columns or "item" not in columns:
            raise DataError(f"{file}: no user/item columns found (header: {','.join(header)}); name them in config: "
                            "data.columns: {user: <column>, item: <column>, rating: ..., timestamp: ...}")
    for role, name in columns.items():
        if name not in header:
            raise DataError(f"{file}: data.columns.{role}={name!r} is not a column (header: {','.join(header)})")
    return dict(columns)


def _csv(file: Path, header: list[str], separator: str, use_threads: bool = True) -> pa.Table:
    try:
        return pacsv.read_csv(
            file,
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=1, use_threads=use_threads),
            parse_options=pacsv.ParseOptions(delimiter=separator, ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(column_types=dict.fromkeys(header, pa.string()),
                                                 null_values=[""], strings_can_be_null=True))
    except pa.ArrowInvalid as error:
        if use_threads:  # only a single-threaded read reports the row: read again to name the line
            return _csv(file, header, separator, use_threads=False)
        raise DataError(_describe(file, header, False, str(error))) from None


def _parquet(file: Path) -> pa.Table:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"{file}: reading Parquet needs pyarrow's parquet module (pip install pyarrow)") from None
    try:
        return pq.read_table(file)
    except (pa.ArrowInvalid, OSError) as error:
        raise DataError(f"{file}: not a readable Parquet file ({str(error).splitlines()[0]})") from None


def _convert(file: Path, column: pa.ChunkedArray, name: str, role: str, line: int) -> np.ndarray:
    """One column in its role's type; an empty cell or a bad value is one line naming row and column."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = pc.utf8_trim_whitespace(column)
        empty = pc.fill_null(pc.equal(column, ""), True)  # null: an empty cell; "": spaces only
    else:
        empty = pc.is_null(column)
    if pc.any(empty).as_py():
        at = int(np.flatnonzero(empty.to_numpy(zero_copy_only=False))[0])
        raise DataError(f"{file}:{at + line}: {name} is empty (column of the {role})")
    if role in ("user", "item", "side"):
        try:  # integer ids stay integers (as MovieLens'); any other text is an id as written
            return pc.cast(column, pa.int64()).to_numpy() if role != "side" else _text(column)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return _text(column)
    if role == "timestamp":
        for kind in (pa.int64(), pa.timestamp("ns")):
            try:
                return pc.cast(pc.cast(column, kind), pa.int64()).to_numpy()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        what = "an integer or an ISO date"
    else:  # rating, numeric side feature
        try:
            values = pc.cast(column, pa.float64()).to_numpy()
            if np.isfinite(values).all():
                return values.astype(np.float32) if role == "rating" else values
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        what = "a finite number"
    at, value = _first_bad(column.to_pylist(), role)
    raise DataError(f"{file}:{at + line}: {name} {value!r} is not {what}")


def _text(column: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.cast(column, pa.string()).to_numpy(zero_copy_only=False), dtype=str)


def _first_bad(values: list, role: str) -> tuple[int, object]:
    """The first cell that does not convert (read one by one: only on bad input)."""
    for at, value in enumerate(values):
        try:
            number = float(value) if role != "timestamp" else int(value)
            if number != number or number in (float("inf"), float("-inf")):
                return at, value
        except (TypeError, ValueError):
            if role != "timestamp":
                return at, value
            try:
                np.datetime64(value)
            except ValueError:
                return at, value
    return 0, values[0]
