"""Throughput of ``python train.py``, this checkout against an earlier release, side by side.

    python benchmarks/bench_versions.py --before v0.4.0                # every task
    python benchmarks/bench_versions.py --before v0.4.0 --task nlp --rounds 3

For a refactor that must not change speed: each task is rendered at REF and at HEAD, and the
two projects train the same steps of their default config in alternating fresh processes
(``--rounds`` each). Printed: the median samples/s of the log rows whose window holds neither
the compile (the first row) nor an evaluation (its time falls in the next window, and the
releases evaluate differently), and the final loss. Not a test: it prints figures. REF is a release tag
(``vX.Y.Z``, derived from VERSION as the wheel build does) or any git ref.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from render import REPO, render

TASKS = ("vision", "nlp", "recommender", "multimodal")


def commit_of(ref: str) -> str:
    """A release tag's commit (tags are derived from VERSION, never pushed), or ``ref`` itself."""
    spec = importlib.util.spec_from_file_location("hatch_build", REPO / "hatch_build.py")
    hatch_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hatch_build)
    return hatch_build.release_tags(REPO).get(ref, ref)


def train(project: Path, steps: int) -> tuple[float, float]:
    """(median samples/s of the clean log rows, last logged loss) of one fresh train.py."""
    overrides = [f"train.max_steps={steps}", "train.log_every=10", "output.plot=false"]
    args = [sys.executable, "train.py"] + [a for o in overrides for a in ("--set", o)]
    run = subprocess.run(args, cwd=project, capture_output=True, text=True, check=True)
    run_dir = project / json.loads(run.stdout[run.stdout.index("{\n") :])["run_dir"]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if r.get("kind") == "train"]
    evals = [r["step"] for r in rows if r.get("kind") == "eval"]
    clean = [
        row["samples_per_s"]
        for before, row in zip(train_rows, train_rows[1:], strict=False)
        if not any(before["step"] <= step < row["step"] for step in evals)
    ]
    return statistics.median(clean), train_rows[-1]["loss"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, metavar="REF")
    p.add_argument("--task", action="append", choices=TASKS)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    before = commit_of(args.before)
    print(f"load average: {os.getloadavg()[0]:.2f} (2-core machine; figures are noisy above 1)")
    print(f"{'task':<12} {'version':<10} {'samples/s (each round)':<34} {'median':>8} {'loss':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.task or TASKS:
            projects = {
                args.before: render(Path(tmp) / f"{task}-before", task, before),
                "HEAD": render(Path(tmp) / f"{task}-head", task),
            }
            figures = {name: [] for name in projects}
            for _ in range(args.rounds):
                for name, project in projects.items():
                    figures[name].append(train(project, args.steps))
            for name, runs in figures.items():
                rates = [rate for rate, _ in runs]
                each = " ".join(f"{rate:,.0f}" for rate in rates)
                median = statistics.median(rates)
                print(f"{task:<12} {name:<10} {each:<34} {median:>8,.0f} {runs[-1][1]:>8.4f}")


if __name__ == "__main__":
    main()
