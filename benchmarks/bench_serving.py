"""Serving latency, side by side in one run (not a test): each task's default exported networks
through onnxruntime (what ``predict`` runs), the MINDIR graph (``nn.GraphCell``) and the
compiled MindSpore network, at batch 1 and 64.

    python benchmarks/bench_serving.py                 # every task, 2 training steps each
    python benchmarks/bench_serving.py --tasks vision --repeats 200

For each task a project is rendered from this checkout (HEAD), trained for ``--steps`` steps and
exported (``--format mindir,onnx``: a dynamic batch); then, in one process, every network is
timed: the median of ``--repeats`` calls after 5 warm-up calls, on the same input rows.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from render import render

TIMER = """
import json, os, statistics, sys, time
import yaml
isa = yaml.safe_load(open("config/config.yaml"))["runtime"].get("onednn_max_isa")
if isa:  # as the project's own entry points do, before MindSpore is imported (its conv models: AVX2)
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", isa)
import mindspore as ms
import numpy as np
import onnxruntime
from mindspore import Tensor, nn
from {package}.deploy.inference import load_trained

checkpoint, out, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
trained = load_trained(checkpoint)
networks = trained.task.exports(trained.network, trained.meta, trained.cfg)


def median_ms(call, *args):
    for _ in range(5):
        call(*args)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call(*args)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


rows = []
for name, (cell, inputs) in networks.items():
    cell.set_train(False)
    session = onnxruntime.InferenceSession(f"{{out}}/{{name}}.onnx", providers=["CPUExecutionProvider"])
    graph = nn.GraphCell(ms.load(f"{{out}}/{{name}}.mindir"))
    ms.set_context(mode=ms.GRAPH_MODE)
    for batch in (1, 64):
        arrays = [np.resize(x.asnumpy(), (batch, *x.shape[1:])) for x in inputs]
        feed = dict(zip((i.name for i in session.get_inputs()), arrays))
        tensors = [Tensor(a) for a in arrays]
        rows.append({{"network": name, "batch": batch,
                     "onnxruntime": median_ms(session.run, None, feed),
                     "mindir": median_ms(lambda: graph(*tensors).asnumpy()),
                     "mindspore": median_ms(lambda: cell(*tensors).asnumpy())}})
    ms.set_context(mode=ms.PYNATIVE_MODE)
print(json.dumps(rows))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=["vision", "nlp", "recommender", "multimodal"])
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--repeats", type=int, default=50)
    args = p.parse_args()
    flags = " ".join(
        sorted({f for f in Path("/proc/cpuinfo").read_text().split() if f in ("avx2", "avx512f")})
    )
    print(f"CPU flags: {flags or 'neither avx2 nor avx512f'}; median ms per call, {args.repeats} calls")
    print("| task | network | batch | onnxruntime | MINDIR (GraphCell) | MindSpore (graph mode) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks:
            project = render(Path(tmp) / f"serve_{task}", task)
            run = [
                sys.executable,
                "train.py",
                "--set",
                f"train.max_steps={args.steps}",
                "--set",
                "output.dir=runs",
                "--set",
                "output.name=bench",
                "--set",
                "output.plot=false",
            ]
            subprocess.run(run, cwd=project, check=True, capture_output=True)
            subprocess.run(
                [
                    sys.executable,
                    "export.py",
                    "--checkpoint",
                    "runs/bench/best.ckpt",
                    "--format",
                    "mindir,onnx",
                    "--out",
                    "export",
                ],
                cwd=project,
                check=True,
                capture_output=True,
            )
            timed = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    TIMER.format(package=project.name),
                    "runs/bench/best.ckpt",
                    "export",
                    str(args.repeats),
                ],
                cwd=project,
                check=True,
                capture_output=True,
                text=True,
            )
            for row in json.loads(timed.stdout.strip().splitlines()[-1]):
                print(
                    f"| {task} | {row['network']} | {row['batch']} | {row['onnxruntime']:.3f} | "
                    f"{row['mindir']:.3f} | {row['mindspore']:.3f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
