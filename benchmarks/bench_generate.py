"""Median wall time of `msscaffold new` vs raw `copier copy` of the same template source.

    python benchmarks/bench_generate.py [--runs 7] [--task vision]

Both are run as the user runs them (a fresh process each time) from this checkout at HEAD,
working-tree changes included. `msscaffold new` also does `git init` + the first commit,
which raw Copier does not; the `--no-git` row shows the cost of that. Target ratio <= 1.15.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--task", default="vision")
    args = parser.parse_args()
    data = ["-d", f"task={args.task}", "-d", "project_name=bench"]
    commands = {
        "msscaffold new": [
            sys.executable,
            "-m",
            "msscaffold",
            "new",
            "--template",
            str(REPO),
            "--vcs-ref",
            "HEAD",
            *data,
        ],
        "  ... --no-git": [
            sys.executable,
            "-m",
            "msscaffold",
            "new",
            "--no-git",
            "--template",
            str(REPO),
            "--vcs-ref",
            "HEAD",
            *data,
        ],
        "copier copy": [
            sys.executable,
            "-m",
            "copier",
            "copy",
            "--quiet",
            "--defaults",
            "--vcs-ref",
            "HEAD",
            *data,
            str(REPO),
        ],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs + 1):  # run 0 warms caches and is dropped
            for k, (name, cmd) in enumerate(commands.items()):  # interleaved: drift hits all alike
                elapsed = timed([*cmd, f"out-{i}-{k}"], Path(tmp))
                if i:
                    times[name].append(elapsed)
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, value in medians.items():
        print(f"{name:<18} median {value * 1000:7.0f} ms over {args.runs} runs")
    ratio = medians["msscaffold new"] / medians["copier copy"]
    print(f"ratio msscaffold/copier: {ratio:.2f} (target <= 1.15)")
    print(f"ratio without git init + commit: {medians['  ... --no-git'] / medians['copier copy']:.2f}")


if __name__ == "__main__":
    main()
