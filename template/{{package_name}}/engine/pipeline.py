"""Streaming examples through ``mindspore.dataset``: parallel transforms, batching, prefetch.

A task's ``ExampleSource`` reads an example cheaply; its ``files`` are read in C++ by
``ManifestDataset`` (a Python reader capped the pipeline near 1,200 images/s) and its transforms
run in ``data.workers`` workers. The engine's list of indices, given as ``sampler``, is kept exactly.
"""

from __future__ import annotations

import json
import os
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

import mindspore.dataset as ds
import numpy as np

from .errors import DataError
from .task import ExampleSource

# MindSpore's Decode writes an unreadable JPEG it met to this file in the working directory.
DUMPED_IMAGE = Path("abnormal_image.jpg")


class _Epoch:
    """The source at one epoch, as ``GeneratorDataset`` reads it (draws depend on seed, epoch, index)."""

    def __init__(self, source: ExampleSource, epoch: int, reads: int = 0):
        self.source, self.epoch, self.reads = source, epoch, reads

    def __len__(self) -> int:  # reads: an epoch may read some examples twice (``Batches``: its last step)
        return max(len(self.source), self.reads)

    def __getitem__(self, index: int) -> tuple[np.ndarray, ...]:
        return self.source.read(int(index), self.epoch)


def build(source: ExampleSource, indices: np.ndarray, epoch: int, batch_size: int, workers: int,
          drop_remainder: bool = True) -> ds.Dataset:
    """source[indices] (in that order) -> the source's operations -> batches of ``batch_size``."""
    order = [int(i) for i in indices]
    # Reading is cheap (a few numbers): one reader; the transforms get the workers.
    dataset = ds.GeneratorDataset(_Epoch(source, epoch, len(order)), column_names=list(source.columns),
                                  sampler=order, num_parallel_workers=1)
    if getattr(source, "files", None) is not None:  # "image": the files' bytes, zipped row by row with read()'s
        dataset = ds.zip((file_bytes(source, order), dataset))
    for operations, inputs, outputs in stages(source.operations()):
        dataset = dataset.map(operations, input_columns=inputs, output_columns=outputs,
                              num_parallel_workers=workers)
    return dataset.project(list(source.outputs)).batch(batch_size, drop_remainder=drop_remainder)


def stages(steps: list[tuple[list, list[str], list[str]]]) -> list[tuple[list, list[str], list[str]]]:
    """Consecutive steps on the same columns as one ``map`` (each map has its own pool of workers)."""
    merged = []
    for operations, inputs, outputs in steps:
        if merged and merged[-1][1] == merged[-1][2] == inputs == outputs:
            merged[-1] = (merged[-1][0] + list(operations), inputs, outputs)
        else:
            merged.append((list(operations), inputs, outputs))
    return merged


def file_bytes(source: ExampleSource, order: list[int]) -> ds.Dataset:
    """A column ``image``: the bytes of ``source.files[order]``, read in C++ from a manifest file."""
    manifest = _manifests.get(source)
    if manifest is None:  # once per source (rewriting 1.2M paths every epoch costs ~9 s)
        with tempfile.NamedTemporaryFile("w", prefix="files-", suffix=".json", delete=False) as file:
            line = '{"source": %s, "usage": "train", "annotation": [{"name": "file"}]}\n'
            file.writelines(line % json.dumps(os.path.abspath(path)) for path in source.files)
        manifest = _manifests[source] = file.name
        weakref.finalize(source, os.unlink, manifest)
    dataset = ds.ManifestDataset(manifest, decode=False, class_indexing={"file": 0},
                                 sampler=ds.SubsetSampler(order))
    return dataset.project(["image"])


_manifests: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # source -> its manifest's path


def batches(source: ExampleSource, indices: np.ndarray, epoch: int, batch_size: int, workers: int,
            drop_remainder: bool = True) -> Iterator[tuple[np.ndarray, ...]]:
    """Batches of source[indices] as NumPy arrays; an unreadable example's error names it (MindSpore's does not)."""
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
    """The error naming the first unreadable example from where the pipeline stopped, else ``exc``."""
    for index in indices:
        try:
            source.check(int(index))
        except DataError as error:
            return error
    return exc
