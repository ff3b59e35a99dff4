"""Raw ids -> embedding rows. Row 0 means "unknown": ids never seen in training map to it,
and ``data.id_dropout`` replaces a share of training ids by 0 so that row is trained.
``data.hash_buckets`` hashes ids with crc32 instead (stable across runs and machines,
unlike Python's ``hash()``). Raw ids are integers or strings (``user_0042``): the sorted
known ids travel in the checkpoint's meta and the export's spec, so every entry point maps
the ids of the data, as written there, to the same rows."""

from __future__ import annotations

import zlib

import numpy as np


class IdMap:
    """Raw ids (integers or strings) -> embedding rows; row 0 is reserved for unknown ids."""

    def __init__(self, known, buckets: int | None = None):
        known = np.asarray(known)
        self.known = np.unique(known if known.dtype.kind == "U" else known.astype(np.int64))  # seen in training
        self.buckets = buckets

    @property
    def text(self) -> bool:
        """True when the raw ids are strings."""
        return self.known.dtype.kind == "U"

    def parse(self, text: str):
        """A raw id typed by a person (``--user 42``, ``--user user_0042``) as this map's kind of id;
        None when it cannot be one (text for a map of integer ids)."""
        if self.text:
            return text
        try:
            return int(text)
        except ValueError:
            return None

    @property
    def rows(self) -> int:
        return (self.buckets or len(self.known)) + 1

    def encode(self, raw) -> np.ndarray:
        raw = np.asarray(raw).astype(str if self.text else np.int64)
        if self.buckets:
            return stable_hash(raw.astype(str), self.buckets)
        pos = np.minimum(np.searchsorted(self.known, raw), max(len(self.known) - 1, 0))
        hit = self.known[pos] == raw if len(self.known) else np.zeros(raw.shape, bool)
        return np.where(hit, pos + 1, 0).astype(np.int32)

    def __contains__(self, raw) -> bool:
        if raw is None or isinstance(raw, str) != self.text:
            return False
        pos = np.searchsorted(self.known, raw)
        return bool(pos < len(self.known) and self.known[pos] == raw)

    def to_meta(self) -> dict:
        return {"known": self.known.tolist(), "buckets": self.buckets}

    @classmethod
    def from_meta(cls, meta: dict) -> IdMap:
        known = meta["known"]
        return cls(known if known else np.zeros(0, np.int64), meta["buckets"])


def stable_hash(tokens, buckets: int) -> np.ndarray:
    """crc32(token) % buckets + 1 for an array of strings: the same on every run and machine."""
    unique, inverse = np.unique(np.asarray(tokens, str), return_inverse=True)
    codes = np.array([zlib.crc32(t.encode()) % buckets + 1 for t in unique], np.int64)
    return codes[inverse].reshape(np.shape(tokens)).astype(np.int32)


def numeric_codes(values) -> np.ndarray:
    """A numeric side feature as categories: v -> floor(log(v)^2) for v > 2, else floor(v), as
    Criteo's winners bucketed counts (``tsvfile.py`` does the same to integer columns)."""
    v = np.asarray(values, np.float64)
    big = v > 2
    out = np.floor(v)
    out[big] = np.floor(np.log(v[big]) ** 2)
    return out.astype(np.int64)


def ctr_features(meta: dict, user_raw, item_raw, genres: dict, side: dict | None = None) -> np.ndarray:
    """(N, 4 + S) rows into one shared embedding table: user, item, first and second genre, then
    the side features of ``meta["side"]`` (``side``: their raw values per row, by column name)."""
    users, items = IdMap.from_meta(meta["users"]), IdMap.from_meta(meta["items"])
    vocab = {g: i + 1 for i, g in enumerate(meta["genres"])}
    unique, inverse = np.unique(np.asarray(item_raw), return_inverse=True)
    pairs = np.zeros((len(unique), 2), np.int64)
    for row, item in enumerate(unique.tolist()):
        for slot, genre in enumerate(genres.get(item, [])[:2]):
            pairs[row, slot] = vocab.get(genre, 0)
    o = meta["offsets"]
    columns = [o[0] + users.encode(user_raw), o[1] + items.encode(item_raw),
               o[2] + pairs[inverse, 0], o[2] + pairs[inverse, 1]]
    for feature in meta.get("side", []):  # categorical: its value; numeric: its bucket (numeric_codes)
        values = side[feature["name"]]
        codes = numeric_codes(values) if feature["numeric"] else values
        columns.append(feature["offset"] + IdMap.from_meta(feature["ids"]).encode(codes))
    return np.stack(columns, axis=1).astype(np.int32)
