"""The generated models written in PyTorch, timed the same way (median ms per optimizer step).

    python torch_peers.py vision [--compile] [--steps N]

Run by bench_train.py inside a generated project (reads its config/config.yaml for sizes).
PyTorch is a benchmark-only peer: `pip install torch==2.13.0` in the benchmark environment,
never a dependency of msscaffold or of the generated projects.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import yaml
from torch import nn


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        gn = lambda c: nn.GroupNorm(min(8, c), c)  # noqa: E731
        self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), gn(cout), nn.ReLU(),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False), gn(cout))
        self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), gn(cout))

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


def vision(cfg: dict):
    widths, blocks = cfg["model"]["widths"], cfg["model"]["blocks_per_stage"]
    layers = [nn.Conv2d(cfg["data"]["channels"], widths[0], 3, 1, 1, bias=False),
              nn.GroupNorm(min(8, widths[0]), widths[0]), nn.ReLU()]
    cin = widths[0]
    for stage, width in enumerate(widths):
        for block in range(blocks):
            layers.append(Block(cin, width, 2 if stage > 0 and block == 0 else 1))
            cin = width
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10))
    b, size = cfg["train"]["batch_size"], cfg["data"]["image_size"]
    x = torch.randn(b, cfg["data"]["channels"], size, size)
    y = torch.randint(0, 10, (b,))
    return model, (x, y), nn.functional.cross_entropy


PEERS = {"vision": vision}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("task", choices=sorted(PEERS))
    p.add_argument("--compile", action="store_true")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    cfg = yaml.safe_load(open("config/config.yaml"))
    torch.manual_seed(0)
    model, (x, y), loss_fn = PEERS[args.task](cfg)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if args.compile:
        step = torch.compile(step)
    times = []
    for _ in range(args.warmup + args.steps):
        tick = time.perf_counter()
        step().item()
        times.append(time.perf_counter() - tick)
    median = statistics.median(times[args.warmup:])
    print(json.dumps({"ms_per_step": 1000 * median, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
