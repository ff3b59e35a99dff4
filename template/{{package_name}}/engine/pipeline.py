"""Streaming examples through ``mindspore.dataset``: parallel transforms, batching, prefetch.

A task's ``ExampleSource`` (see ``engine/task.py``) reads one example cheaply (e.g. a file's
bytes and its label); the transforms it names (decode, crop, resize, normalise: MindSpore's
C++ vision ops) run in ``data.workers`` parallel workers. The engine picks which indices are
read, in which order: a plain list of indices given as ``sampler`` is kept exactly, with any
number of workers, so the seeded per-epoch order, rank sharding and resuming at any batch
work as they do for arrays in memory (``engine/data.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import mindspore.dataset as ds
import numpy as np

from .errors import DataError
from .task import ExampleSource

# MindSpore's Decode writes an unreadable JPEG it met to this file in the working directory.
DUMPED_IMAGE = Path("abnormal_image.jpg")


def resolve_workers(workers: int | str, ranks: int | None = None) -> int:
    """``data.workers``: a count, or ``auto``: this process's share of the cores, at most 8
    (more rarely pays off for image decoding and each worker holds its own prefetched rows).
    The cores are shared by the msrun ranks, assumed on this machine (on several machines, set
    a count)."""
    if workers != "auto":
        return int(workers)
    ranks = ranks or int(os.environ.get("MS_WORKER_NUM", "1") or 1)
    return max(1, min((os.cpu_count() or 1) // ranks, 8))


def is_streamed(source) -> bool:
    return hasattr(source, "read")


class _Epoch:
    """The random-access view ``GeneratorDataset`` reads: the source at one epoch (its
    augmentation draws depend on (seed, epoch, index), never on which worker reads it)."""

    def __init__(self, source: ExampleSource, epoch: int):
        self.source, self.epoch = source, epoch

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> tuple[np.ndarray, ...]:
        return self.source.read(int(index), self.epoch)


def build(source: ExampleSource, indices: np.ndarray, epoch: int, batch_size: int, workers: int,
          drop_remainder: bool = True) -> ds.Dataset:
    """source[indices] (in that order) -> the source's operations -> batches of ``batch_size``."""
    # Reading is cheap (bytes + a few numbers): one reader; the transforms get the workers.
    dataset = ds.GeneratorDataset(_Epoch(source, epoch), column_names=list(source.columns),
                                  sampler=[int(i) for i in indices], num_parallel_workers=1)
    for operations, inputs, outputs in source.operations():
        dataset = dataset.map(operations, input_columns=inputs, output_columns=outputs,
                              num_parallel_workers=workers)
    return dataset.project(list(source.outputs)).batch(batch_size, drop_remainder=drop_remainder)


def batches(source: ExampleSource, indices: np.ndarray, epoch: int, batch_size: int, workers: int,
            drop_remainder: bool = True) -> Iterator[tuple[np.ndarray, ...]]:
    """Batches of source[indices] as NumPy arrays. An example that cannot be read stops the
    pipeline; the error then names it (MindSpore's own message does not say which file)."""
    if len(indices) < (batch_size if drop_remainder else 1):
        return
    dumped_before = DUMPED_IMAGE.exists()
    iterator = build(source, indices, epoch, batch_size, workers, drop_remainder).create_tuple_iterator(
        output_numpy=True, num_epochs=1)
    done = 0
    try:
        for batch in iterator:
            yield tuple(batch)
            done += 1
    except RuntimeError as exc:
        if not dumped_before:
            DUMPED_IMAGE.unlink(missing_ok=True)
        raise first_bad(source, indices[done * batch_size:], exc) from None
    finally:
        iterator.stop()  # ends the workers also when the consumer stops early


def first_bad(source: ExampleSource, indices: np.ndarray, exc: RuntimeError) -> Exception:
    """The error that names the first unreadable example from where the pipeline stopped
    (it may have been reading a few batches ahead); ``exc`` itself if every one reads."""
    for index in indices:
        try:
            source.check(int(index))
        except DataError as error:
            return error
    return exc
