"""One convolution's forward + backward on CPU: MindSpore's own kernels vs ``FastConv2d``, per shape.

    python benchmarks/bench_conv.py [--reps 10] [--shapes resnet|all]

For each shape (batch, C_in -> C_out, input H=W, kernel, stride, padding) it times, in one
process and interleaved, ``ms.jit(ms.value_and_grad(...))`` of ``sum(conv(x) * g)`` with respect
to the input and the weight for: ``nn.Conv2d`` (stock), ``FastConv2d`` with the weight gradient
as a forward convolution (forced at every size), the same plus the input gradient as a forward
convolution of dy with the flipped kernel (stride 1 only), and what ``FastConv2d``'s rule picks.
PyTorch's fwd+bwd of the same shape runs in a subprocess (2 threads). oneDNN capped at AVX2 as
the vision config ships. Not a test: it prints a table (median ms).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
HERE = Path(__file__).resolve().parent
FAST_CONV = HERE.parent / "template" / "{{package_name}}" / "tasks" / "vision" / "fast_conv.py"

# (batch, C_in, C_out, H, kernel, stride, padding, where it occurs)
SHAPES = [
    (32, 64, 64, 32, 3, 1, 1, "DESIGN §8"),
    (32, 64, 128, 32, 3, 2, 1, "DESIGN §8"),
    (32, 3, 64, 64, 7, 2, 3, "resnet stem at 64²"),
    (32, 64, 128, 32, 1, 2, 0, "DESIGN §8 1x1 downsample"),
    (32, 256, 512, 8, 3, 2, 1, "DESIGN §8"),
    (32, 64, 64, 16, 3, 1, 1, "resnet18 layer1 at 64²"),
    (32, 64, 128, 16, 3, 2, 1, "resnet18 layer2.0 at 64²"),
    (32, 64, 128, 16, 1, 2, 0, "resnet18 downsample at 64²"),
    (32, 128, 128, 8, 3, 1, 1, "resnet18 layer2 at 64²"),
    (32, 256, 256, 4, 3, 1, 1, "resnet18 layer3 at 64²"),
    (64, 32, 32, 8, 3, 1, 1, "small_cnn at 8²"),
    (64, 32, 64, 8, 3, 2, 1, "small_cnn at 8²"),
]


def load_fast_conv():
    spec = importlib.util.spec_from_file_location("fast_conv", FAST_CONV)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fast_conv"] = module  # jit parses functions by importing their module
    spec.loader.exec_module(module)
    return module


def timed(fn, reps: int) -> float:
    fn()
    fn()
    times = []
    for _ in range(reps):
        tick = time.perf_counter()
        fn()
        times.append(time.perf_counter() - tick)
    return 1000 * statistics.median(times)


def interleaved(fns: dict, reps: int) -> dict[str, float]:
    """Median ms of each function, called round-robin so that load from elsewhere hits all alike."""
    for fn in fns.values():
        fn()
        fn()
    times = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            tick = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - tick)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def mindspore_rows(reps: int, shapes) -> list[dict]:
    import mindspore as ms
    import numpy as np
    from mindspore import Tensor, nn, ops

    fc = load_fast_conv()
    ms.set_device("CPU")

    class DxAsConv(fc._ConvWithFastBackward):
        """Input gradient as a forward convolution of dy with the flipped, transposed kernel
        (stride 1): the alternative to Conv2DBackpropInput the issue asks to measure."""

        def bprop(self, x, w, out, dout):
            _, dw = super().bprop(x, w, out, dout)
            k = self.kernel[0]
            p = self.pad[0][0]
            q = k - 1 - p
            wt = ops.flip(w, (2, 3)).transpose(1, 0, 2, 3)  # (C_in, C_out, k, k)
            dx = ops.Conv2D(w.shape[1], self.kernel, pad_mode="pad", pad=(q, q, q, q))(dout, wt)
            return dx, dw

    rows = []
    rng = np.random.default_rng(0)
    for batch, cin, cout, size, k, s, p, where in shapes:
        x = Tensor(rng.standard_normal((batch, cin, size, size)).astype(np.float32))
        kw = dict(stride=s, pad_mode="pad", padding=p, has_bias=False)
        stock, picked = nn.Conv2d(cin, cout, k, **kw), fc.FastConv2d(cin, cout, k, **kw)
        forced = fc.FastConv2d(cin, cout, k, forward_dw="always", **kw)
        in_cell = fc.FastConv2d(cin, cout, k, forward_dw="never", **kw)
        variants = {
            "stock": stock,
            "stock kernels in this cell": in_cell,
            "forward dW": forced,
            "rule": picked,
        }
        if s == 1:
            dxconv = fc.FastConv2d(cin, cout, k, **kw)
            dxconv.conv2d = DxAsConv(dxconv, "always")
            variants["forward dW + dx"] = dxconv
        g = Tensor(rng.standard_normal(stock(x).shape).astype(np.float32))
        steps = {}
        for name, conv in variants.items():
            conv.weight.set_data(stock.weight.data.copy())

            steps[name] = ms.jit(ms.value_and_grad(weighted_sum(conv, g), 0, conv.trainable_params()))
        fwd = ms.jit(lambda_free_forward(stock))
        ref = [t.asnumpy() for t in steps["stock"](x)[1][1]] + [steps["stock"](x)[1][0].asnumpy()]
        result = {"shape": f"{cin}→{cout}, {size}², k{k} s{s} p{p}, b{batch}", "where": where}
        for name, step in steps.items():
            out = step(x)
            got = [t.asnumpy() for t in out[1][1]] + [out[1][0].asnumpy()]
            result[name + " err"] = max(
                float(np.abs(a - b).max() / (np.abs(a).max() + 1e-12)) for a, b in zip(ref, got, strict=True)
            )
        # a jit call on CPU returns when its graph is done: reading one output times all of it
        calls = {"forward": lambda fwd=fwd, x=x: fwd(x).asnumpy()}
        calls.update({name: lambda step=step, x=x: step(x)[1][0].asnumpy() for name, step in steps.items()})
        result.update(interleaved(calls, reps))
        out_hw = ((size + 2 * p - k) // s + 1,) * 2
        result["rule picks"] = "forward dW" if fc.use_forward_dw(cin, (k, k), out_hw) else "stock"
        rows.append(result)
    return rows


def weighted_sum(conv, g):
    def loss(x):  # a closure, not a default argument: jit parses neither lambdas nor defaults
        return (conv(x) * g).sum()

    return loss


def lambda_free_forward(conv):
    def forward(x):
        return conv(x)

    return forward


def torch_rows(reps: int, shapes) -> list[float]:
    import torch

    torch.set_num_threads(2)
    out = []
    for batch, cin, cout, size, k, s, p, _ in shapes:
        conv = torch.nn.Conv2d(cin, cout, k, stride=s, padding=p, bias=False)
        x = torch.randn(batch, cin, size, size, requires_grad=True)
        g = torch.randn_like(conv(x))

        out.append(timed(torch_step(conv, x, g), reps))
    return out


def torch_step(conv, x, g):
    def step():
        x.grad = conv.weight.grad = None
        (conv(x) * g).sum().backward()

    return step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--torch-peer", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_peer:
        print(json.dumps(torch_rows(args.reps, SHAPES)))
        return
    print(
        f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores, ONEDNN_MAX_CPU_ISA="
        f"{os.environ['ONEDNN_MAX_CPU_ISA']}"
    )
    rows = mindspore_rows(args.reps, SHAPES)
    peer = subprocess.run(
        [sys.executable, __file__, "--torch-peer", "--reps", str(args.reps)], capture_output=True, text=True
    )
    torch_ms = [None] * len(rows)
    if peer.returncode == 0:
        torch_ms = json.loads(peer.stdout.strip().splitlines()[-1])
    print(
        "\n| conv (where) | fwd | stock fwd+bwd | stock kernels in this cell's bprop | dW as fwd conv "
        "| + dx as fwd conv | rule picks: ms | speed-up | PyTorch fwd+bwd |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r, t in zip(rows, torch_ms, strict=True):
        dx = f"{r['forward dW + dx']:.1f}" if "forward dW + dx" in r else "—"
        peer_ms = f"{t:.1f}" if t is not None else "—"
        print(
            f"| {r['shape']} ({r['where']}) | {r['forward']:.1f} | {r['stock']:.1f} "
            f"| {r['stock kernels in this cell']:.1f} | {r['forward dW']:.1f} | {dx} "
            f"| {r['rule picks']}: {r['rule']:.1f} | {r['stock'] / r['rule']:.2f}× | {peer_ms} |"
        )
    worst = max(v for r in rows for k, v in r.items() if k.endswith(" err"))
    print(f"\nlargest relative gradient difference vs stock: {worst:.1e}")


if __name__ == "__main__":
    main()
