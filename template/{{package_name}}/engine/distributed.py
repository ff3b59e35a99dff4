"""Data parallelism: active when launched by ``msrun``, a no-op when run plainly.

    msrun --worker_num=2 --local_worker_num=2 --master_port=8118 --join=True train.py
    bash scripts/run_distributed.sh 2          # the same, via the wrapper

Each rank sees its own shard of every epoch, gradients are averaged once per optimizer
step, and only rank 0 writes checkpoints, logs and plots.
"""

from __future__ import annotations

import os

from mindspore import nn

from .task import Comm

# Variables set by the launchers MindSpore supports (msrun/dynamic cluster, OpenMPI).
_LAUNCHER_VARS = ("MS_ROLE", "OMPI_COMM_WORLD_SIZE")


def launched() -> bool:
    return any(var in os.environ for var in _LAUNCHER_VARS)


def init() -> Comm:
    if not launched():
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
