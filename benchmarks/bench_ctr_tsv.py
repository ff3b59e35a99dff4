"""The recommender's CTR TSV reader on a Criteo-layout file: peak RSS and time (not a test).

    python benchmarks/bench_ctr_tsv.py                 # 10 M rows (~2.4 GB of text)
    python benchmarks/bench_ctr_tsv.py --rows 2000000

Writes, into a temporary folder deleted at the end, a TSV file in the Criteo layout: a 0/1
label (25 % positive), 13 integer columns (heavy-tailed counts, 0-40 % empty) and 26
categorical columns of 8-hex-digit ids (Zipf-distributed over 10 to 1 M distinct values per
column, 0-30 % empty). Then, in a fresh process of a project rendered from this checkout,
``tasks/recommender/tsvfile.read_tsv`` (what ``data.mode: ctr`` with a .tsv ``data.path``
calls): wall time and peak RSS, beside the size of the result itself (the compact features
``tsvfile.Features`` and the labels).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyarrow import csv as pacsv
from render import render

HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


def hex_ids(codes: np.ndarray) -> pa.Array:
    """uint32 codes -> 8-hex-digit strings, vectorised."""
    digits = HEX[(codes[:, None] >> np.arange(28, -1, -4, dtype=np.uint32)) & 0xF]
    return pa.array(np.ascontiguousarray(digits).view("S8").ravel()).cast(pa.string())


def write_criteo(file: Path, rows: int, chunk: int = 1_000_000, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    cardinality = np.logspace(1, 6, 26).astype(np.int64)
    options = pacsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none")
    with pacsv.CSVWriter(file, schema_for(), write_options=options) as writer:
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            columns = [pa.array((rng.random(n) < 0.25).astype(np.int64))]
            for j in range(13):
                values = np.floor(rng.lognormal(1 + j % 4, 1.5, n)).astype(np.int64)
                columns.append(pa.array(values, mask=rng.random(n) < 0.4 * (j % 3) / 2))
            for j in range(26):
                ids = np.minimum(rng.zipf(1.3, n), cardinality[j]).astype(np.uint32)
                codes = (ids * np.uint32(2654435761)) ^ np.uint32(j * 0x9E3779B9 & 0xFFFFFFFF)
                strings = hex_ids(codes)
                columns.append(pa.array(strings, mask=rng.random(n) < 0.3 * (j % 4) / 3))
            writer.write_batch(pa.record_batch(columns, schema=schema_for()))


def schema_for() -> pa.Schema:
    return pa.schema(
        [("label", pa.int64())]
        + [(f"I{j}", pa.int64()) for j in range(1, 14)]
        + [(f"C{j}", pa.string()) for j in range(1, 27)]
    )


CHILD = """
import sys, time
from pathlib import Path
from {package}.tasks.recommender.tsvfile import read_tsv
start = time.perf_counter()
label, features = read_tsv(Path(sys.argv[1]), 2**17)
print(len(label), features.shape[1], features.nbytes + label.nbytes, time.perf_counter() - start)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = render(root / "bench_ctr", "recommender")
        file = root / "criteo.tsv"
        start = time.perf_counter()
        write_criteo(file, args.rows)
        written = time.perf_counter() - start
        print(
            f"{args.rows:,} rows, {file.stat().st_size / 1e9:.2f} GB written in {written:.0f} s; "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        code = CHILD.format(package=project.name.replace("-", "_"))
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(file)],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = proc.stdout.read(), proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"read_tsv failed:\n{err[-2000:]}")
        rows, fields, result, read = out.split()
        peak = usage.ru_maxrss / 1024
        print(
            f"read_tsv: {int(rows):,} rows x {fields} fields in {float(read):.1f} s "
            f"({int(rows) / float(read):,.0f} rows/s; process {wall:.1f} s); peak RSS {peak:,.0f} MB, "
            f"of which the result (compact features + labels) {int(result) / 2**20:,.0f} MB"
        )
        print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
