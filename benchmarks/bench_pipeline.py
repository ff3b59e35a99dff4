"""Input pipelines at scale: figures measured side by side in one run (not a test).

    python benchmarks/bench_pipeline.py                       # N = 1,000 and 4,000 JPEGs
    python benchmarks/bench_pipeline.py --sizes 500 2000      # a quicker look
    python benchmarks/bench_pipeline.py --baseline main       # also today's main, for comparison

A synthetic ImageFolder of 160x160 RGB JPEGs (10 classes) is trained on with image_size 128,
channels 3: peak RSS and time to first step of ``python train.py --set train.max_steps=30``
per N (the streamed path: memory must not grow with N); images/s of the input pipeline alone
(one epoch of ``Batches``, batch 64, with and without augmentation, and MindSpore's own
``ImageFolderDataset`` with the same C++ ops as a ceiling) with ``data.workers=2`` vs ``1``; and
the default digits run's ms/step (data included: the real batch iterator feeds the steps)
against ``--baseline`` (a git ref of this repository rendered the same way), alternating.
Run it on a quiet machine: the load average is printed first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from render import render


def generate(root: Path, ref: str, name: str) -> Path:
    return render(root / name, "vision", ref)


def write_folder(root: Path, n: int, size: int = 160, classes: int = 10) -> Path:
    """``n`` RGB JPEGs: smooth colour fields per class plus noise (compress like photos, not like noise)."""
    from PIL import Image

    folder = root / f"images-{n}"
    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 1, size, dtype=np.float32)
    for i in range(n):
        label = i % classes
        (folder / f"class_{label}").mkdir(parents=True, exist_ok=True)
        base = np.stack(
            [np.outer(ramp, ramp), np.outer(ramp[::-1], ramp), np.full((size, size), label / classes)], -1
        )
        pixels = np.clip(base * 200 + rng.normal(0, 20, (size, size, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"class_{label}" / f"{i:05d}.jpg", quality=90)
    return folder


def train_run(project: Path, overrides: list[str]) -> dict:
    """Peak RSS (MB), wall time and seconds from start to the first logged step of ``train.py``."""
    args = [
        sys.executable,
        "train.py",
        "--set",
        "train.log_every=1",
        "--set",
        "output.plot=false",
        *[a for o in overrides for a in ("--set", o)],
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    first = None
    for line in proc.stdout:
        if first is None and line.startswith("step "):
            first = time.perf_counter() - start
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"train.py failed in {project}: {overrides}")
    return {"rss_mb": usage.ru_maxrss / 1024, "wall_s": time.perf_counter() - start, "first_step_s": first}


def child(project: Path, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if out.returncode:
        raise SystemExit(f"worker failed in {project}: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- workers (run inside a generated project, one process per measurement) --------------------
def load_project():
    sys.path.insert(0, ".")
    package = next(p.parts[0] for p in Path(".").glob("*/engine/loop.py"))
    import importlib

    return lambda module: importlib.import_module(f"{package}.{module}")


def pipeline_worker(folder: str, workers: int, augment: str) -> None:
    """Images/s of one epoch of training batches (decode, [crop, flip,] resize, normalise), no
    model. ``augment=native``: MindSpore's own ImageFolderDataset with the same C++ ops as our
    unaugmented path (resize the shorter side, centre crop, normalise), the ceiling to compare with."""
    mod = load_project()
    cfg = mod("tasks").load_config(
        "config/config.yaml",
        [
            f"data.path={folder}",
            "data.image_size=128",
            "data.channels=3",
            f"data.workers={workers}",
            f"data.augment={'none' if augment == 'native' else augment}",
            "data.mean=[0.5]",
            "data.std=[0.25]",
        ],
    )
    mod("engine.runtime").setup(cfg)
    if augment == "native":
        import mindspore.dataset as ds
        from mindspore.dataset import vision

        ops = [
            vision.Decode(),
            vision.Resize(128),
            vision.CenterCrop(128),
            vision.Normalize([127.5] * 3, [63.75] * 3),
            vision.HWC2CHW(),
        ]
        dataset = ds.ImageFolderDataset(folder, num_parallel_workers=workers, shuffle=True)
        iterator = iter(
            dataset.map(ops, ["image"], num_parallel_workers=workers)
            .batch(64, drop_remainder=True)
            .create_tuple_iterator(output_numpy=True, num_epochs=1)
        )
    else:
        data = mod("tasks.vision.data").load_data(cfg)
        iterator = mod("engine.data").Batches(data.train, 64, cfg.seed, workers=workers).epoch(0)
    next(iterator)  # the pipeline's start-up is not throughput
    start, n = time.perf_counter(), 0
    for images, _ in iterator:
        n += len(images)
    print(json.dumps({"images_per_s": n / (time.perf_counter() - start)}))


def step_worker(steps: int) -> None:
    """ms per optimizer step of the default config, fed by the trainer's own batch iterator."""
    mod = load_project()
    cfg = mod("tasks").load_config(
        "config/config.yaml",
        ["output.plot=false", f"output.dir={tempfile.mkdtemp()}", "train.log_every=1000"],
    )
    run = mod("engine.loop").setup(cfg, mod("tasks").get_task("vision"))
    k, times, epoch = cfg.train.grad_accum_steps, [], 0
    while len(times) < steps:  # optimizer steps as the loop runs them (engine/loop.py)
        batches = run.batches.epoch(epoch)
        for _ in range(run.steps_per_epoch):
            start = time.perf_counter()
            for micro_step in range(k):
                _, finite = run.step_fn(next(batches), apply=micro_step == k - 1)
                finite.asnumpy()
            times.append(time.perf_counter() - start)
        epoch += 1
    print(json.dumps({"ms_per_step": 1000 * statistics.median(times[10:steps])}))


# -- the run --------------------------------------------------------------------------------
def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs=2, default=[1000, 4000])
    p.add_argument("--baseline", default="main", help="git ref for the digits step-time comparison")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--parts", nargs="+", choices=["train", "pipeline", "steps"], default=["train", "pipeline", "steps"]
    )
    args = p.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ours, base = generate(root, "HEAD", "bench_pipe"), generate(root, args.baseline, "bench_base")
        folders = {n: write_folder(root, n) for n in args.sizes}
        if "train" in args.parts:
            train_table(ours, folders, args.sizes, root)
        if "pipeline" in args.parts:
            pipeline_speed(ours, folders[args.sizes[0]], args.sizes[0], args.repeats)
        if "steps" in args.parts:
            step_time(ours, base, args)


def train_table(ours: Path, folders: dict, sizes: list[int], root: Path) -> None:
    """Peak RSS and time to first step of train.py, 30 steps, at each N, and their ratio."""
    runs = {
        n: train_run(
            ours,
            [
                f"data.path={folders[n]}",
                "data.image_size=128",
                "data.channels=3",
                "train.max_steps=30",
                f"output.dir={root / 'runs'}",
            ],
        )
        for n in sizes
    }
    small, big = (runs[n] for n in sizes)
    print("| | " + " | ".join(f"N = {n:,}" for n in sizes) + " | ratio |\n|---|---|---|---|")
    for key, label in (
        ("rss_mb", "peak RSS of train.py, 30 steps (MB)"),
        ("first_step_s", "time to first step (s)"),
        ("wall_s", "wall, incl. final eval (s)"),
    ):
        print(f"| {label} | {small[key]:.1f} | {big[key]:.1f} | {big[key] / small[key]:.2f} |")


def pipeline_speed(ours: Path, folder: Path, n: int, repeats: int) -> None:
    print(
        f"\ninput pipeline alone, images/s (N = {n:,}, 128x128, batch 64, best of {repeats}):\n"
        "| pipeline | workers=1 | workers=2 | ratio |\n|---|---|---|---|"
    )
    for augment, label in (
        ("crop_flip", "ours, crop + flip (train default)"),
        ("none", "ours, no augmentation"),
        ("native", "ImageFolderDataset, same ops"),
    ):
        speed = {
            w: max(
                child(ours, "pipeline", str(folder), str(w), augment)["images_per_s"] for _ in range(repeats)
            )
            for w in (1, 2)
        }
        print(f"| {label} | {speed[1]:,.0f} | {speed[2]:,.0f} | {speed[2] / speed[1]:.2f} |")


def step_time(ours: Path, base: Path, args) -> None:
    steps = {"ours": [], "base": []}
    for _ in range(args.repeats):  # alternating, so load changes hit both alike
        steps["base"].append(child(base, "step", str(args.steps))["ms_per_step"])
        steps["ours"].append(child(ours, "step", str(args.steps))["ms_per_step"])
    a, b = min(steps["base"]), min(steps["ours"])
    print(
        f"\ndefault digits run, ms/step (median, best of {args.repeats}): {args.baseline} {a:.2f}, "
        f"this tree {b:.2f}; speed ratio {a / b:.2f}"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        kind, *rest = sys.argv[2:]
        pipeline_worker(rest[0], int(rest[1]), rest[2]) if kind == "pipeline" else step_worker(int(rest[0]))
    else:
        main()
