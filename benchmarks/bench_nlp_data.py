"""The nlp task on a large corpus: figures measured side by side in one run (not a test).

    python benchmarks/bench_nlp_data.py           # 150 MB corpus, char tokenizer, vs main at 15 MB
    python benchmarks/bench_nlp_data.py --mb 20 --small-mb 5 --tokenizers char bpe

A synthetic corpus of ``--mb`` MB (Zipf-distributed words from a fixed 20,000-word vocabulary,
punctuation, line breaks), written by the benchmark into a temporary folder. For each
tokenizer: wall time and peak RSS of ``python train.py --set train.max_steps=5`` (5 steps and
one evaluation under ``eval.max_examples``), the first run (tokenises into the cache) and the
second (reuses it), and the default run (the pydoc text) as the memory reference. Then the
same first run on a ``--small-mb`` corpus by this checkout and by the template at ``--ref``
(the whole text in memory, as before the token file), when that ref exists.
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
from render import render


def generate(root: Path, name: str, ref: str) -> Path:
    return render(root / name, "nlp", ref)


def write_corpus(file: Path, megabytes: float, seed: int = 0) -> None:
    """Random words (Zipf 1.1 over 20,000 made-up words), 8-20 words a sentence, ~8 sentences a line."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    words = np.array(["".join(rng.choice(letters, rng.integers(2, 10))) for _ in range(20_000)])
    punct = np.array([". ", ", ", "; ", "! ", "? "])
    target, written = int(megabytes * 1e6), 0
    with open(file, "w", encoding="utf-8") as f:
        while written < target:
            picks = words[np.minimum(rng.zipf(1.1, 200_000), 20_000) - 1]
            ends = rng.integers(8, 20, len(picks)) == 8  # about one word in 12 ends a sentence
            text = " ".join(
                w + (punct[i % 5] + ("\n" if i % 8 == 0 else "") if e else "")
                for i, (w, e) in enumerate(zip(picks, ends, strict=True))
            )
            written += f.write(text[: target - written] + "\n")


def child_peak(args: list[str], cwd: Path) -> tuple[float, float]:
    """Wall time and peak RSS (MB) of ``args`` run to the end."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"failed: {' '.join(map(str, args))}\n{err[-2000:]}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def train(project: Path, runs: Path, name: str, *sets: str) -> tuple[float, float]:
    args = [
        sys.executable,
        "train.py",
        "--set",
        "train.max_steps=5",
        "--set",
        f"output.dir={runs}",
        "--set",
        f"output.name={name}",
        "--set",
        "output.plot=false",
    ]
    for item in sets:
        args += ["--set", item]
    return child_peak(args, project)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=150)
    parser.add_argument("--small-mb", type=float, default=15, help="corpus MB to compare with --ref")
    parser.add_argument("--ref", default="main", help="template ref to compare with (default: %(default)s)")
    parser.add_argument("--tokenizers", nargs="+", default=["char"], choices=["char", "byte", "bpe"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = generate(root, "bench-nlp", "HEAD")
        corpus = root / "corpus.txt"
        start = time.perf_counter()
        write_corpus(corpus, args.mb)
        print(
            f"corpus: {corpus.stat().st_size / 1e6:.0f} MB written in {time.perf_counter() - start:.0f} s; "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        wall, peak = train(project, root / "runs", "default")
        print(f"default data (pydoc text), 5 steps: {wall:.1f} s wall, peak RSS {peak:,.0f} MB")
        for kind in args.tokenizers:
            for run in ("first (tokenise)", "second (cached)"):
                wall, peak = train(
                    project,
                    root / "runs",
                    f"{kind}-{run[:5]}",
                    f"data.path={corpus}",
                    f"data.tokenizer={kind}",
                )
                print(f"{args.mb:.0f} MB, {kind:4} {run:16}: {wall:6.1f} s wall, peak RSS {peak:,.0f} MB")
        small = root / "small.txt"
        write_corpus(small, args.small_mb, seed=1)
        try:
            before = generate(root, "bench-nlp-ref", args.ref)
        except subprocess.CalledProcessError:
            print(f"--ref {args.ref}: cannot render it, no comparison")
            return
        for label, proj in ((args.ref, before), ("this checkout", project)):
            wall, peak = train(proj, root / f"runs-{label.replace(' ', '-')}", "small", f"data.path={small}")
            what = f"{args.small_mb:.0f} MB, char, first run, {label:14}"
            print(f"{what}: {wall:6.1f} s wall, peak RSS {peak:,.0f} MB")
        print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
