"""``python -m <package> check [--device auto|CPU|GPU|Ascend] [--workers N]``: the journey of the
README, as typed, on this machine's device, in a few minutes; one line per check.

    fp32       python train.py (a short run in float32)
    amp        the same with train.amp_level=auto (mixed precision on GPU/Ascend, fp32 on CPU)
    resume     a run stopped at step 2 and resumed ends with the weights of the fp32 run
    eval       python eval.py --checkpoint <fp32 run>/last.ckpt
    export     python export.py (MINDIR, reloaded and compared with the network)
    msrun      bash scripts/run_distributed.sh N (N: --workers, default 2)

Exit status 0 when every check passed. Runs go to a temporary folder (``--out`` keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .logs.callbacks import Callback

STEPS = 4
QUICK = ("train.max_steps=4", "train.log_every=1", "eval.max_examples=64", "train.save_every=null")


class StopAtTwo(Callback):
    """The interruption of the resume check (named in train.callbacks): stop after two steps."""

    def on_step_end(self, progress, logs):
        if progress.step >= 2:
            progress.stop()


def main(argv: list[str], project: Path) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {__package__} check", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto", choices=["auto", "CPU", "GPU", "Ascend"])
    p.add_argument("--workers", type=int, default=2, help="msrun processes (default: %(default)s)")
    p.add_argument("--out", default=None, help="keep the runs in this folder (default: a temporary one)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="check-") as tmp:
        out = Path(args.out or tmp).resolve()
        checks = Checks(project, out, args.device, args.workers)
        failed = sum(not checks.run(name) for name in ("fp32", "amp", "resume", "eval", "export", "msrun"))
    print(f"check: {6 - failed} of 6 passed on device {args.device}")
    return 1 if failed else 0


class Checks:
    def __init__(self, project: Path, out: Path, device: str, workers: int):
        self.project, self.out, self.workers = project, out, workers
        self.common = (f"runtime.device={device}", f"output.dir={out / 'runs'}", *QUICK)
        self.reference = None  # the fp32 run's summary: the other checks start from it

    def run(self, name: str) -> bool:
        start = time.perf_counter()
        try:
            detail = getattr(self, name)()
            ok = True
        except CheckFailed as failure:
            detail, ok = str(failure), False
        print(f"{'ok  ' if ok else 'FAIL'} {name:<7} {detail} ({time.perf_counter() - start:.0f} s)", flush=True)
        return ok

    def command(self, *args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(args, cwd=self.project, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
            raise CheckFailed(f"`{' '.join(args[:2])}` exited {done.returncode}: {lines[-1] if lines else ''}")
        return done

    def train(self, *sets: str, resume: str | None = None) -> dict:
        argv = [a for s in (*self.common, *sets) for a in ("--set", s)]
        done = self.command(sys.executable, "train.py", *argv, *(["--resume", resume] if resume else []))
        return last_json(done.stdout)  # the summary train.py prints last

    def fp32(self) -> str:
        self.reference = summary = self.train("train.amp_level=O0", "output.name=fp32")
        return f"{summary['steps']} steps, {summary['monitor']} {summary.get(summary['monitor'])}"

    def amp(self) -> str:
        summary = self.train("train.amp_level=auto", "output.name=amp")
        return f"{summary['steps']} steps, {summary['skipped_steps']} skipped (overflow)"

    def resume(self) -> str:
        cut = self.train("train.amp_level=O0", "output.name=resume", f"train.callbacks=[{__name__}:StopAtTwo]")
        if cut["steps"] != 2:
            raise CheckFailed(f"the interrupted run stopped at step {cut['steps']}, not 2")
        resumed = self.train("train.amp_level=O0", "output.name=resume", resume=f"{cut['run_dir']}/last.ckpt")
        from .engine import checkpoint

        full, _ = checkpoint.read(f"{self.need_fp32()['run_dir']}/last.ckpt")
        again, _ = checkpoint.read(f"{resumed['run_dir']}/last.ckpt")
        worst = max(float(np.max(np.abs(full[k].asnumpy() - again[k].asnumpy()))) for k in full)
        if full.keys() != again.keys() or worst > 1e-5:
            raise CheckFailed(f"resumed weights differ from the uninterrupted run's by up to {worst:.2e}")
        return f"stopped at 2, resumed to {resumed['steps']}: weights equal to the fp32 run's (max diff {worst:.1e})"

    def eval(self) -> str:
        done = self.command(sys.executable, "eval.py", "--checkpoint", f"{self.need_fp32()['run_dir']}/last.ckpt",
                            "--set", self.common[0])
        metrics = last_json(done.stdout)
        return ", ".join(f"{k} {v:.4g}" for k, v in metrics.items() if isinstance(v, float))[:100]

    def export(self) -> str:
        target = self.out / "export"
        self.command(sys.executable, "export.py", "--checkpoint", f"{self.need_fp32()['run_dir']}/last.ckpt",
                     "--out", str(target))
        files = sorted(p.name for p in target.glob("*.mindir"))
        if not files:
            raise CheckFailed(f"no .mindir in {target}")
        return f"{', '.join(files)} written, reloaded and compared"

    def msrun(self) -> str:
        argv = [a for s in (*self.common, "train.max_steps=2", "output.name=msrun") for a in ("--set", s)]
        env_log = self.out / "msrun_log"
        done = subprocess.run(["bash", "scripts/run_distributed.sh", str(self.workers), *argv], cwd=self.project,
                              capture_output=True, text=True, timeout=1800,
                              env={**os.environ, "LOG_DIR": str(env_log), "PYTHON": sys.executable})
        if done.returncode != 0:
            lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
            raise CheckFailed(f"run_distributed.sh exited {done.returncode}: {lines[-1] if lines else ''}")
        return f"{self.workers} processes, 2 steps"

    def need_fp32(self) -> dict:
        if self.reference is None:
            raise CheckFailed("needs the fp32 run, which failed")
        return self.reference


class CheckFailed(Exception):
    pass


def last_json(text: str) -> dict:
    """The indented JSON object a script prints last (its first line is a lone "{")."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line == "{"]
    if not starts:
        raise CheckFailed(f"no JSON summary in the output: {lines[-1] if lines else '(none)'}")
    return json.loads("\n".join(lines[starts[-1]:]))
