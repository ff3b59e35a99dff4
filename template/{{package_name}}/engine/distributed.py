"""Data parallelism: active when launched by ``msrun``, a no-op when run plainly.

    msrun --worker_num=2 --local_worker_num=2 --master_port=8118 --join=True train.py
    bash scripts/run_distributed.sh 2          # the same, via the wrapper

Each rank trains on its own shard; gradients are averaged once per optimizer step; rank 0 writes."""

from __future__ import annotations

import hashlib
import logging
import os

import numpy as np
from mindspore import Tensor, nn, ops
from mindspore.common import dtype as mstype

from .errors import ConfigError
from .task import Comm

log = logging.getLogger(__name__)

_LAUNCHERS = {"MS_ROLE": "msrun", "OMPI_COMM_WORLD_SIZE": "mpirun", "RANK_TABLE_FILE": "rank table"}
# Multi-process launchers MindSpore does not join up: each process would train alone.
_FOREIGN = ("WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE")
_LOCAL_RANK = ("DEVICE_ID", "OMPI_COMM_WORLD_LOCAL_RANK")


def launcher() -> str | None:
    """The launcher that started this process, None when run plainly; refuse a foreign one."""
    found = next((name for var, name in _LAUNCHERS.items() if var in os.environ), None)
    if found is None:
        for var in _FOREIGN:
            if os.environ.get(var, "1").strip() not in ("", "0", "1"):
                raise ConfigError(f"this process was started by a multi-process launcher MindSpore does not join "
                                  f"({var}={os.environ[var]}): each process would train alone; launch with msrun "
                                  "(bash scripts/run_distributed.sh N) or run a single process")
    return found


def local_rank() -> int:
    """This process's device index on its machine (0 when run plainly)."""
    return next((int(os.environ[var]) for var in _LOCAL_RANK if os.environ.get(var, "").isdigit()), 0)


def init() -> Comm:
    if launcher() is None:
        return Comm()
    from mindspore.communication import get_group_size, get_rank
    from mindspore.communication import init as init_collective

    init_collective()  # the step all-reduces its gradients itself (grad_reducer): no parallel context needed
    return Comm(rank=get_rank(), size=get_group_size())


def grad_reducer(parameters, comm: Comm):
    if comm.size == 1:
        return identity
    return nn.DistributedGradReducer(parameters, mean=True)


def mean_reducer(comm: Comm):
    """All-reduce (mean) of one tensor across ranks, as grad_reducer's (the step's loss weight)."""
    return identity if comm.size == 1 else _MeanOverRanks(comm.size)


class _MeanOverRanks(nn.Cell):
    def __init__(self, size: int):
        super().__init__()
        self.all_reduce = ops.AllReduce()
        self.size = size

    def construct(self, x):
        return self.all_reduce(x) / self.size


def identity(x):  # a def, not a lambda: it is called inside the jit-compiled step
    return x


def any_rank(flag: bool, comm: Comm) -> bool:
    """True on every rank when ``flag`` is on any: a rank that stops alone leaves the others hanging."""
    return flag if comm.size == 1 else bool(_sum(np.array([float(flag)]))[0] > 0)


def mean(value: float, comm: Comm) -> float:
    return value if comm.size == 1 else float(_sum(np.array([value], np.float64))[0] / comm.size)


RUNNING_STATS = ("moving_mean", "moving_variance")  # BatchNorm's: the gradient all-reduce leaves them alone


def average_running_stats(network: nn.Cell, comm: Comm) -> None:
    """Average BatchNorm running statistics over ranks (timm's ``distribute_bn``); called on every rank."""
    stats = [p for p in network.get_parameters() if p.name.rsplit(".", 1)[-1] in RUNNING_STATS]
    if comm.size == 1 or not stats:
        return
    total = _sum(np.concatenate([p.asnumpy().ravel() for p in stats])) / comm.size
    offset = 0
    for p in stats:
        # copy_ writes where compiled steps read; set_data would leave them the old values.
        p.copy_(Tensor(total[offset:offset + p.size].reshape(p.shape), p.dtype))
        offset += p.size


def copy_from_rank_0(network: nn.Cell, comm: Comm) -> int:
    """Copy rank 0's parameters whose hash differs on some rank, one at a time; returns how many."""
    if comm.size == 1:
        return 0
    params = list(network.get_parameters())
    mine = np.stack([_fingerprint(p) for p in params])  # (parameters, 4)
    ranks_0 = _sum(mine if comm.is_main else np.zeros_like(mine))  # rank 0's hashes, on every rank
    differs = _sum((mine != ranks_0).any(axis=1).astype(np.float32)) > 0  # on any rank
    for p in (p for p, copy in zip(params, differs) if copy):
        # -0.0 on the others: x + -0.0 is x for every float, signed zeros included
        values = _numpy(p).astype(np.float32) if comm.is_main else np.full(p.shape, -0.0, np.float32)
        p.copy_(Tensor(_sum(values)).astype(p.dtype))
    if differs.any():
        log.info(f"start-up: {int(differs.sum())} of {len(params)} parameters were not rank 0's on every rank: "
                 f"copied from rank 0")
    return int(differs.sum())


def _fingerprint(p) -> np.ndarray:
    """A 64-bit hash of ``p``'s bytes as four 16-bit pieces, exact in float32 (what CPU all-reduces)."""
    digest = hashlib.blake2b(np.ascontiguousarray(_numpy(p)), digest_size=8).digest()
    return np.frombuffer(digest, np.uint16).astype(np.float32)


def _numpy(p) -> np.ndarray:
    return (p.astype(mstype.float32) if p.dtype == mstype.bfloat16 else p).asnumpy()  # NumPy has no bfloat16


def _sum(values: np.ndarray) -> np.ndarray:
    return ops.AllReduce()(Tensor(np.asarray(values, np.float32))).asnumpy()  # CPU all-reduces only sums (fp32)
