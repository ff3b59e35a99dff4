"""Config sections of the recommender task (``data:`` and ``model:`` in config.yaml)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from ...engine.schema import Config, DataSection, Optim, Section


class DataConfig(DataSection):
    source: Literal["synthetic", "movielens", "files"] = "synthetic"
    # files: any interaction table (CSV/TSV/Parquet), ratings.csv/ratings.dat/u.data or a folder with one
    # [+ titles], or (ctr) a label-first .tsv file
    path: str | None = None
    # The table's columns: {user: <name>, item: <name>, rating: <name>, timestamp: <name>} (rating and
    # timestamp optional). null: MovieLens layouts, else the usual names (user/user_id, item/item_id, ...).
    columns: dict[str, str] | None = None
    separator: str | None = None  # null: the one of , TAB ; | the header holds most often; "\t" or tab: TAB
    numeric: list[str] = []  # other columns read as numbers (CTR side features, bucketed); the rest: categories
    ignore: list[str] = []  # other columns left out (top-K leaves out all of them)
    mode: Literal["topk", "ctr"] = "topk"  # topk: implicit feedback, rank items; ctr: predict rating >= like_threshold
    negatives: int = Field(4, gt=0)  # topk: sampled negatives per training positive
    negative_passes: int = Field(3, gt=0)  # topk: passes over the positives per epoch, each with fresh negatives
    id_dropout: float = Field(0.02, ge=0, lt=1)  # share of training ids replaced by 0 (unknown) to train that row
    hash_buckets: int | None = Field(None, gt=0)  # null: vocabulary (unseen -> 0); N: crc32(id) % N + 1
    eval_negatives: int = Field(99, gt=0)  # topk: sampled negatives ranked against each held-out item
    like_threshold: float = 4.0  # ctr: ratings >= this are positives
    eval_fraction: float = Field(0.2, gt=0, lt=1)  # ctr: latest share of each user's ratings (TSV: last rows) held out
    drop_short_users: bool = False  # topk: users with one interaction are an error unless dropped
    synthetic_users: int = Field(1000, ge=2)
    synthetic_items: int = Field(800, ge=20)
    synthetic_per_user: int = Field(30, ge=2)  # mean interactions per user


class ModelConfig(Section):
    kind: Literal["neumf", "two_tower", "deepfm"] = "neumf"  # neumf/two_tower: data.mode topk; deepfm: ctr
    embed_dim: int = Field(16, gt=0)
    hidden: list[int] = [64, 32, 16]  # MLP widths (NeuMF MLP branch, each tower, DeepFM deep part)
    dropout: float = Field(0.0, ge=0, lt=1)
    # Sparse-gradient tables (model.SparseEmbedding) for big id spaces; use with optim.name=lazy_adam.
    # The engine then refuses accumulation, AMP, clipping and msrun (they need dense gradients).
    sparse: bool = False
    # Row-slice each table across devices (tables bigger than one device): refused for now, see
    # task.check_sharding and the README ("Tables bigger than one device").
    shard_embeddings: bool = False


class OptimConfig(Optim):
    # lazy_adam: Adam that updates only the embedding rows a sparse gradient touches (model.sparse)
    OPTIMIZERS: ClassVar[tuple[str, ...]] = (*Optim.OPTIMIZERS, "lazy_adam")


class TaskConfig(Config):
    optim: OptimConfig = OptimConfig()
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()

    @model_validator(mode="after")
    def _fits(self):
        d, kind = self.data, self.model.kind
        expected = {"topk": ("neumf", "two_tower"), "ctr": ("deepfm",)}[d.mode]
        if kind not in expected:
            raise ValueError(f"model.kind={kind} does not fit data.mode={d.mode}; use {' or '.join(expected)}")
        if d.columns is not None:
            unknown = [key for key in d.columns if key not in ("user", "item", "rating", "timestamp")]
            if unknown or not {"user", "item"} <= set(d.columns):
                raise ValueError(f"data.columns={d.columns}: keys are user, item (required), rating, timestamp")
        if d.separator is not None and len(d.separator) != 1 and d.separator not in ("\\t", "tab"):
            raise ValueError(f"data.separator={d.separator!r}: one character (',' or '\\t' ...), or null to sniff")
        if d.source != "files" and d.path is not None:
            raise ValueError(f"data.path={d.path!r} is read only with data.source=files (now {d.source})")
        return self
