"""Training recipes compared at the same wall-clock budget: held-out accuracy (not a test).

    python benchmarks/bench_recipe.py                 # 60 s a run
    python benchmarks/bench_recipe.py --seconds 120 --seeds 0 1

The vision project rendered from this checkout (HEAD), its default network (small_cnn), on the
embedded digits written as a 32x32 PNG folder (one sub-folder per class): the folder path, as a
user's photos take it. Each recipe trains in a fresh process for ``--seconds`` of wall clock
(a callback stops it, then it is evaluated) on the training split and is scored on the held-out
split (``data.eval_fraction``: 20 %, stratified, never trained on). Same wall clock, a whole
schedule each: a recipe's time per step is measured first (30 steps after the compile), then
it trains ``train.max_steps = seconds / step time`` steps with the default cosine schedule, so a
recipe that costs more per step gets fewer steps. ``--epochs N`` instead trains every recipe
for N epochs (the same steps).
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

from render import render

RECIPES = {
    "today's default (crop_flip, min_crop 0.25)": [],
    "crop, min_crop 0.25": ["data.augment=crop"],
    "crop, min_crop 0.08": ["data.augment=crop", "data.min_crop=0.08"],
    "crop + label smoothing 0.1 + EMA 0.99": [
        "data.augment=crop",
        "train.label_smoothing=0.1",
        "train.ema=0.99",
    ],
    "crop + RandAugment + label smoothing + EMA": [
        "data.augment=crop",
        "data.auto_augment=randaugment",
        "train.label_smoothing=0.1",
        "train.ema=0.99",
    ],
    "crop + mixup/cutmix + label smoothing + EMA": [
        "data.augment=crop",
        "data.mixup=0.8",
        "data.cutmix=1.0",
        "train.label_smoothing=0.1",
        "train.ema=0.99",
    ],
}


def write_digits_folder(project: Path, root: Path, size: int = 32) -> Path:
    import numpy as np
    from PIL import Image

    with np.load(project / "data" / "digits.npz") as arrays:
        images, labels = arrays["images"], arrays["labels"]
    for i, (image, label) in enumerate(zip(images, labels, strict=True)):
        (root / f"digit_{label}").mkdir(parents=True, exist_ok=True)
        pixels = (np.asarray(image, np.float32).reshape(8, 8) / max(float(images.max()), 1) * 255).astype(
            np.uint8
        )
        Image.fromarray(pixels).resize((size, size), Image.BILINEAR).save(
            root / f"digit_{label}" / f"{i:04d}.png"
        )
    return root


def worker(folder: str, seconds: float, seed: int, overrides: list[str]) -> dict:
    """Runs inside the generated project: the step time, then one budgeted run; its held-out accuracy."""
    sys.path.insert(0, os.getcwd())
    from vision.logs.callbacks import Callback
    from vision.run.train import train
    from vision.tasks import load_config

    class StepTime(Callback):
        def on_step_end(self, progress, logs):
            if logs["step"] == 10:  # compiled by now
                self.start = time.perf_counter()
            elif logs["step"] == 40:
                self.seconds = (time.perf_counter() - self.start) / 30

    base = [
        f"data.path={folder}",
        "data.channels=1",
        "data.image_size=32",
        f"seed={seed}",
        "output.plot=false",
        "train.log_every=10",
        f"output.dir={Path(folder).parent / 'runs'}",
        *overrides,
    ]
    if seconds > 0:
        timer = StepTime()
        train(
            load_config("config/config.yaml", [*base, "train.max_steps=40", "train.eval_every=1000"]),
            callbacks=[timer],
        )
        base.append(f"train.max_steps={int(seconds / timer.seconds)}")
    summary = train(load_config("config/config.yaml", base))
    return {"accuracy": summary["accuracy"], "steps": summary["steps"]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--epochs", type=int, help="every recipe trains this many epochs instead of --seconds")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--only", nargs="*", help="substrings of the recipes to run (default: all)")
    args = p.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    recipes = {k: v for k, v in RECIPES.items() if not args.only or any(o in k for o in args.only)}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = render(root / "vision", "vision")
        folder = write_digits_folder(project, root / "digits32")
        results: dict[str, list[dict]] = {}
        for seed in args.seeds:
            for name, overrides in recipes.items():
                budget = ["0", f"train.epochs={args.epochs}"] if args.epochs else [str(args.seconds)]
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        str(folder),
                        budget[0],
                        str(seed),
                        *overrides,
                        *budget[1:],
                    ],
                    cwd=project,
                    capture_output=True,
                    text=True,
                    timeout=3600,
                )
                if out.returncode:
                    raise SystemExit(f"{name}: {out.stderr.strip()[-800:]}")
                results.setdefault(name, []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    budget = f"{args.epochs} epochs" if args.epochs else f"{args.seconds:.0f} s of steps"
    print(f"held-out accuracy, digits as 32x32 PNGs, small_cnn, {budget} a run, seeds {args.seeds}:")
    for name, runs in results.items():
        accuracy = statistics.mean(r["accuracy"] for r in runs)
        print(f"  {name:46} {accuracy:.3f}  ({statistics.mean(r['steps'] for r in runs):.0f} steps)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        result = worker(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
        print(json.dumps(result))
    else:
        main()
