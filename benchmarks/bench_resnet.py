"""ResNet-18 (torchvision layout) training step, MindSpore vs PyTorch, side by side.

    python benchmarks/bench_resnet.py [--steps 15] [--batch 32] [--size 64] [--before REF]

Generates a vision project from this checkout and times, each in a fresh process, one
optimizer step (SGD with momentum, fp32, batch 32 of 64x64 RGB by default; median after
warm-up) of: the project's ``model.arch=resnet18`` with its jit step (oneDNN capped at AVX2,
as the vision config ships), with ``model.fast_conv`` false (MindSpore's own convolution
backward) and true (``FastConv2d``), and the same network in PyTorch eager and ``torch.compile``
(the project's own ``reference_resnet.py``); with ``--before REF``, also the project of that git
ref (fast_conv false), for a before/after in one run. It also prints the model FLOPs per step
(2 x multiply-accumulates of every convolution and the head, x3 for forward + backward) as a
share of this machine's fp32 matmul peak (numpy sgemm 2048^2). Not a test: it prints figures.
Measure on a quiet machine: the load average is printed first.
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

from bench_train import _matmul_peak_gflops, generate, measure
from render import render

HERE = Path(__file__).resolve().parent


def torch_step(package: str, compile_: bool, steps: int, batch: int, size: int) -> dict:
    """Runs inside the generated project (cwd): PyTorch's step on the project's reference ResNet."""
    import torch

    sys.path.insert(0, ".")
    reference = __import__(f"{package}.tasks.vision.reference_resnet", fromlist=["ResNet"])
    torch.manual_seed(0)
    model = reference.ResNet("resnet18", num_classes=10, channels=3)
    x, y = torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,))
    macs = []
    hooks = [
        m.register_forward_hook(lambda m, i, o: macs.append(o.numel() * m.weight[0].numel()))
        for m in model.modules()
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))
    ]
    model(x)
    for hook in hooks:
        hook.remove()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if compile_:
        step = torch.compile(step)
    times = []
    for _ in range(5 + steps):
        tick = time.perf_counter()
        step().item()
        times.append(time.perf_counter() - tick)
    return {
        "ms_per_step": 1000 * statistics.median(times[5:]),
        "flops_per_step": 3 * 2 * sum(macs),
        "threads": torch.get_num_threads(),
    }


def peer(project: Path, package: str, compile_: bool, args) -> dict:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--torch-peer",
        package,
        "--steps",
        str(args.steps),
        "--batch",
        str(args.batch),
        "--size",
        str(args.size),
    ] + (["--compile"] if compile_ else [])
    out = subprocess.run(
        cmd,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "PYTHONPATH": str(HERE)},
    )
    if out.returncode:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--before", metavar="REF", help="also measure the project of this git ref")
    p.add_argument("--torch-peer", metavar="PACKAGE", help=argparse.SUPPRESS)
    p.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_peer:
        print(json.dumps(torch_step(args.torch_peer, args.compile, args.steps, args.batch, args.size)))
        return

    print(f"load average {os.getloadavg()[0]:.2f} (measure below ~1.5), {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        project, package = generate("vision", Path(tmp))
        config = [
            "model.arch=resnet18",
            "data.channels=3",
            f"data.image_size={args.size}",
            f"train.batch_size={args.batch}",
            "optim.name=momentum",
            "optim.lr=0.01",
            "optim.schedule=constant",
        ]
        variants = {}
        if args.before:
            (Path(tmp) / "before").mkdir()
            old = render(Path(tmp) / "before" / project.name, "vision", args.before)
            variants[f"MindSpore jit at {args.before}"] = measure(
                old, package, *config, "model.fast_conv=false", steps=args.steps
            )
        for fast in ("false", "true"):
            variants[f"MindSpore jit, fast_conv {fast}"] = measure(
                project, package, *config, f"model.fast_conv={fast}", steps=args.steps
            )
        eager, compiled = (peer(project, package, c, args) for c in (False, True))
    peak = _matmul_peak_gflops()
    flops = eager.get("flops_per_step")
    rows = [("", "ms/step", "GFLOP/s", "share of peak")]
    for name, result in (*variants.items(), ("PyTorch eager", eager), ("PyTorch torch.compile", compiled)):
        if "error" in result:
            rows.append((name, result["error"][:60], "", ""))
            continue
        ms_step = result["ms_per_step"]
        rate = flops / (ms_step / 1000) / 1e9 if flops else float("nan")
        rows.append((name, f"{ms_step:.0f}", f"{rate:.1f}", f"{rate / peak:.0%}"))
    print(
        f"resnet18, batch {args.batch} x 3 x {args.size} x {args.size}, SGD momentum, fp32; "
        f"{flops / 1e9 if flops else float('nan'):.1f} GFLOP/step; matmul peak {peak:.0f} GFLOP/s"
    )
    for row in rows:
        print(f"{row[0]:<40}{row[1]:>10}{row[2]:>10}{row[3]:>15}")
    for name, result in variants.items():
        if "error" not in result and "error" not in eager:
            print(f"PyTorch eager / {name}: {eager['ms_per_step'] / result['ms_per_step']:.2f}")


if __name__ == "__main__":
    main()
