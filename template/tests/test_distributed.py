"""Data parallel with real msrun workers on CPU: ranks stay identical and match one process
training on the union of their batches."""

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
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


@pytest.mark.slow
def test_a_parameter_that_differs_on_a_rank_is_copied_from_rank_0(tmp_path):
    """Ranks whose parameters differ (rank 1 changed one element of a float16 one and reordered a
    float32 one: equal sum and sum of squares) end with rank 0's, bit for bit; equal ones stay."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    job = subprocess.run(["msrun", "--worker_num=2", "--local_worker_num=2", f"--master_port={free_port()}",
                          "--join=True", f"--log_dir={tmp_path / 'logs'}", "tests/test_distributed.py", str(tmp_path)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").glob("*.log"))
    assert job.returncode == 0, job.stdout + job.stderr + logs
    rank0, rank1 = load(tmp_path / "rank0.npz"), load(tmp_path / "rank1.npz")
    copied = rank0.pop("copied"), rank1.pop("copied")
    for name, ours in rank_parameters(0).items():  # rank 0's values on both, bit for bit (-0.0 too)
        assert ours.dtype == rank0[name].dtype == rank1[name].dtype and ours.tobytes() == rank1[name].tobytes(), name
        assert ours.tobytes() == rank0[name].tobytes(), name
    assert copied == (2, 2)  # "same" was not: equal everywhere already


def rank_parameters(rank: int) -> dict[str, np.ndarray]:
    """The parameters of the msrun test above on ``rank``."""
    rng = np.random.default_rng(0)
    same, half, order = rng.normal(size=(64, 32)), rng.normal(size=(3, 5)), np.array([-0.0, 1.5, -2.0, 0.25])
    if rank == 1:
        half[1, 2] += 1
        order = order[::-1]
    return {"same": same.astype(np.float32), "half": half.astype(np.float16), "order": order.astype(np.float32)}


def copy_on_this_rank(out: str) -> None:
    """An msrun worker of the test above: its rank's parameters through copy_from_rank_0."""
    import importlib

    import mindspore as ms
    from mindspore import Parameter, Tensor, nn

    from tests.conftest import PACKAGE

    distributed = importlib.import_module(f"{PACKAGE}.engine.distributed")
    ms.set_device("CPU")
    comm = distributed.init()
    network = nn.Cell()
    for name, values in rank_parameters(comm.rank).items():
        setattr(network, name, Parameter(Tensor(values), name=name))
    copied = distributed.copy_from_rank_0(network, comm)
    ours = {p.name: p.asnumpy() for p in network.get_parameters()}
    np.savez(Path(out) / f"rank{comm.rank}.npz", copied=copied, **ours)


def job_pids(tag: str, *needles: str) -> list[int]:
    """Processes whose environment holds MSSCAFFOLD_TEST_JOB=tag (msrun, its scheduler, the
    workers) and every one of ``needles`` (e.g. "RANK_ID=1")."""
    wanted = {f"MSSCAFFOLD_TEST_JOB={tag}".encode(), *(n.encode() for n in needles)}
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            env = set((proc / "environ").read_bytes().split(b"\0")) if proc.name.isdigit() else set()
        except OSError:  # gone, or not ours
            continue
        if wanted <= env:
            pids.append(int(proc.name))
    return pids


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["killed", "raises", "scheduler"])
def test_a_dead_or_failing_rank_ends_the_job_in_one_line(tmp_path, fault):
    """SIGKILL one of two workers (an OOM kill), or let it fail (a bad file in its shard), or
    SIGKILL msrun's scheduler: every process of the job is gone within 60 s (0.8.4: msrun's
    traceback 32 s later, its scheduler still running until then; a killed scheduler: 57 s and a
    traceback on 0.10.1), and the last line names the rank or the scheduler, and the resume command."""
    tag = f"{fault}-{os.getpid()}"
    callbacks = '["tests.callbacks:FailOnRankOne"]' if fault == "raises" else '["tests.callbacks:Slow"]'
    pairs = [f"output.dir={tmp_path}", "train.max_steps=200", "train.log_every=1", "output.plot=false",
             f"train.callbacks={callbacks}", *ENGINE_TEST_MODEL]
    args = [arg for pair in pairs for arg in ("--set", pair)]
    env = {**os.environ, "PYTHON": sys.executable, "MASTER_PORT": str(free_port()), "LOG_DIR": str(tmp_path / "logs"),
           "MSSCAFFOLD_TEST_JOB": tag, "FAIL_AT_STEP": "3"}
    job = subprocess.Popen(["bash", "scripts/run_distributed.sh", "2", *args], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rank1, deadline = [], time.monotonic() + 300
    while not rank1 and time.monotonic() < deadline:
        rank1 = job_pids(tag, "MS_ROLE=MS_WORKER", "RANK_ID=1")
        time.sleep(0.2)
    assert rank1, "rank 1 never started"
    victim = rank1[0] if fault != "scheduler" else job_pids(tag, "MS_ROLE=MS_SCHED")[0]
    if fault != "raises":  # once the job trains (rank 0 logs the steps)
        log = tmp_path / "logs" / "worker_0.log"
        while time.monotonic() < deadline and "step 2/" not in (log.read_text() if log.exists() else ""):
            time.sleep(0.2)
        os.kill(victim, signal.SIGKILL)
    while Path(f"/proc/{victim}/cmdline").exists() and Path(f"/proc/{victim}/cmdline").read_bytes() \
            and time.monotonic() < deadline:  # (a zombie has an empty command line)
        time.sleep(0.1)
    died = time.monotonic()
    out, err = job.communicate(timeout=120)
    assert time.monotonic() - died < 60 and job.returncode == 1, err[-3000:]
    assert job_pids(tag) == []  # no worker, scheduler or launcher left
    last = err.strip().splitlines()[-1]
    if fault == "scheduler":
        assert last.startswith(f"error: msrun's scheduler (pid {victim}) died while the ranks trained"), last
    else:
        how = "was killed by signal 9" if fault == "killed" else "exited with status 1 (error: data/shard-1.bin"
        assert last.startswith(f"error: rank 1 (pid {rank1[0]}) {how}"), last
        assert f"its log: {tmp_path / 'logs' / 'worker_1.log'};" in last, last
    # This run's own last.ckpt, never `--resume auto` (which may pick another run); none saved yet: start again.
    [run_dir] = [path for path in tmp_path.iterdir() if path.name not in ("logs", ".cache")]  # nlp: its token cache
    if (run_dir / "last.ckpt").exists():
        resume = ["--resume", str(run_dir / "last.ckpt")]
        command = shlex.split(last.partition("continue with: ")[2])  # pasted in a shell: exactly these arguments
    else:
        resume = []
        command = shlex.split(last.partition(f"no checkpoint was saved in {run_dir}; start again with: ")[2])
    assert command == ["bash", "scripts/run_distributed.sh", "2", *args, *resume], last


@pytest.mark.slow
def test_a_node_that_never_joins_is_named_within_the_join_timeout(tmp_path):
    """Node 0 of 2 started alone: within JOIN_TIMEOUT the script says the job did not form (0.10.1:
    a 632 s wait, then rank 0 blamed), leaves no process behind and gives the command to start again."""
    tag = f"join-{os.getpid()}"
    args = ["--set", f"output.dir={tmp_path}", "--set", "train.max_steps=3"]
    env = {**os.environ, "PYTHON": sys.executable, "MASTER_PORT": str(free_port()), "LOG_DIR": str(tmp_path / "logs"),
           "NODES": "2", "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1", "JOIN_TIMEOUT": "5", "MSSCAFFOLD_TEST_JOB": tag}
    started = time.monotonic()
    job = subprocess.run(["bash", "scripts/run_distributed.sh", "2", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert job.returncode == 1 and time.monotonic() - started < 120, job.stderr[-3000:]
    assert job_pids(tag) == []
    last = job.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the job did not form within JOIN_TIMEOUT=5s: not all 2 processes joined"), last
    command = shlex.split(last.partition("start again with: ")[2])
    assert command == ["bash", "scripts/run_distributed.sh", "2", *args], last


@pytest.mark.slow
def test_two_jobs_on_one_host_never_meet(tmp_path):
    """Two jobs started at once, neither naming a port: each gets a free one and trains alone
    (0.10.1: both on 8118, a worker joined the other job's scheduler, 3 of 3 tries failed)."""
    env = {key: value for key, value in os.environ.items() if key != "MASTER_PORT"}
    jobs = []
    for name in ("a", "b"):
        args = ["--set", f"output.dir={tmp_path / name}", "--set", "output.name=run", "--set", "train.max_steps=3",
                "--set", "output.plot=false", *[a for pair in ENGINE_TEST_MODEL for a in ("--set", pair)]]
        jobs.append(subprocess.Popen(["bash", "scripts/run_distributed.sh", "2", *args], cwd=ROOT, text=True,
                                     env={**env, "PYTHON": sys.executable, "LOG_DIR": str(tmp_path / name / "logs")},
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    for job in jobs:
        out, err = job.communicate(timeout=300)
        assert job.returncode == 0, err[-3000:]
    for name in ("a", "b"):
        rows = [json.loads(line) for line in (tmp_path / name / "run" / "metrics.jsonl").read_text().splitlines()]
        steps = [row["step"] for row in rows if row["kind"] == "train"]
        assert steps[-1] == 3


def test_several_nodes_without_master_addr_are_refused_in_one_line():
    env = {key: value for key, value in os.environ.items() if key != "MASTER_ADDR"}
    result = subprocess.run(["bash", "scripts/run_distributed.sh", "4"], cwd=ROOT, env={**env, "NODES": "2"},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == ["error: NODES=2 needs MASTER_ADDR, the address of the node with "
                                          "NODE_RANK=0, the same on every node"]


if __name__ == "__main__":  # msrun's worker of test_a_parameter_that_differs_on_a_rank_is_copied_from_rank_0
    copy_on_this_rank(sys.argv[1])
