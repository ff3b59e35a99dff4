"""Negative items drawn on the fly from a counter-based hash, instead of materialised pairs.

Draw ``s`` of row ``r`` is ``candidates[hash(seed, stream, counter) % C]`` with ``counter =
(r * count + s) * 64 + attempt``: re-hashed with the next attempt while the user has seen the
item (or, for distinct draws, while an earlier slot of the row holds it). A training row ``r``
is (epoch, example index), so every epoch draws fresh negatives (and id dropout) for the same
positives. A row's items depend only on its own keys, never on which other rows are drawn
with it: the same seed gives the same training rows on resume, in any batch size, with
accumulation and in any msrun shard, and the same eval negatives for a user in any eval subset.
"""

from __future__ import annotations

import functools

import numpy as np

TRAIN_NEGATIVE, ID_DROPOUT, EVAL_NEGATIVE = 1, 2, 3  # hash streams
TRIES = 63  # re-draws before a draw is kept even if seen (a user who has seen nearly everything)
GOLDEN = 0x9E3779B97F4A7C15


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function (Steele et al. 2014): a bijective mix of uint64 arrays
    (integer arrays wrap around silently, which is what the mix relies on)."""
    z = np.asarray(x, np.uint64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@functools.lru_cache(maxsize=64)
def stream_key(seed: int, stream: int) -> np.uint64:
    """The SplitMix64 state that (seed, stream) starts from."""
    return splitmix64(splitmix64(np.array([seed], np.uint64)) ^ np.array([stream], np.uint64))[0]


def counter_hash(seed: int, stream: int, counter: np.ndarray) -> np.ndarray:
    """Output number ``counter`` (an integer array) of a SplitMix64 generator started from (seed,
    stream): each output is computed directly, in any order, without generator state."""
    return splitmix64(stream_key(seed, stream) + (np.asarray(counter, np.uint64) + np.uint64(1)) * np.uint64(GOLDEN))


def contains(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Membership in a sorted array, O(log n) per key (``np.isin`` would sort both every time)."""
    pos = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[pos] == keys


def sample_unseen(seed: int, stream: int, rows: np.ndarray, users: np.ndarray, count: int, candidates: np.ndarray,
                  seen: np.ndarray, width: int, distinct: bool = False) -> np.ndarray:
    """(len(rows), count) items from ``candidates`` that each row's user never interacted with.

    ``rows`` names each row in the hash (an example index, a user row); ``seen`` holds the
    sorted ``user * width + item`` keys. ``distinct``: no item twice in a row.
    """
    counter = ((np.asarray(rows, np.int64)[:, None] * count + np.arange(count)) * (TRIES + 1)).ravel()
    user_keys = np.repeat(np.asarray(users, np.int64) * width, count)
    items = np.zeros(len(counter), candidates.dtype)
    todo = np.arange(len(counter))  # flat positions still to draw
    for attempt in range(TRIES + 1):
        h = counter_hash(seed, stream, counter[todo] + attempt)
        items[todo] = candidates[(h % np.uint64(len(candidates))).astype(np.int64)]
        todo = todo[contains(seen, user_keys[todo] + items[todo])]
        if distinct:  # a later slot repeating an earlier one (a stable sort keeps the slot order)
            table = items.reshape(-1, count)
            order = np.argsort(table, axis=1, kind="stable")
            ordered = np.take_along_axis(table, order, 1)
            repeat = np.zeros(table.shape, bool)
            np.put_along_axis(repeat, order[:, 1:], ordered[:, 1:] == ordered[:, :-1], 1)
            todo = np.union1d(todo, np.flatnonzero(repeat))
        if not len(todo):
            break
    return items.reshape(-1, count)


class PairSource:
    """Training rows (user, item, label) made on demand: only the positives stay in memory.

    ``passes`` passes over the positives, each with fresh negatives: in a pass, the
    ``n`` positives come first, then ``negatives`` unseen items per positive (its user's).
    ``id_dropout`` replaces a share of ids by 0, the row unseen ids map to (see ids.py).
    Negatives and dropout are drawn from (seed, epoch, index): new ones every epoch, as
    NCF-style training does, the same ones for the same (epoch, index) on resume.
    """

    block_rows = 1 << 14  # a take() costs ~0.3 ms however few its rows: the engine asks for 16k at once

    def __init__(self, users: np.ndarray, items: np.ndarray, negatives: int, passes: int, id_dropout: float,
                 candidates: np.ndarray, seen: np.ndarray, width: int, seed: int):
        self.users, self.items = users.astype(np.int32), items.astype(np.int32)
        self.negatives, self.passes, self.id_dropout = negatives, passes, id_dropout
        self.candidates, self.seen, self.width, self.seed = candidates, seen, width, seed
        self.per_pass = len(users) * (1 + negatives)

    def __len__(self) -> int:
        return self.passes * self.per_pass

    def take(self, index: np.ndarray, epoch: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        index = np.asarray(index, np.int64)
        draw = index + epoch * len(self)  # the row's name in the hash: unique over (epoch, index)
        n = len(self.users)
        j = index % self.per_pass  # position within its pass
        positive = j < n
        row = np.where(positive, j, (j - n) // self.negatives)  # the positive it belongs to
        user, item = self.users[row], self.items[row]
        item[~positive] = sample_unseen(self.seed, TRAIN_NEGATIVE, draw[~positive], user[~positive], 1,
                                        self.candidates, self.seen, self.width)[:, 0]
        # One hash per row: its high 32 bits decide the user's dropout, its low 32 bits the item's.
        h, threshold = counter_hash(self.seed, ID_DROPOUT, draw), np.uint64(self.id_dropout * 2**32)
        user[(h >> np.uint64(32)) < threshold] = 0
        item[(h & np.uint64(0xFFFFFFFF)) < threshold] = 0
        return user, item, positive.astype(np.float32)
