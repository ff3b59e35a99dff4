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
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
            gn(cout),
            nn.ReLU(),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
            gn(cout),
        )
        self.shortcut = (
            nn.Identity()
            if stride == 1 and cin == cout
            else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), gn(cout))
        )

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


def vision(cfg: dict):
    widths, blocks = cfg["model"]["widths"], cfg["model"]["blocks_per_stage"]
    layers = [
        nn.Conv2d(cfg["data"]["channels"], widths[0], 3, 1, 1, bias=False),
        nn.GroupNorm(min(8, widths[0]), widths[0]),
        nn.ReLU(),
    ]
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


class LMBlock(nn.Module):
    """Pre-LayerNorm block with causal self-attention written out, as the nlp task's model.py."""

    def __init__(self, d: int, heads: int, ratio: int, bias: bool):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=bias), nn.Linear(d, d, bias=bias)
        hidden = ratio * d
        self.mlp = nn.Sequential(
            nn.Linear(d, hidden, bias=bias), nn.GELU(approximate="tanh"), nn.Linear(hidden, d, bias=bias)
        )

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / (c // self.heads) ** 0.5
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        x = x + self.proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class LM(nn.Module):
    def __init__(self, vocab: int, m: dict):
        super().__init__()
        d = m["d_model"]
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(m["block_size"], d))
        blocks = [LMBlock(d, m["n_head"], m["mlp_ratio"], m["bias"]) for _ in range(m["n_layer"])]
        self.blocks = nn.Sequential(*blocks)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        if m["tie_embeddings"]:
            self.head.weight = self.tok.weight

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos[: tokens.shape[1]]
        return self.head(self.ln(self.blocks(x)))


def nlp(cfg: dict):
    # The pydoc text has ~100 characters; a BPE vocabulary has data.vocab_size tokens.
    vocab = cfg["data"]["vocab_size"] if cfg["data"].get("tokenizer") == "bpe" else 100
    m, b = cfg["model"], cfg["train"]["batch_size"]
    tokens = torch.randint(0, vocab, (b, m["block_size"] + 1))

    def loss_fn(logits, targets):
        return nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    return LM(vocab, m), (tokens[:, :-1], tokens[:, 1:]), loss_fn


PEERS = {"vision": vision, "nlp": nlp}


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
    optim = cfg["optim"]
    # The project's optimizer and clipping (AdamW decays matrices and embeddings only).
    params = list(model.parameters())
    if optim["name"] == "adamw":
        groups = [
            {"params": [p for p in params if p.ndim >= 2], "weight_decay": optim["weight_decay"]},
            {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
        ]
        opt = torch.optim.AdamW(groups, lr=optim["lr"])
    else:
        opt = torch.optim.Adam(params, lr=1e-3)
    clip = cfg["train"]["grad_clip"]

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        return loss

    if args.compile:
        step = torch.compile(step)
    times = []
    for _ in range(args.warmup + args.steps):
        tick = time.perf_counter()
        step().item()
        times.append(time.perf_counter() - tick)
    median = statistics.median(times[args.warmup :])
    print(json.dumps({"ms_per_step": 1000 * median, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
