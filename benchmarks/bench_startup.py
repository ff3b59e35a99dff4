"""Peak RSS per rank of a 2-rank msrun start of the ~100 M llama with LoRA, at two template refs.

    python benchmarks/bench_startup.py [--before c182131] [--after HEAD] [--pretrained]

Renders an nlp project at each ref (``render.py``) and runs ``scripts/run_distributed.sh 2``
with the 100 M shape of ``bench_llama.py`` (llama, 12 layers x 768, 12 heads, 4 key/value heads,
MLP 2048, 32,000 embedding rows, tied head: 100.1 M parameters) and LoRA rank 8 on q/v, batch 2
x 128 tokens, 2 optimizer steps. A callback written into the project reads each rank's
``VmHWM`` (peak RSS) at ``on_train_begin`` (the end of start-up: data, model, the copy from rank 0,
optimizer, the warm start) and at ``on_train_end`` (the 2 steps and the final evaluation too).
``--pretrained``: LoRA on a saved 100 M base (random weights saved as an imported checkpoint,
weights only) instead of random weights. One run at a time; each prints one line. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from render import render

SETS = ["model.arch=llama", "model.n_layer=12", "model.d_model=768", "model.n_head=12", "model.n_kv_head=4",
        "model.d_ff=2048", "model.block_size=128", "model.tie_embeddings=true", "model.embedding_rows=32000",
        "train.batch_size=2", "train.max_steps=2", "train.log_every=1", "eval.max_examples=4",
        "output.plot=false"]
PROBE = '''"""Each rank's peak RSS (VmHWM) at the end of start-up and at the end: bench_startup.py."""
import json
import os

from {package}.logs.callbacks import Callback


def _status() -> dict:
    with open("/proc/self/status") as f:
        fields = (line.split(":", 1) for line in f)
        return {{k: int(v.split()[0]) / 1024 for k, v in fields if k in ("VmHWM", "VmRSS")}}  # MiB


class PeakRss(Callback):
    def on_train_begin(self, progress):
        self.start = _status()

    def on_train_end(self, progress, summary):
        out = os.path.join(os.environ["RSS_OUT"], f"rank{{progress.rank}}.json")
        with open(out, "w") as f:
            params = sum(p.size for p in progress.network.get_parameters())
            json.dump({{"start": self.start, "end": _status(), "params": params}}, f)
'''

BASE = """# a weights-only 100 M base, as convert_weights.py writes an imported one
import sys
from nlp.deploy.weights import save_imported
from nlp.engine import runtime
from nlp.engine.task import Comm
from nlp.tasks import get_task, load_config

cfg = load_config("config/config.yaml", sys.argv[2:])
runtime.setup(cfg)
task = get_task("nlp")
meta = task.load_data(cfg).meta
network = task.build_model(cfg, meta, Comm()).network
save_imported(sys.argv[1], network, cfg, meta, {"bench_startup": "random"})
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(project: Path, sets: list[str], out: Path, workers: int = 2) -> dict:
    out.mkdir(parents=True)
    pairs = [*sets, f"output.dir={out / 'runs'}", 'train.callbacks=["rss_probe:PeakRss"]']
    env = {**os.environ, "PYTHON": sys.executable, "MASTER_PORT": str(free_port()),
           "LOG_DIR": str(out / "logs"), "RSS_OUT": str(out)}
    args = [a for p in pairs for a in ("--set", p)]
    start = time.perf_counter()
    job = subprocess.run(["bash", "scripts/run_distributed.sh", str(workers), *args], cwd=project, env=env,
                         capture_output=True, text=True)
    if job.returncode != 0:
        sys.exit(f"{project.name}: msrun failed: {job.stderr[-2000:]}")
    ranks = {r: json.loads((out / f"rank{r}.json").read_text()) for r in range(workers)}
    return {"seconds": time.perf_counter() - start, "ranks": ranks}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="c182131", help="template ref of the old start-up (0.14.0's)")
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--pretrained", action="store_true")
    parser.add_argument("--only", choices=["before", "after"], help="run one side only")
    parser.add_argument("--keep", type=Path, help="a folder to render into and keep (default: temporary)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        projects = {}
        for side in ("before", "after"):
            project = root / side / "nlp"
            if not project.exists():
                render(project, "nlp", getattr(args, side))
                (project / "rss_probe.py").write_text(PROBE.format(package="nlp"))
            projects[side] = project
        sets = [*SETS, "model.lora.rank=8"]
        if args.pretrained:
            base = root / "base.ckpt"
            if not base.exists():
                subprocess.run([sys.executable, "-c", BASE, str(base), *SETS], cwd=projects["after"],
                               check=True)
            sets.append(f"model.pretrained={base}")
        for side in ("before", "after"):
            if args.only not in (None, side):
                continue
            result = run(projects[side], sets, root / f"{side}-{time.time_ns()}")
            cells = "  ".join(f"rank {r}: start-up {v['start']['VmHWM']:,.0f} MiB, "
                              f"end {v['end']['VmHWM']:,.0f} MiB" for r, v in result["ranks"].items())
            millions = result["ranks"][0]["params"] / 1e6
            print(f"{side:6} ({getattr(args, side)}): {cells}  ({millions:.1f} M parameters, "
                  f"{result['seconds']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
