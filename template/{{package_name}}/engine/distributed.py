"""Data parallelism: active when launched by ``msrun``, a no-op when run plainly.

    msrun --worker_num=2 --local_worker_num=2 --master_port=8118 --join=True train.py
    bash scripts/run_distributed.sh 2          # the same, via the wrapper

Each rank sees its own shard of every epoch, gradients are averaged once per optimizer
step, and only rank 0 writes checkpoints, logs and plots.
"""

from __future__ import annotations

import os

from mindspore import nn

from .errors import ConfigError
from .task import Comm

# How each launcher MindSpore supports announces itself: msrun (dynamic cluster), OpenMPI,
# a rank table (Ascend).
_LAUNCHERS = {"MS_ROLE": "msrun", "OMPI_COMM_WORLD_SIZE": "mpirun", "RANK_TABLE_FILE": "rank table"}
# Multi-process launchers MindSpore does not join up: each process would train alone.
_FOREIGN = ("WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE")
# The process's index on its machine (its device id): msrun sets DEVICE_ID, OpenMPI its local rank.
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
    import mindspore as ms
    from mindspore.communication import get_group_size, get_rank
    from mindspore.communication import init as init_collective

    init_collective()
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    return Comm(rank=get_rank(), size=get_group_size())


def grad_reducer(parameters, comm: Comm):
    """All-reduce (mean) of gradients across ranks; identity for a single process."""
    if comm.size == 1:
        return _identity
    return nn.DistributedGradReducer(parameters, mean=True)


def _identity(grads):  # a def, not a lambda: it is called inside the jit-compiled step
    return grads


def any_rank(flag: bool, comm: Comm) -> bool:
    """True on every rank when ``flag`` is true on any (e.g. one rank caught SIGTERM)."""
    if comm.size == 1:
        return flag
    import mindspore as ms
    from mindspore import ops

    return bool(ops.AllReduce()(ms.Tensor([float(flag)])).asnumpy()[0] > 0)  # CPU all-reduces only sums
