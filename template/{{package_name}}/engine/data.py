"""Batches from in-memory arrays: seeded shuffling per epoch, strided sharding by rank.

The order of epoch ``e`` depends only on (seed, e), so a resumed run can jump to any
(epoch, batch) position and see exactly the batches an uninterrupted run would.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from mindspore import Tensor

from .errors import DataError
from .task import Comm


class Batches:
    def __init__(self, columns: dict[str, np.ndarray], batch_size: int, seed: int, comm: Comm | None = None):
        lengths = {len(array) for array in columns.values()}
        if len(lengths) != 1:
            raise DataError(f"training columns differ in length: { {k: len(v) for k, v in columns.items()} }")
        self.columns = list(columns.values())
        self.batch_size = batch_size
        self.seed = seed
        self.comm = comm = comm or Comm()
        self.total = lengths.pop()
        self.per_rank = self.total // comm.size
        if self.per_rank < batch_size:
            raise DataError(
                f"{self.per_rank} training examples per device is fewer than train.batch_size={batch_size}")

    def __len__(self) -> int:
        """Full batches per epoch (the ragged tail is dropped so every step has the same shape)."""
        return self.per_rank // self.batch_size

    def epoch(self, epoch: int, start: int = 0) -> Iterator[tuple[Tensor, ...]]:
        order = np.random.default_rng([self.seed, epoch]).permutation(self.total)
        # Strided shard (as MindSpore's samplers): batch i of every rank together is exactly
        # batch i of a single process with batch_size * world_size.
        mine = order[self.comm.rank::self.comm.size][:self.per_rank]
        for i in range(start, len(self)):
            index = mine[i * self.batch_size:(i + 1) * self.batch_size]
            yield tuple(Tensor(column[index]) for column in self.columns)
