"""A GPT-2-shaped language model's training step, MindSpore vs PyTorch, side by side.

    python benchmarks/bench_lm.py [--steps 20]

Generates an nlp project from this checkout (committed HEAD), sets it to GPT-2's layout at a
size this CPU trains (4 layers, d_model 256, 4 heads, context 128, batch 16, a byte-level BPE
of 8,192 tokens trained on the default text), and times one optimizer step, each in a fresh
process: the project's jit step, and the same network in PyTorch eager and ``torch.compile``
(``torch_peers.py``, reading the same config). Model FLOP/s are shown as a share of this
machine's fp32 matmul peak. Generation tokens/s with and without the key/value cache:
``bench_decode.py``. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import yaml
from bench_train import _matmul_peak_gflops, generate, measure, torch_peer

GPT2_SMALL = {
    "model": {"arch": "gpt2", "bias": True, "n_layer": 4, "d_model": 256, "n_head": 4, "block_size": 128},
    "train": {"batch_size": 16},
    "data": {"tokenizer": "bpe", "vocab_size": 8192},
}


def configure(project: Path) -> None:
    """Write the GPT-2-shaped settings into config.yaml (the PyTorch peer reads that file)."""
    file = project / "config" / "config.yaml"
    config = yaml.safe_load(file.read_text())
    for section, values in GPT2_SMALL.items():
        config[section].update(values)
    file.write_text(yaml.safe_dump(config, sort_keys=False))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (measure below ~1.5), {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        project, package = generate("nlp", Path(tmp))
        configure(project)
        ours = measure(project, package, "output.plot=false", f"output.dir={tmp}/runs", steps=args.steps)
        eager, compiled = (torch_peer("nlp", project, c, args.steps) for c in (False, True))
    peak = _matmul_peak_gflops()
    flops = ours.get("flops_per_step")
    print(
        f"gpt2-shaped LM {GPT2_SMALL}; {flops / 1e9 if flops else float('nan'):.1f} GFLOP/step; "
        f"matmul peak {peak:.0f} GFLOP/s"
    )
    print(f"{'':<26}{'ms/step':>10}{'GFLOP/s':>10}{'of peak':>9}{'its ms / ours':>15} (>1: ours faster)")
    runs = (("MindSpore 2.10 jit", ours), ("PyTorch eager", eager), ("PyTorch torch.compile", compiled))
    for name, result in runs:
        if "error" in result:
            print(f"{name:<26}{result['error'][:70]}")
            continue
        ms_step = result["ms_per_step"]
        rate = flops / (ms_step / 1000) / 1e9 if flops else float("nan")
        ratio = ms_step / ours["ms_per_step"]
        print(f"{name:<26}{ms_step:>10.1f}{rate:>10.1f}{rate / peak:>9.0%}{ratio:>15.2f}")


if __name__ == "__main__":
    main()
