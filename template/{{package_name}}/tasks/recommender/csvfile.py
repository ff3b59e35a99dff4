"""CSV files read as columns with pyarrow: numbers are parsed in C++ straight into typed
arrays (no Python object per row), so tens of millions of ratings fit in a few hundred MB
and load in seconds. Bad input stops with one line naming the file, the line and the cell.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyarrow import csv as pacsv

from ...engine.errors import DataError

ARROW_TYPES = {np.int64: pa.int64(), np.float32: pa.float32(), str: pa.string()}


def read_columns(file: Path, required: tuple[str, ...], types: dict[str, type], names: tuple[str, ...] = (),
                 delimiter: str = ",") -> dict[str, np.ndarray | list]:
    """The columns of ``file`` named in ``types`` that it has (``required`` must be there):
    NumPy arrays of the given dtype (``np.int64``, ``np.float32``), or a list for ``str``.
    ``names``: the columns of a file without a header line (else its first line names them)."""
    header = list(names) or _header(file)
    missing = [name for name in required if name not in header]
    if missing:
        raise DataError(f"{file}: missing column(s) {', '.join(missing)} (header: {','.join(header)})")
    wanted = {name: ARROW_TYPES[kind] for name, kind in types.items() if name in header}
    table = _read(file, header, wanted, bool(names), delimiter, use_threads=True)
    if table.num_rows == 0:
        raise DataError(f"{file} has no rows" if names else f"{file} has a header but no rows")
    columns = {}
    for name, kind in types.items():
        if name not in wanted:
            continue
        column = table.column(name)
        table = table.drop_columns([name])  # frees its buffers once converted: one copy at a time
        if column.null_count:  # an empty cell (the only text read as null)
            line = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0]) + 1 + (not names)
            raise DataError(f"{file}:{line}: {name} '' is not {'an integer' if kind is np.int64 else 'a number'}")
        columns[name] = column.to_pylist() if kind is str else column.to_numpy().astype(kind, copy=False)
        if kind is np.float32 and not np.isfinite(columns[name]).all():  # inf, nan: parsed, but not a rating
            at = int(np.flatnonzero(~np.isfinite(columns[name]))[0])
            raise DataError(f"{file}:{at + 1 + (not names)}: {name} '{column[at]}' is not a finite number")
    return columns


def _header(file: Path) -> list[str]:
    with open(file, newline="", encoding="utf-8-sig") as f:
        first = next(csv.reader(f), None)
    if not first:
        raise DataError(f"{file} is empty")
    return [name.strip() for name in first]


def _read(file: Path, header: list[str], wanted: dict[str, pa.DataType], headerless: bool, delimiter: str,
          use_threads: bool) -> pa.Table:
    try:
        return pacsv.read_csv(
            file,
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=int(not headerless),
                                           use_threads=use_threads),
            # Blank lines are rows too (an error, as before): pyarrow's row numbers stay line numbers.
            parse_options=pacsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(column_types=wanted, include_columns=list(wanted),
                                                 null_values=[""], strings_can_be_null=False))
    except pa.ArrowInvalid as error:
        if use_threads:  # only a single-threaded read reports the row: read again to name the line
            return _read(file, header, wanted, headerless, delimiter, use_threads=False)
        raise DataError(_describe(file, header, headerless, str(error))) from None


def _describe(file: Path, header: list[str], headerless: bool, message: str) -> str:
    """pyarrow's error as one line in this project's words (file:line: what)."""
    row = re.search(r"Row #(\d+)", message)
    where = f"{file}:{row.group(1)}" if row else str(file)  # pyarrow's row number is the file's line
    fields = re.search(r"Expected (\d+) columns, got (\d+)", message)
    if fields:
        return f"{where}: {fields.group(2)} fields, {'expected' if headerless else 'the header has'} {fields.group(1)}"
    cell = re.search(r"CSV column #(\d+).*conversion error to (\w+): invalid value '(.*)'", message, re.S)
    if cell:
        kind = "an integer" if cell.group(2).startswith("int") else "a number"
        return f"{where}: {header[int(cell.group(1))]} {cell.group(3)!r} is not {kind}"
    return f"{where}: {message.splitlines()[0]}"
