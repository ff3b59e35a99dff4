"""Raw ids -> embedding rows. Row 0 means "unknown": ids never seen in training map to it,
and ``data.id_dropout`` replaces a share of training ids by 0 so that row is trained.
``data.hash_buckets`` hashes ids with crc32 instead (stable across runs and machines,
unlike Python's ``hash()``)."""

from __future__ import annotations

import zlib

import numpy as np


class IdMap:
    """Raw integer ids -> embedding rows; row 0 is reserved for unknown ids."""

    def __init__(self, known, buckets: int | None = None):
        self.known = np.unique(np.asarray(known, np.int64))  # ids seen in training, sorted
        self.buckets = buckets

    @property
    def rows(self) -> int:
        return (self.buckets or len(self.known)) + 1

    def encode(self, raw) -> np.ndarray:
        raw = np.asarray(raw, np.int64)
        if self.buckets:
            return stable_hash(raw.astype(str), self.buckets)
        pos = np.minimum(np.searchsorted(self.known, raw), max(len(self.known) - 1, 0))
        hit = self.known[pos] == raw if len(self.known) else np.zeros(raw.shape, bool)
        return np.where(hit, pos + 1, 0).astype(np.int32)

    def __contains__(self, raw: int) -> bool:
        pos = np.searchsorted(self.known, raw)
        return bool(pos < len(self.known) and self.known[pos] == raw)

    def to_meta(self) -> dict:
        return {"known": self.known.tolist(), "buckets": self.buckets}

    @classmethod
    def from_meta(cls, meta: dict) -> IdMap:
        return cls(meta["known"], meta["buckets"])


def stable_hash(tokens, buckets: int) -> np.ndarray:
    """crc32(token) % buckets + 1 for an array of strings: the same on every run and machine."""
    unique, inverse = np.unique(np.asarray(tokens, str), return_inverse=True)
    codes = np.array([zlib.crc32(t.encode()) % buckets + 1 for t in unique], np.int64)
    return codes[inverse].reshape(np.shape(tokens)).astype(np.int32)


def ctr_features(meta: dict, user_raw, item_raw, genres: dict[int, list[str]]) -> np.ndarray:
    """(N, 4) rows into one shared embedding table: user, item, first and second genre."""
    users, items = IdMap.from_meta(meta["users"]), IdMap.from_meta(meta["items"])
    vocab = {g: i + 1 for i, g in enumerate(meta["genres"])}
    unique, inverse = np.unique(np.asarray(item_raw, np.int64), return_inverse=True)
    pairs = np.zeros((len(unique), 2), np.int64)
    for row, item in enumerate(unique.tolist()):
        for slot, genre in enumerate(genres.get(item, [])[:2]):
            pairs[row, slot] = vocab.get(genre, 0)
    o = meta["offsets"]
    return np.stack([o[0] + users.encode(user_raw), o[1] + items.encode(item_raw),
                     o[2] + pairs[inverse, 0], o[2] + pairs[inverse, 1]], axis=1).astype(np.int32)
