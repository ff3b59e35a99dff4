"""Training benchmarks of the generated projects: a table of figures measured side by side.

    python benchmarks/bench_train.py                 # every available task
    python benchmarks/bench_train.py --task vision --steps 40

For each task it generates the project from this checkout, then runs every measurement in
a fresh process (so environment knobs such as ONEDNN_MAX_CPU_ISA apply cleanly):
jit vs PyNative ms/step, MindSpore's own Model.train (GRAPH_MODE) vs our loop, accumulation
overhead (k=4 micro-steps vs 4 plain steps of the same micro-batch), time to first step,
peak RSS of the default training run, the oneDNN ISA knob, and the same model in PyTorch
(eager and torch.compile) when torch is importable. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from render import render

HERE = Path(__file__).resolve().parent
TASKS = ("vision", "nlp", "recommender", "multimodal")
TORCH_PEERS = ("vision", "nlp")  # the models written in torch_peers.py


def generate(task: str, root: Path) -> tuple[Path, str]:
    dest = root / f"bench-{task}"
    package = f"bench_{task}"
    render(dest, task)
    return dest, package


def measure(project: Path, package: str, *overrides: str, steps: int, extra: tuple[str, ...] = ()) -> dict:
    args = [sys.executable, str(HERE / "measure_step.py"), package, "--steps", str(steps), *extra]
    for item in overrides:
        args += ["--set", item]
    out = subprocess.run(args, cwd=project, capture_output=True, text=True, timeout=1800)
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def peak_rss_mb(project: Path, *overrides: str) -> tuple[float, float]:
    """Peak resident memory (MB) and wall time (s) of `python train.py` with the default config."""
    args = [sys.executable, "train.py", *[a for o in overrides for a in ("--set", o)]]
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"default training failed in {project}")
    return usage.ru_maxrss / 1024, time.perf_counter() - start


def torch_peer(task: str, project: Path, compile_: bool, steps: int) -> dict:
    args = [sys.executable, str(HERE / "torch_peers.py"), task, "--steps", str(steps)]
    if compile_:
        args.append("--compile")
    out = subprocess.run(args, cwd=project, capture_output=True, text=True, timeout=1800)
    if out.returncode:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_task(task: str, root: Path, steps: int) -> list[tuple[str, str]]:
    project, package = generate(task, root)
    rows: list[tuple[str, str]] = []

    def ms(*overrides: str, extra: tuple[str, ...] = ()) -> dict:
        return measure(project, package, *overrides, steps=steps, extra=extra)

    jit = ms()
    pynative = ms("train.jit=false", extra=("--warmup", "2"))
    rows.append(("jit ms/step", f"{jit['ms_per_step']:.1f}"))
    rows.append(("PyNative ms/step", f"{pynative['ms_per_step']:.1f}"))
    rows.append(("PyNative / jit", f"{pynative['ms_per_step'] / jit['ms_per_step']:.1f}x"))
    # the convolution with the weight gradient as a forward convolution (default false: nn.Conv2d)
    fast_conv = ms("model.fast_conv=true") if task == "vision" else None
    if fast_conv:
        rows.append(("jit ms/step, model.fast_conv true", f"{fast_conv['ms_per_step']:.1f}"))
    framework = ms(extra=("--framework-loop",))
    if "error" in framework:
        rows.append(("Model.train GRAPH_MODE / ours", framework["error"][:60]))
    else:
        rows.append(("Model.train GRAPH_MODE ms/step", f"{framework['ms_per_step']:.1f}"))
        rows.append(("Model.train GRAPH_MODE / ours", f"{framework['ms_per_step'] / jit['ms_per_step']:.2f}"))
    batch = _config_value(project, "train", "batch_size")
    micro = max(batch // 4, 1)
    plain = ms(f"train.batch_size={micro}")
    accum = ms(f"train.batch_size={micro}", "train.grad_accum_steps=4")
    rows.append(("accum k=4 / 4 plain steps", f"{accum['ms_per_step'] / (4 * plain['ms_per_step']):.3f}"))
    rows.append(("time to first step (s)", f"{jit['first_step_s']:.2f}"))
    isa = _config_value(project, "runtime", "onednn_max_isa")
    other = ms("runtime.onednn_max_isa=null" if isa else "runtime.onednn_max_isa=AVX2")
    label_on, label_off = ("AVX2 (default)", "uncapped") if isa else ("AVX2", "uncapped (default)")
    on, off = (jit, other) if isa else (other, jit)
    rows.append((f"oneDNN {label_on} ms/step", f"{on['ms_per_step']:.1f}"))
    rows.append((f"oneDNN {label_off} ms/step", f"{off['ms_per_step']:.1f}"))
    if jit.get("flops_per_step"):
        peak = _matmul_peak_gflops()
        achieved = jit["flops_per_step"] / (jit["ms_per_step"] / 1000) / 1e9
        share = f"{achieved:.1f} ({achieved / peak:.0%} of {peak:.0f})"
        rows.append(("model GFLOP/s (share of matmul peak)", share))
    if task == "recommender":  # dense tables + Adam vs sparse tables + lazy Adam as they grow
        for rows_ in (100_000, 1_000_000):
            dense = ms(f"data.hash_buckets={rows_}")
            sparse = ms(f"data.hash_buckets={rows_}", "model.sparse=true", "optim.name=lazy_adam")
            rows.append(
                (
                    f"{rows_:,} rows per table: dense / sparse ms/step",
                    f"{dense['ms_per_step']:.1f} / {sparse['ms_per_step']:.1f}",
                )
            )
    rss, wall = peak_rss_mb(project)
    rows.append(("default training: wall s / peak RSS MB", f"{wall:.1f} / {rss:.0f}"))
    for compile_ in (False, True) if task in TORCH_PEERS else ():
        peer = torch_peer(task, project, compile_, steps)
        name = "PyTorch " + ("torch.compile" if compile_ else "eager")
        if "error" in peer:
            rows.append((f"{name} / ours", peer["error"][:70]))
        else:
            rows.append((f"{name} ms/step", f"{peer['ms_per_step']:.1f}"))
            ratio = peer["ms_per_step"] / jit["ms_per_step"]
            rows.append((f"{name} / ours (>1: ours faster)", f"{ratio:.2f}"))
            if fast_conv:
                ratio = peer["ms_per_step"] / fast_conv["ms_per_step"]
                rows.append((f"{name} / ours with fast_conv true", f"{ratio:.2f}"))
    return rows


def _config_value(project: Path, section: str, key: str):
    import yaml

    return yaml.safe_load((project / "config" / "config.yaml").read_text())[section][key]


def _matmul_peak_gflops(n: int = 2048, repeats: int = 5) -> float:
    """This machine's fp32 matmul rate: the best of NumPy's BLAS and PyTorch's (when importable).
    NumPy's OpenBLAS wheel runs AVX2 kernels here (≈ 36 GFLOP/s on 2 cores), PyTorch's AVX-512
    ones ≈ 250: the lower figure would make every model look faster than the machine's peak."""
    import numpy as np

    def rate(matmul, a) -> float:
        matmul(a, a)
        start = time.perf_counter()
        for _ in range(repeats):
            matmul(a, a)
        return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e9

    best = rate(np.matmul, np.random.rand(n, n).astype(np.float32))
    try:
        import torch
    except ImportError:
        return best
    return max(best, rate(torch.matmul, torch.rand(n, n)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", action="append", choices=TASKS)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.task or TASKS:
            try:
                rows = bench_task(task, Path(tmp), args.steps)
            except subprocess.CalledProcessError:
                print(f"\n## {task}: not available in this template version")
                continue
            print(f"\n## {task}\n\n| measure | value |\n|---|---|")
            for name, value in rows:
                print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
