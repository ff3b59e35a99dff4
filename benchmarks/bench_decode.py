"""Text generation speed of the nlp project's LM: tokens/s with the key/value cache vs without.

    python benchmarks/bench_decode.py [--tokens 256] [--repeats 3]

Generates the nlp project from this checkout, then in one process (inside the project) builds
two random-weight LMs: the project's default (gpt, 2 layers, d=128, context 64, a ~100-token
character vocabulary) and a GPT-2-shaped one (gpt2, 4 layers, d=256, context 128, 8k vocabulary).
For each it decodes ``--tokens`` greedy tokens from a 16-token prompt with the cached decoder
(prefill + one-position steps) and with the uncached one (the whole window per token), the two
interleaved ``--repeats`` times after a warm-up that compiles both; it prints the medians side
by side. Both decoders use the same windows (generate.py), so they produce the same tokens,
which is checked. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from render import render

SHAPES = {  # name: (arch, vocab, block_size, n_layer, n_head, d_model)
    "default gpt 2x128, ctx 64, vocab 100": ("gpt", 100, 64, 2, 4, 128),
    "gpt2-shaped 4x256, ctx 128, vocab 8k": ("gpt2", 8192, 128, 4, 4, 256),
}


def decode(decoder, prompt: list[int], tokens: int) -> tuple[list[int], float]:
    ids = list(prompt)
    start = time.perf_counter()
    for _ in range(tokens):
        ids.append(int(decoder(ids).argmax()))
    return ids[len(prompt) :], time.perf_counter() - start


def inner(package: str, tokens: int, repeats: int) -> None:
    import mindspore as ms
    import numpy as np

    sys.path.insert(0, ".")
    model = importlib.import_module(f"{package}.tasks.nlp.models.gpt")
    generate = importlib.import_module(f"{package}.tasks.nlp.generate")
    print(f"{'model':<40} {'cached tok/s':>12} {'uncached tok/s':>15} {'speed-up':>9}")
    for name, (arch, vocab, block, n_layer, n_head, d_model) in SHAPES.items():
        ms.set_seed(0)
        network = model.GPT(vocab, block, n_layer, n_head, d_model, bias=arch == "gpt2")
        network.set_train(False)
        prompt = np.random.default_rng(0).integers(0, vocab, size=16).tolist()
        decoders = {
            "cached": generate.CachedDecoder(network, block),
            "uncached": generate.WindowDecoder(network, block),
        }
        for decoder in decoders.values():  # warm-up: compiles prefill, step and the full forward
            decode(decoder, prompt, block + 2)
        seconds: dict[str, list[float]] = {key: [] for key in decoders}
        outputs = {}
        for _ in range(repeats):  # interleaved: drift hits both alike
            for key, decoder in decoders.items():
                outputs[key], elapsed = decode(type(decoder)(network, block), prompt, tokens)
                seconds[key].append(elapsed)
        same = "same tokens" if outputs["cached"] == outputs["uncached"] else "TOKENS DIFFER"
        rate = {key: tokens / statistics.median(values) for key, values in seconds.items()}
        print(
            f"{name:<40} {rate['cached']:12.0f} {rate['uncached']:15.0f}"
            f" {rate['cached'] / rate['uncached']:8.1f}x  ({same})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--inner", help=argparse.SUPPRESS)  # the package name, inside the project
    args = parser.parse_args()
    if args.inner:
        return inner(args.inner, args.tokens, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "bench-decode"
        render(project, "nlp")
        subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--inner",
                "bench_decode",
                "--tokens",
                str(args.tokens),
                "--repeats",
                str(args.repeats),
            ],
            cwd=project,
            check=True,
        )


if __name__ == "__main__":
    main()
