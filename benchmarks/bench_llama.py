"""A ~100 M-parameter Llama-layout LM: full fine-tuning and LoRA (rank 8 on q/v), MindSpore vs
PyTorch eager (transformers, + PEFT for LoRA), on chat rows (the loss on the assistant's tokens:
the second half of each row, as ``data.format: chat`` masks them).

    python benchmarks/bench_llama.py [--steps 4]

Generates an nlp project from this checkout's working tree, builds a random ``model.arch:
llama`` network of 12 layers x 768 (12 heads, 4 key/value heads, MLP 2048, vocabulary 32,000,
tied head: ~100 M parameters) and times its optimizer step (AdamW, batch 2 x 128 tokens)
with the project's own jit step, each case in a fresh process so peak RSS is its own: full
fine-tuning, LoRA rank 8 on q_proj/v_proj, and transformers' ``LlamaForCausalLM`` of the same
shapes in PyTorch eager (full fine-tuning, and LoRA through PEFT; torch.optim.AdamW), gradient
clipping at 1.0 in all; both MindSpore cases also eagerly (``train.jit: false``: the
difference is what the compiled graph keeps beyond the eager step's tensors). Also:
optimizer-state bytes, the RSS before the first step (runtime, network, optimizer) and what the
steps add to it, and tokens/s of cached generation (``generate.CachedDecoder``). Not a test: it
prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPE = {
    "n_layer": 12,
    "d_model": 768,
    "n_head": 12,
    "n_kv_head": 4,
    "d_ff": 2048,
    "vocab": 32000,
    "block_size": 128,
    "batch": 2,
}
ROOT = Path(__file__).resolve().parents[1]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def mindspore_case(project: Path, lora: bool, steps: int, jit: bool = True) -> dict:
    sys.path.insert(0, str(project))
    import mindspore as ms
    import numpy as np
    from nlp.engine import distributed, runtime
    from nlp.engine.optim import build_optimizer, lr_schedule
    from nlp.engine.step import build_train_step
    from nlp.engine.task import Comm, Model
    from nlp.tasks import load_config
    from nlp.tasks.nlp.generate import CachedDecoder
    from nlp.tasks.nlp.loss import LanguageModelLoss
    from nlp.tasks.nlp.models import lora as adapters
    from nlp.tasks.nlp.models.decoder import FLOAT32_CELLS
    from nlp.tasks.nlp.task import ARCHS

    s = SHAPE
    sets = [
        "model.arch=llama",
        f"model.n_layer={s['n_layer']}",
        f"model.d_model={s['d_model']}",
        f"model.n_head={s['n_head']}",
        f"model.n_kv_head={s['n_kv_head']}",
        f"model.d_ff={s['d_ff']}",
        f"model.block_size={s['block_size']}",
        "model.tie_embeddings=true",
        f"train.batch_size={s['batch']}",
        "output.plot=false",
    ]
    if lora:
        sets.append("model.lora.rank=8")
    if not jit:
        sets.append("train.jit=false")
    cfg = load_config(str(project / "config" / "config.yaml"), sets)
    runtime.setup(cfg)
    network = ARCHS["llama"](s["vocab"], cfg.model)  # as build_model, without a 32,000-token tokenizer
    if lora:
        adapters.freeze_base(network)
    model = Model(network=network, loss=LanguageModelLoss(network, summed=True), float32_cells=FLOAT32_CELLS)
    params = sum(p.size for p in model.network.get_parameters())
    optimizer = build_optimizer(
        cfg.optim, model.network.trainable_params(), lr_schedule(cfg.optim, steps + 2)
    )
    step = build_train_step(
        model, optimizer, distributed.grad_reducer(optimizer.parameters, Comm()), cfg.train
    )
    own = {id(p) for p in model.network.get_parameters()}
    state_bytes = sum(
        p.nbytes for p in optimizer.get_parameters() if id(p) not in own and p.name != "learning_rate"
    )
    tokens = (
        np.random.default_rng(0).integers(0, s["vocab"], (s["batch"], s["block_size"] + 1)).astype(np.int32)
    )
    mask = np.zeros((s["batch"], s["block_size"]), np.float32)
    mask[:, s["block_size"] // 2:] = 1  # the assistant's half of each chat row
    batch = (ms.Tensor(tokens), ms.Tensor(mask))
    before = peak_rss_mb()  # the runtime, the network and the optimizer, before any step
    start = time.perf_counter()
    step(batch, apply=True)[1].asnumpy()
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step(batch, apply=True)[1].asnumpy()
        times.append(time.perf_counter() - start)
    result = {
        "params": params,
        "trainable": sum(p.size for p in optimizer.parameters),
        "optimizer_state_mb": state_bytes / 2**20,
        "ms_per_step": 1000 * sorted(times)[len(times) // 2],
        "compile_s": compile_s,
        "peak_rss_mb": peak_rss_mb(),
        "before_step_mb": before,
    }
    if not lora and jit:  # cached generation: 64 new tokens after an 8-token prompt
        model.network.set_train(False)
        decode, ids = CachedDecoder(model.network, s["block_size"]), tokens[0, :8].tolist()
        decode(ids)
        ids.append(1)
        decode(ids)  # both graphs compiled
        start = time.perf_counter()
        for _ in range(64):
            ids.append(int(decode(ids).argmax()))
        result["cached_tokens_per_s"] = 64 / (time.perf_counter() - start)
    return result


def torch_case(steps: int, lora: bool = False) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    s = SHAPE
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=s["vocab"],
        hidden_size=s["d_model"],
        intermediate_size=s["d_ff"],
        num_hidden_layers=s["n_layer"],
        num_attention_heads=s["n_head"],
        num_key_value_heads=s["n_kv_head"],
        max_position_embeddings=s["block_size"],
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config).train()
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=3e-4, weight_decay=0.1)
    tokens = torch.randint(0, s["vocab"], (s["batch"], s["block_size"] + 1))
    targets = tokens[:, 1:].clone()
    targets[:, : s["block_size"] // 2] = -100  # the prompt's half: no loss (as the MindSpore cases)

    def step():
        logits = model(tokens[:, :-1]).logits
        losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        loss = losses.sum() / (targets != -100).sum()  # the mean over target tokens, as ours (loss.normalize)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    before = peak_rss_mb()
    step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    state = sum(
        t.numel() * t.element_size()
        for st in optimizer.state.values()
        for t in st.values()
        if torch.is_tensor(t)
    )
    result = {
        "params": sum(p.numel() for p in model.parameters()),
        "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "optimizer_state_mb": state / 2**20,
        "ms_per_step": 1000 * sorted(times)[len(times) // 2],
        "peak_rss_mb": peak_rss_mb(),
        "before_step_mb": before,
        "threads": torch.get_num_threads(),
    }
    if not lora:  # transformers' generate with its KV cache: 64 greedy tokens after the same 8-token prompt
        model.eval()
        prompt = tokens[:1, :8]
        with torch.no_grad():
            model.generate(prompt, max_new_tokens=2, do_sample=False)  # warm-up
            start = time.perf_counter()
            model.generate(prompt, max_new_tokens=64, min_new_tokens=64, do_sample=False)
        result["cached_tokens_per_s"] = 64 / (time.perf_counter() - start)
    return result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    cases = ["full", "full_eager", "lora", "lora_eager", "torch", "torch_lora"]
    p.add_argument("--case", choices=cases, help=argparse.SUPPRESS)
    p.add_argument("--project", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.case:  # a worker process: one case, its figures as JSON on the last line
        if args.case.startswith("torch"):
            result = torch_case(args.steps, args.case == "torch_lora")
        else:
            lora, jit = args.case.startswith("lora"), not args.case.endswith("_eager")
            result = mindspore_case(Path(args.project), lora, args.steps, jit)
        print(json.dumps(result))
        return
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores; shapes {SHAPE}")
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, str(ROOT / "tests"))
        from helpers import generate

        project = generate(Path(tmp), "nlp", name="nlp", git=False)
        results = {}
        for case in ("full", "full_eager", "torch", "lora", "lora_eager", "torch_lora"):
            run = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--case",
                    case,
                    "--project",
                    str(project),
                    "--steps",
                    str(args.steps),
                ],
                capture_output=True,
                text=True,
                cwd=project,
            )
            lines = run.stdout.strip().splitlines()
            results[case] = (
                json.loads(lines[-1]) if run.returncode == 0 and lines else {"error": run.stderr[-300:]}
            )
    print(
        f"{'':<30}{'params':>8}{'trainable':>11}{'opt state':>11}{'ms/step':>9}{'peak RSS':>10}"
        f"{'torch ms/ours':>14}{'RSS/torch':>10}{'before step':>13}{'step adds':>11}"
    )
    names = {
        "full": "MindSpore full fine-tune",
        "full_eager": "  the same, train.jit=false",
        "torch": "PyTorch eager full",
        "lora": "MindSpore LoRA r8 q,v",
        "lora_eager": "  the same, train.jit=false",
        "torch_lora": "PyTorch + PEFT LoRA r8 q,v",
    }
    for case, r in results.items():
        peer = results["torch_lora" if "lora" in case else "torch"]  # the same kind of fine-tuning
        if "error" in r:
            print(f"{names[case]:<30}{r['error']}")
            continue
        print(
            f"{names[case]:<30}{r['params'] / 1e6:>7.1f}M{r['trainable'] / 1e6:>10.2f}M"
            f"{r['optimizer_state_mb']:>9.0f}MB{r['ms_per_step']:>9.0f}{r['peak_rss_mb']:>8.0f}MB"
            f"{peer.get('ms_per_step', float('nan')) / r['ms_per_step']:>14.2f}"
            f"{r['peak_rss_mb'] / peer.get('peak_rss_mb', float('nan')):>10.2f}"
            f"{r['before_step_mb']:>11.0f}MB{r['peak_rss_mb'] - r['before_step_mb']:>9.0f}MB"
        )
    full, peer = results["full"], results["torch"]
    if "cached_tokens_per_s" in full and "cached_tokens_per_s" in peer:
        ours, theirs = full["cached_tokens_per_s"], peer["cached_tokens_per_s"]
        print(
            f"cached greedy generation, batch 1, 64 tokens after 8: MindSpore {ours:.1f} tokens/s, "
            f"transformers generate {theirs:.1f} tokens/s (ours / transformers {ours / theirs:.2f}); "
            f"first jit step {full['compile_s']:.0f} s"
        )


if __name__ == "__main__":
    main()
