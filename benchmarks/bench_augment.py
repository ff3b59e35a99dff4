"""Augmented input pipeline: images/s with 1 vs 2 (or more) ``data.workers`` (not a test).

    python benchmarks/bench_augment.py                    # 1,200 JPEGs, workers 1 and 2
    python benchmarks/bench_augment.py --workers 1 2 4 8  # the curve, on a machine with the cores
    python benchmarks/bench_augment.py --before REF       # also the project of git REF, same run

A synthetic ImageFolder of 160x160 RGB JPEGs, trained at image_size 128 (base square 146, the
eval resize), batch 64, in the vision project rendered from this checkout (HEAD). Measured per
worker count, each in a fresh process, alternating, median of ``--repeats``:

- ``python op``: the 0.4.0 path, a random resized crop + flip as a Python op in ``map`` (it holds
  the GIL; RandAugment could not even be expressed there);
- ``pipeline``: today's augmented path up to the batch: C++ ops only (decode, resize, centre
  square) plus the row of augmentation numbers per image (crop + flip + RandAugment);
- ``+ device``: the same, with each batch augmented by ``Augment`` (compiled) as the train step
  does it: what a training run gets.
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

from bench_pipeline import write_folder
from render import render

PATHS = ("python op", "pipeline", "+ device")


def worker(folder: str, workers: int, path: str) -> dict:
    """Runs inside the generated project: one epoch of ``path`` over the folder's images."""
    sys.path.insert(0, os.getcwd())
    import numpy as np
    from vision.engine import pipeline, runtime
    from vision.engine.arrays import compiled
    from vision.images.files import ImageFiles, ImageTransform
    from vision.tasks import load_config
    from vision.tasks.vision.augment import Augment, Recipe
    try:  # since the folders feature, a folder's listing and sources are folders.py's
        from vision.tasks.vision.folders import AugmentedFiles, list_folder
    except ImportError:
        from vision.tasks.vision.data import AugmentedFiles, list_folder

    try:  # since the recipes feature, RandAugment's rows and colour ops are recipes.py's
        from vision.tasks.vision.recipes import FullRecipe as Recipe  # noqa: F811
        from vision.tasks.vision.recipes import RecipeAugment as Augment  # noqa: F811
    except ImportError:
        pass

    cfg = load_config(
        "config/config.yaml",
        [
            f"data.path={folder}",
            "data.channels=3",
            "data.image_size=128",
            "data.auto_augment=randaugment",
            "data.min_crop=0.08",
        ],
    )
    runtime.setup(cfg)
    files, labels, _ = list_folder(Path(folder))
    if path == "python op":
        source = ImageFiles(
            files, {"label": labels}, ImageTransform(128, 3, augment="crop_flip", min_crop=0.08)
        )
    else:
        recipe = Recipe.of(cfg, "crop_flip", 146)
        raw = {"raw": True} if "raw" in ImageTransform.__dataclass_fields__ else {}  # uint8 since 0.8.0
        source = AugmentedFiles(
            ImageFiles(files, {"label": labels}, ImageTransform(146, 3, eval_crop=1.0, **raw)), recipe
        )
        augment = compiled(Augment(recipe, [0.5] * 3, [0.25] * 3))
    from mindspore import Tensor

    def epoch(e: int) -> int:
        count = 0
        for batch in pipeline.batches(source, np.arange(len(files)), e, 64, workers):
            if path == "+ device":
                augment(Tensor(batch[0]), Tensor(batch[-1])).asnumpy()
            count += len(batch[0])
        return count

    epoch(0)  # warm-up: compiles the device augmentation, fills the page cache
    start = time.perf_counter()
    count = epoch(1)
    return {"images_per_s": count / (time.perf_counter() - start)}


def child(project: Path, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if out.returncode:
        raise SystemExit(f"worker failed in {project}: {out.stderr.strip()[-800:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--images", type=int, default=1200)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--before", metavar="REF", help="also measure the project of this git ref")
    args = p.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        projects = {"": render(root / "vision", "vision")}
        if args.before:
            (root / "before").mkdir()
            projects[f" @{args.before}"] = render(root / "before" / "vision", "vision", args.before)
        folder = write_folder(root, args.images)
        rows = [(path + suffix, project, path) for suffix, project in projects.items() for path in PATHS]
        figures: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.repeats):
            for name, project, path in rows:
                for workers in args.workers:
                    result = child(project, str(folder), str(workers), path)
                    figures.setdefault((name, workers), []).append(result["images_per_s"])
    width = max(12, *(len(name) + 1 for name, _, _ in rows))
    print(f"images/s, {args.images} JPEGs 160x160 -> 128, batch 64, median of {args.repeats}:")
    print(
        f"{'':{width}}"
        + "".join(f"{f'{w} worker' + 's' * (w > 1):>13}" for w in args.workers)
        + "   last / first"
    )
    for name, _, _ in rows:
        medians = [statistics.median(figures[name, w]) for w in args.workers]
        print(
            f"{name:{width}}" + "".join(f"{m:13.0f}" for m in medians) + f"   {medians[-1] / medians[0]:.2f}x"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        print(json.dumps(worker(sys.argv[2], int(sys.argv[3]), sys.argv[4])))
    else:
        main()
