"""Batches from a training source: seeded shuffling per epoch, strided sharding by rank.

Epoch e's order depends only on (seed, e), so a resumed run sees exactly the batches of an
uninterrupted one. Arrays and ``TrainSource`` rows are taken directly; an ``ExampleSource`` streams
through ``engine/pipeline.py`` (imported only then: a project may not have it).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from mindspore import Tensor

from .errors import DataError
from .task import Comm, ExampleSource, TrainSource


class Columns:
    """Equal-length arrays in memory as a ``TrainSource`` (what ``Data.train`` as a dict means)."""

    def __init__(self, columns: dict[str, np.ndarray]):
        lengths = {len(array) for array in columns.values()}
        if len(lengths) != 1:
            raise DataError(f"training columns differ in length: { {k: len(v) for k, v in columns.items()} }")
        self.columns = list(columns.values())

    def __len__(self) -> int:
        return len(self.columns[0])

    def take(self, index: np.ndarray, epoch: int = 0) -> tuple[np.ndarray, ...]:
        return tuple(column[index] for column in self.columns)  # the same rows every epoch


class Batches:
    def __init__(self, train: dict[str, np.ndarray] | TrainSource | ExampleSource, batch_size: int, seed: int,
                 comm: Comm | None = None, workers: int = 1, accumulation: int = 1):
        self.source = Columns(train) if isinstance(train, dict) else train
        self.workers = workers  # parallel transform workers of a streamed source
        self.batch_size, self.seed = batch_size, seed
        self.comm = comm = comm or Comm()
        self.total = len(self.source)
        if self.total // comm.size < batch_size:
            raise DataError(f"{self.total // comm.size} examples per device: fewer than train.batch_size={batch_size}")
        self.per_rank = -(-self.total // (comm.size * batch_size * accumulation)) * batch_size * accumulation
        self.repeated = self.per_rank * comm.size - self.total  # rows per rank: every example, whole steps

    def __len__(self) -> int:
        """Batches per epoch, all full: every example once, the last batches end with the first ones again."""
        return self.per_rank // self.batch_size

    def epoch(self, epoch: int, start: int = 0) -> Iterator[tuple[Tensor, ...]]:
        # The order of rng.permutation(total), shuffled in place as int32 when it fits: half the memory.
        order = np.arange(self.total, dtype=np.int32 if self.total < 2**31 else np.int64)
        np.random.default_rng([self.seed, epoch]).shuffle(order)
        order = np.resize(order, self.total + self.repeated) if self.repeated else order  # as DistributedSampler
        # Strided shard (as MindSpore's samplers): batch i of all ranks = batch i of one process.
        mine = order[self.comm.rank::self.comm.size]
        if hasattr(self.source, "read"):  # an ExampleSource: streamed
            from .pipeline import batches

            b = self.batch_size
            for batch in batches(self.source, mine[start * b:len(self) * b], epoch, b, self.workers):
                yield tuple(Tensor(column) for column in batch)
            return
        # A source may take several batches per take() (``block_rows``): its per-call cost once per block.
        b, ahead = self.batch_size, max(1, getattr(self.source, "block_rows", 0) // self.batch_size)
        for first in range(start, len(self), ahead):
            block = self.source.take(mine[first * b:min(first + ahead, len(self)) * b], epoch)
            for i in range(0, len(block[0]), b):
                yield tuple(Tensor(column[i:i + b]) for column in block)
