"""Data parallel with real msrun workers on CPU: ranks stay identical and match one process
training on the union of their batches."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ENGINE_TEST_MODEL

ROOT = Path(__file__).resolve().parents[1]
STEPS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def settings(out: Path, name: str, batch_size: int) -> list[str]:
    # SGD: the comparison is about gradients. Adam divides by |g| + eps, which turns the last-bit
    # differences of a different summation order (all-reduce vs one batch) into visible ones.
    pairs = [f"output.dir={out}", f"output.name={name}", f"train.max_steps={STEPS}", f"train.eval_every={STEPS}",
             f"train.batch_size={batch_size}", "optim.name=sgd", "optim.lr=0.1", "output.plot=false",
             'train.callbacks=["tests.callbacks:DumpWeights"]', *ENGINE_TEST_MODEL]  # the loop's test: a small net
    return [arg for pair in pairs for arg in ("--set", pair)]


def load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as arrays:
        return dict(arrays)


@pytest.mark.slow
def test_two_msrun_workers_match_one_process(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "MASTER_PORT": str(free_port()), "LOG_DIR": str(tmp_path / "logs")}
    base = 8
    dist = subprocess.run(["bash", "scripts/run_distributed.sh", "2", *settings(tmp_path, "dist", base)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").glob("*.log"))
    assert dist.returncode == 0, dist.stdout + dist.stderr + logs
    single = subprocess.run([sys.executable, "train.py", *settings(tmp_path, "single", 2 * base)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert single.returncode == 0, single.stderr

    rank0, rank1 = load(tmp_path / "dist" / "weights_rank0.npz"), load(tmp_path / "dist" / "weights_rank1.npz")
    reference = load(tmp_path / "single" / "weights_rank0.npz")
    assert rank0.keys() == rank1.keys() == reference.keys()
    for name in rank0:
        np.testing.assert_array_equal(rank0[name], rank1[name], err_msg=name)
        np.testing.assert_allclose(rank0[name], reference[name], rtol=1e-4, atol=1e-5, err_msg=name)
    assert (tmp_path / "dist" / "last.ckpt").exists()
