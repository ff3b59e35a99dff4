"""Evaluation at scale: figures measured side by side in one run (not a test).

    python benchmarks/bench_eval.py                          # 5 M and 20 M ratings, 50,000 retrieval pairs
    python benchmarks/bench_eval.py --rows 200000 --users 8000 --items 2000 --pairs 5000   # a quick look

Recommender: for each of ``--rows`` sizes, a synthetic ``ratings.csv`` (``--users`` users,
``--items`` items with Zipf popularity) read through ``data.source=files``: wall time and
peak RSS of ``python train.py --set train.max_steps=5`` (load + 5 steps + one evaluation
under ``eval.max_examples``), then where the time and memory go (reading the CSV,
preparation, one evaluation) measured in a separate process; one row per size.
Multimodal: recall@k and zero-shot accuracy over ``--pairs`` synthetic
embedding pairs, the chunked running top-k of the generated project against the N x N
matrix + argsort it replaced (run only up to ``--max-square`` pairs: the matrix and its
argsort take 12 bytes per pair squared).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from render import render


def generate(task: str, root: Path) -> tuple[Path, str]:
    dest, package = Path(tempfile.mkdtemp(dir=root)) / f"bench-{task}", f"bench_{task}"
    render(dest, task)
    return dest, package


def write_ratings(folder: Path, rows: int, users: int, items: int) -> Path:
    """``rows`` ratings: every user at least 2, items drawn with Zipf(1.1) popularity, random times."""
    file = folder / "ratings.csv"
    if file.is_file():
        return folder
    rng = np.random.default_rng(0)
    user = np.r_[np.repeat(np.arange(users), 2), rng.integers(0, users, rows - 2 * users)] + 1
    item = (rng.zipf(1.1, rows) - 1) % items + 1
    table = np.c_[user, item, rng.integers(1, 6, rows), 1_600_000_000 + rng.integers(0, 10**8, rows)]
    folder.mkdir(parents=True, exist_ok=True)
    with open(file, "w", encoding="utf-8") as f:
        f.write("userId,movieId,rating,timestamp\n")
        np.savetxt(f, table, fmt="%d", delimiter=",")
    return folder


def child_peak(args: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall time, peak RSS (MB) and stdout of ``args`` run to the end."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"failed ({os.waitstatus_to_exitcode(status)}): {' '.join(map(str, args))}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024, out


# -- workers (run in the generated project, one process per measurement) ----------------------
def phases_worker(package: str, overrides: list[str]) -> None:
    """Seconds and peak RSS (MB) after reading the ratings (the project's columnar reader),
    preparing the data and one evaluation (fresh network)."""
    sys.path.insert(0, ".")
    load_config = importlib.import_module(f"{package}.tasks").load_config
    cfg = load_config("config/config.yaml", overrides)
    importlib.import_module(f"{package}.engine.runtime").setup(cfg)
    log_mod = importlib.import_module(f"{package}.tasks.recommender.log")
    topk = importlib.import_module(f"{package}.tasks.recommender.topk")
    times = {"start_mb": peak_mb()}
    start = time.perf_counter()
    log = log_mod.read_log(cfg)
    times.update(read_csv_s=time.perf_counter() - start, read_csv_mb=peak_mb())
    start = time.perf_counter()
    data = topk.prepare(log, cfg)
    del log
    times.update(prepare_s=time.perf_counter() - start, prepare_mb=peak_mb())
    network = topk.build_model(cfg, data.meta).network
    network.set_train(False)
    start = time.perf_counter()
    metrics = topk.evaluate(network, data, cfg)
    times.update(evaluate_s=time.perf_counter() - start, evaluate_mb=peak_mb())
    times.update(
        train_rows=len(data.train),
        eval_users=len(data.eval["user"]),
        examples=metrics["examples"],
        items=len(data.eval["items"]),
    )
    print(json.dumps(times))


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def retrieval_worker(package: str, pairs: int, way: str) -> None:
    """Recall@1/5 both ways + zero-shot accuracy over ``pairs`` synthetic embedding pairs."""
    sys.path.insert(0, ".")
    retrieval = importlib.import_module(f"{package}.tasks.multimodal.retrieval")
    rng = np.random.default_rng(0)
    image = rng.standard_normal((pairs, 64)).astype(np.float32)
    text = image + rng.standard_normal((pairs, 64)).astype(np.float32)
    image /= np.linalg.norm(image, axis=1, keepdims=True)
    text /= np.linalg.norm(text, axis=1, keepdims=True)
    texts = [f"caption {i % (pairs // 2)}" for i in range(pairs)]
    prompts, classes = text[:10], [f"class {c}" for c in range(10)]
    labels = [classes[i % 10] for i in range(pairs)]
    start = time.perf_counter()
    if way == "chunked":
        metrics = retrieval.retrieval_metrics(image, text, texts)
        metrics["zero_shot_acc"] = retrieval.zero_shot_accuracy(image, prompts, classes, labels)
    else:  # what evaluation did before: the N x N score matrix, sorted row by row
        _, first, inverse = np.unique(np.asarray(texts), return_index=True, return_inverse=True)
        i2t = np.argsort(-(image @ text[first].T), axis=1, kind="stable")[:, :5]
        t2i = np.argsort(-(text @ image.T), axis=1, kind="stable")[:, :5]
        metrics = {
            f"i2t_r{k}": float(np.mean(np.any(i2t[:, :k] == inverse[:, None], axis=1))) for k in (1, 5)
        }
        metrics.update(
            {
                f"t2i_r{k}": float(np.mean(np.any(inverse[t2i[:, :k]] == inverse[:, None], axis=1)))
                for k in (1, 5)
            }
        )
        metrics["zero_shot_acc"] = float(
            np.mean(np.asarray(classes)[np.argmax(image @ prompts.T, axis=1)] == np.asarray(labels))
        )
    print(json.dumps({"seconds": time.perf_counter() - start, **metrics}))


# -- the run ------------------------------------------------------------------------------------
def bench_recommender(root: Path, args) -> None:
    """One row per ``--rows`` size, side by side: the whole run, then its phases."""
    project, package = generate("recommender", root)
    print(
        f"\nrecommender: synthetic ratings.csv, {args.users:,} users, {args.items:,} items (Zipf), "
        f"eval.max_examples={args.budget}; peak RSS after each phase in a separate process"
    )
    print(
        "  rows | csv MB | train.py --set train.max_steps=5: wall s, peak MB | read s, MB | prepare s, MB "
        "| one eval s (ms a user), MB | training rows made on demand"
    )
    for rows in args.rows:
        folder = root / f"ratings-{rows}"
        # Written by a child: a child inherits its parent's peak RSS (ru_maxrss) at fork.
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--worker",
                "ratings",
                str(folder),
                str(rows),
                str(args.users),
                str(args.items),
            ],
            check=True,
        )
        overrides = [
            "data.source=files",
            f"data.path={folder}",
            "data.drop_short_users=true",
            f"eval.max_examples={args.budget}",
        ]
        sets = [
            a
            for o in [*overrides, "train.max_steps=5", "output.plot=false", f"output.dir={root / 'runs'}"]
            for a in ("--set", o)
        ]
        wall, peak, _ = child_peak([sys.executable, "train.py", *sets], project)
        _, _, out = child_peak([sys.executable, __file__, "--worker", "phases", package, *overrides], project)
        p = json.loads(out.strip().splitlines()[-1])
        size = (folder / "ratings.csv").stat().st_size / 2**20
        print(
            f"  {rows:,} | {size:,.0f} | {wall:.1f} s, {peak:,.0f} MB | {p['read_csv_s']:.1f} s, "
            f"{p['read_csv_mb']:,.0f} MB | {p['prepare_s']:.1f} s, {p['prepare_mb']:,.0f} MB | "
            f"{p['evaluate_s']:.1f} s ({1000 * p['evaluate_s'] / p['examples']:.0f} ms; {p['examples']:,} of "
            f"{p['eval_users']:,} users x {p['items']:,} items), {p['evaluate_mb']:,.0f} MB | "
            f"{p['train_rows']:,} ({p['train_rows'] * 12 / 2**20:,.0f} MB if materialised)"
        )
    print(f"  (import alone: {p['start_mb']:,.0f} MB)")


def bench_retrieval(root: Path, args) -> None:
    project, package = generate("multimodal", root)
    sizes = sorted({n for n in (args.pairs // 5, args.pairs // 2, args.pairs) if n >= 10})
    print(
        "\nmultimodal retrieval metrics (R@1/5 both ways + zero-shot) over N synthetic 64-d embedding pairs"
    )
    print(f"  {'N':>8} | {'chunked: s, peak MB':>22} | {'N x N + argsort: s, peak MB':>30}")
    for n in sizes:
        text, metrics = [], []
        for way in ("chunked", "square"):
            if way == "square" and n > args.max_square:
                text.append(f"not run (~{12 * n * n / 2**30:.0f} GB)")
                continue
            _, peak, out = child_peak(
                [sys.executable, __file__, "--worker", "retrieval", package, str(n), way], project
            )
            result = json.loads(out.strip().splitlines()[-1])
            text.append(f"{result.pop('seconds'):.1f} s, {peak:,.0f} MB")
            metrics.append(result)
        same = (
            ""
            if len(metrics) < 2
            else " (metrics equal)"
            if metrics[0] == metrics[1]
            else " (metrics DIFFER)"
        )
        print(f"  {n:>8,} | {text[0]:>22} | {text[1]:>30}{same}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, nargs="+", default=[5_000_000, 20_000_000])
    p.add_argument("--users", type=int, default=200_000)
    p.add_argument("--items", type=int, default=50_000)
    p.add_argument("--budget", type=int, default=500, help="eval.max_examples for the recommender run")
    p.add_argument("--pairs", type=int, default=50_000)
    p.add_argument("--max-square", type=int, default=20_000, help="largest N for the N x N way")
    p.add_argument("--only", choices=["recommender", "retrieval"])
    p.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        kind, package, *rest = args.worker
        if kind == "ratings":
            write_ratings(Path(package), *map(int, rest))
            return None
        if kind == "phases":
            return phases_worker(package, rest)
        return retrieval_worker(package, int(rest[0]), rest[1])
    print(f"load average before: {os.getloadavg()[0]:.2f} (2-core machine; figures are noisy above 2)")
    root = Path(tempfile.gettempdir()) / "msscaffold-bench-eval"  # keeps the ratings.csv files between runs
    root.mkdir(exist_ok=True)
    if args.only != "retrieval":
        bench_recommender(root, args)
    if args.only != "recommender":
        bench_retrieval(root, args)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
