"""Where one ResNet-18 training step's time goes, by op type: MindSpore jit vs PyTorch eager.

    python benchmarks/profile_step.py [--steps 5] [--batch 32] [--size 64]

Generates a vision project from this checkout (as bench_resnet.py does) and, each in a fresh
process inside it: (1) MindSpore: the project's ``model.arch=resnet18`` jit step (SGD momentum,
fp32, oneDNN capped at AVX2 as the vision config ships, ``model.fast_conv`` false) timed plainly,
then the same number of steps under ``mindspore.profiler.profile`` (CPU activity), whose
``cpu_op_type_info_0.csv`` gives each kernel type's time; (2) PyTorch eager on the project's
``reference_resnet.py``, timed plainly and then under ``torch.profiler`` (CPU, self time per
``aten::`` op; ops called inside ``optimizer.step`` / ``zero_grad`` count as the optimizer).
Both group their ops into the same op types and print one Markdown table (ms per step and % of
the profiled step's wall time; MindSpore's CPU kernels may overlap, e.g. dx beside dW, so its
sum can exceed the wall time). Then BatchNorm vs GroupNorm (32 groups) at the ResNet's 20
normalisation layers' shapes, all 20 in one call (one jit graph: MindSpore's launch cost is paid
once, as in the step): forward and forward + backward, interleaved, in both frameworks.
Not a test: it prints figures. The load average is printed first.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_train import generate

HERE = Path(__file__).resolve().parent
CONV_BWD = "conv backward (dx + dW)"
PAD = "Pad (MindSpore's before the max pool)"
ROWS = ["Conv2D forward", "Conv2DBackpropInput", "Conv2DBackpropFilter", CONV_BWD, "BatchNorm fwd",
        "BatchNorm bwd", "ReLU fwd", "ReLU bwd", "MaxPool fwd", "MaxPool bwd", PAD, "Add", "MatMul",
        "optimizer update", "other"]
MS_TYPES = {"Conv2D": "Conv2D forward", "Conv2DBackpropInput": "Conv2DBackpropInput",
            "Conv2DBackpropFilter": "Conv2DBackpropFilter", "BatchNorm": "BatchNorm fwd",
            "BatchNormGrad": "BatchNorm bwd", "ReLU": "ReLU fwd", "ReluGrad": "ReLU bwd",
            "MaxPool": "MaxPool fwd", "MaxPoolGrad": "MaxPool bwd", "Add": "Add", "AddN": "Add",
            "AddExt": "Add", "MatMul": "MatMul", "MatMulExt": "MatMul", "BiasAdd": "MatMul",
            "PadV3": PAD, "PadV3Grad": PAD, "ApplyMomentum": "optimizer update"}
TORCH_OPS = {"aten::mkldnn_convolution": "Conv2D forward", "aten::convolution_backward": CONV_BWD,
             "aten::native_batch_norm": "BatchNorm fwd", "aten::native_batch_norm_backward": "BatchNorm bwd",
             "aten::relu": "ReLU fwd", "aten::clamp_min": "ReLU fwd", "aten::threshold_backward": "ReLU bwd",
             "aten::max_pool2d_with_indices": "MaxPool fwd",
             "aten::max_pool2d_with_indices_backward": "MaxPool bwd", "aten::add": "Add", "aten::add_": "Add",
             "aten::constant_pad_nd": PAD, "aten::addmm": "MatMul", "aten::mm": "MatMul"}


def config(args) -> list[str]:
    return ["model.arch=resnet18", "model.fast_conv=false", "data.channels=3",
            f"data.image_size={args.size}", f"train.batch_size={args.batch}", "optim.name=momentum",
            "optim.lr=0.01", "optim.schedule=constant"]


def norm_shapes(batch: int, size: int) -> list[tuple[tuple[int, int, int, int], int]]:
    """ResNet-18's normalisation inputs (B, C, H, W) and how many layers see each: the stem's bn1,
    then per stage its four block norms (+ the downsample's from stage 2 on)."""
    stages = [((batch, c, size // 2 ** (s + 2), size // 2 ** (s + 2)), 4 + (s > 0)) for s, c in
              enumerate((64, 128, 256, 512))]
    return [((batch, 64, size // 2, size // 2), 1), *stages]


def median_ms(fn, steps: int, warmup: int = 2) -> float:
    times = []
    for i in range(warmup + steps):
        tick = time.perf_counter()
        fn()
        if i >= warmup:
            times.append(time.perf_counter() - tick)
    return 1000 * statistics.median(times)


def interleaved(fns: dict, reps: int = 10, warmup: int = 3) -> dict[str, float]:
    """Median ms of each function, called round-robin so that load from elsewhere hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for i in range(warmup + reps):
        for name, fn in fns.items():
            tick = time.perf_counter()
            fn()
            if i >= warmup:
                times[name].append(time.perf_counter() - tick)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def mindspore_peer(package: str, args) -> dict:
    """Runs inside the generated project: the project's own step, as measure_step.py sets it up."""
    import mindspore as ms
    from mindspore.profiler import ProfilerActivity

    sys.path.insert(0, ".")
    tasks = importlib.import_module(f"{package}.tasks")
    cfg = tasks.load_config("config/config.yaml", ["output.plot=false", *config(args)])
    run = importlib.import_module(f"{package}.engine.loop").setup(cfg, tasks.get_task(cfg.task))
    batches, n = list(run.batches.epoch(0)), iter(range(10**9))

    def step():  # a jit call returns when its graph is done: reading `finite` times all of it
        run.step_fn(batches[next(n) % len(batches)], apply=True)[1].asnumpy()

    plain = median_ms(step, args.steps, warmup=5)
    with tempfile.TemporaryDirectory() as out:
        prof = ms.profiler.profile(
            activities=[ProfilerActivity.CPU],
            schedule=ms.profiler.schedule(wait=0, warmup=0, active=args.steps, repeat=1),
            on_trace_ready=ms.profiler.tensorboard_trace_handler(out))
        times = []
        for _ in range(args.steps):
            tick = time.perf_counter()
            step()
            times.append(time.perf_counter() - tick)
            prof.step()
        prof.stop()
        found = sorted(Path(out).glob("**/FRAMEWORK/cpu_op_type_info_0.csv"))
        if not found:
            raise SystemExit(f"the MindSpore profiler wrote no cpu_op_type_info_0.csv under {out}")
        with open(found[-1]) as f:  # op_type, ..., total_compute_time (ms, all profiled steps)
            ops = {r["op_type"]: float(r["total_compute_time"]) / args.steps for r in csv.DictReader(f)}
    return {"step_ms": plain, "profiled_ms": 1000 * statistics.median(times), "ops": ops,
            "norms": mindspore_norms(args)}


def mindspore_norms(args) -> dict:
    """All 20 norm layers in one jit graph (one per layer, as in the step), so that the per-call
    launch cost (several ms on CPU) is paid once, as in the step, not 20 times."""
    import mindspore as ms
    import numpy as np
    from mindspore import nn

    rng = np.random.default_rng(0)
    shapes = [shape for shape, count in norm_shapes(args.batch, args.size) for _ in range(count)]
    xs = tuple(ms.Tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes)
    gs = tuple(ms.Tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes)

    class Norms(nn.Cell):
        """sum_i (norm_i(x_i) * g_i).sum(): each layer's forward and, under grad, its backward."""

        def __init__(self, layers):
            super().__init__()
            self.layers = layers

        def construct(self, xs):
            loss = 0.0
            for layer, x, g in zip(self.layers, xs, gs):  # noqa: B905 -- jit parses no strict=
                loss = loss + (layer(x) * g).sum()
            return loss

    total = {}
    for kind in ("BatchNorm", "GroupNorm"):
        layers = nn.CellList([nn.BatchNorm2d(s[1]) if kind == "BatchNorm" else nn.GroupNorm(32, s[1])
                              for s in shapes])
        layers.set_train(True)
        net = Norms(layers)
        fwd = ms.jit(forward_of(net))
        both = ms.jit(ms.value_and_grad(forward_of(net), 0, net.trainable_params()))
        total[kind] = interleaved({"fwd": lambda fwd=fwd: fwd(xs).asnumpy(),
                                   "fwd+bwd": lambda both=both: both(xs)[0].asnumpy()})
    return total


def forward_of(cell):
    def forward(x):  # closures: jit parses neither lambdas nor default arguments
        return cell(x)

    return forward


def torch_peer(package: str, args) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    sys.path.insert(0, ".")
    reference = importlib.import_module(f"{package}.tasks.vision.reference_resnet")
    torch.manual_seed(0)
    model = reference.ResNet("resnet18", num_classes=10, channels=3)
    x, y = torch.randn(args.batch, 3, args.size, args.size), torch.randint(0, 10, (args.batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():  # bench_resnet.py's step, the optimizer's calls marked for the grouping below
        with record_function("optimizer"):
            opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        with record_function("optimizer"):
            opt.step()
        return loss.item()

    plain = median_ms(step, args.steps, warmup=5)
    times = []
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            tick = time.perf_counter()
            step()
            times.append(time.perf_counter() - tick)
    ops: dict[str, float] = {}
    for event in prof.events():
        parent, name = event, event.name
        while parent is not None and parent.name != "optimizer":
            parent = parent.cpu_parent
        key = "optimizer: " + name if parent is not None else name
        ops[key] = ops.get(key, 0.0) + event.self_cpu_time_total / 1000 / args.steps
    return {"step_ms": plain, "profiled_ms": 1000 * statistics.median(times), "ops": ops,
            "threads": torch.get_num_threads(), "norms": torch_norms(args)}


def torch_norms(args) -> dict:
    import torch

    shapes = [shape for shape, count in norm_shapes(args.batch, args.size) for _ in range(count)]
    xs = [torch.randn(s, requires_grad=True) for s in shapes]
    gs = [torch.randn(s) for s in shapes]
    total = {}
    for kind in ("BatchNorm", "GroupNorm"):
        layers = torch.nn.ModuleList([torch.nn.BatchNorm2d(s[1]) if kind == "BatchNorm"
                                      else torch.nn.GroupNorm(32, s[1]) for s in shapes])

        def loss(layers=layers):
            return sum((layer(x) * g).sum() for layer, x, g in zip(layers, xs, gs, strict=True))

        def both(layers=layers):
            layers.zero_grad(set_to_none=True)
            for x in xs:
                x.grad = None
            loss(layers).backward()

        def forward(loss=loss):
            with torch.no_grad():
                loss()

        total[kind] = interleaved({"fwd": forward, "fwd+bwd": both})
    return total


def group(ops: dict[str, float], table: dict[str, str]) -> tuple[dict[str, float], dict[str, float]]:
    """Per-step ms by row, and the ops that fell into "other" (for the footnote)."""
    rows, other = dict.fromkeys(ROWS, 0.0), {}
    for name, value in ops.items():
        row = "optimizer update" if name.startswith("optimizer: ") else table.get(name, "other")
        rows[row] += value
        if row == "other":
            other[name] = value
    return rows, other


def peer(project: Path, package: str, flag: str, args) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), flag, package, "--steps", str(args.steps),
           "--batch", str(args.batch), "--size", str(args.size)]
    out = subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=1800,
                         env={**os.environ, "PYTHONPATH": str(HERE)})
    if out.returncode:
        raise SystemExit(f"{flag} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--ms-peer", metavar="PACKAGE", help=argparse.SUPPRESS)
    p.add_argument("--torch-peer", metavar="PACKAGE", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.ms_peer or args.torch_peer:
        fn, package = (mindspore_peer, args.ms_peer) if args.ms_peer else (torch_peer, args.torch_peer)
        print(json.dumps(fn(package, args)))
        return

    print(f"load average {' / '.join(f'{v:.2f}' for v in os.getloadavg())}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        project, package = generate("vision", Path(tmp))
        mind = peer(project, package, "--ms-peer", args)
        torch_ = peer(project, package, "--torch-peer", args)
    ms_rows, ms_other = group(mind["ops"], MS_TYPES)
    ms_rows[CONV_BWD] = ms_rows["Conv2DBackpropInput"] + ms_rows["Conv2DBackpropFilter"]
    pt_rows, pt_other = group(torch_["ops"], TORCH_OPS)
    print(f"\nresnet18, batch {args.batch} x 3 x {args.size}², SGD momentum, fp32; {args.steps} profiled "
          f"steps after warm-up; PyTorch {torch_['threads']} threads\n")
    print("| op type | MindSpore jit ms (%) | PyTorch eager ms (%) |\n|---|---|---|")
    for row in ROWS:
        pt = "(in the row below)" if row in ("Conv2DBackpropInput", "Conv2DBackpropFilter") else (
            f"{pt_rows[row]:.1f} ({pt_rows[row] / torch_['profiled_ms']:.0%})")
        print(f"| {row} | {ms_rows[row]:.1f} ({ms_rows[row] / mind['profiled_ms']:.0%}) | {pt} |")
    ms_sum = sum(v for k, v in ms_rows.items() if k != CONV_BWD)
    pt_sum = sum(pt_rows.values())
    print(f"| sum of op times | {ms_sum:.1f} ({ms_sum / mind['profiled_ms']:.0%}) "
          f"| {pt_sum:.1f} ({pt_sum / torch_['profiled_ms']:.0%}) |")
    print(f"| whole step, profiled (median) | {mind['profiled_ms']:.1f} | {torch_['profiled_ms']:.1f} |")
    print(f"| whole step, no profiler (median) | {mind['step_ms']:.1f} | {torch_['step_ms']:.1f} |")
    for name, other in (("MindSpore", ms_other), ("PyTorch", pt_other)):
        top = sorted(other.items(), key=lambda kv: -kv[1])[:6]
        print(f"\n{name} 'other', largest: " + ", ".join(f"{k} {v:.1f}" for k, v in top))
    print(f"\nPyTorch eager / MindSpore jit, whole step: {torch_['step_ms'] / mind['step_ms']:.2f}")
    print("\nnormalisation at ResNet-18's 20 norm layers' shapes, ms per step "
          "(fwd | fwd+bwd | bwd = difference):")
    for kind in ("BatchNorm", "GroupNorm"):
        line = []
        for name, result in (("MindSpore", mind), ("PyTorch", torch_)):
            f, b = result["norms"][kind]["fwd"], result["norms"][kind]["fwd+bwd"]
            line.append(f"{name} {f:.1f} | {b:.1f} | {b - f:.1f}")
        print(f"- {kind}{' (32 groups)' if kind == 'GroupNorm' else ''}: " + "; ".join(line))


if __name__ == "__main__":
    main()
