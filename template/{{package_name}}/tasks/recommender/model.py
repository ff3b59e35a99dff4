"""Models over sparse ids: NeuMF and a two-tower model score (user, item) pairs (top-K);
DeepFM scores rows of categorical features (CTR). All return logits.

Embedding row 0 of every table is the "unknown id" row (see ids.py). The embedding
tables are dense ``nn.Embedding`` parameters by default. ``model.sparse: true`` makes them
``SparseEmbedding``: the gradient of a table is then sparse (only the rows in the batch), which
with ``optim.name: lazy_adam`` makes big tables much cheaper to train.
"""

from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import Normal, initializer


def mlp(width: int, hidden: list[int], dropout: float, last_relu: bool = True) -> tuple[nn.SequentialCell, int]:
    layers = []
    for n, size in enumerate(hidden):
        layers.append(nn.Dense(width, size))
        if last_relu or n < len(hidden) - 1:
            layers += [nn.ReLU()] + ([nn.Dropout(p=dropout)] if dropout else [])
        width = size
    return nn.SequentialCell(layers) if layers else nn.SequentialCell([nn.Identity()]), width


def embedding(rows: int, dim: int, sparse: bool, init="normal") -> nn.Cell:
    """(B, ...) int32 ids -> (B, ..., dim) vectors, from a dense or a sparse-gradient table."""
    if sparse:
        return SparseEmbedding(rows, dim, init)
    return nn.Embedding(rows, dim, embedding_table=init)


class SparseEmbedding(nn.Cell):
    """A table whose gradient is sparse (a RowTensor of the batch's rows): what
    ``nn.EmbeddingLookup(sparse=True)`` computed (deprecated, "removed after 2.9.0"), with its
    parameter name, so checkpoints load either way. The lookup and lazy Adam's update run where the
    runtime does: on CPU (in host memory) as the EmbeddingLookup kernel, the only sparse one CPU has,
    elsewhere as SparseGatherV2. Build it after the device is set."""

    def __init__(self, rows: int, dim: int, init="normal"):
        super().__init__()
        self.embedding_table = ms.Parameter(initializer(init, (rows, dim), ms.float32), name="embedding_table")
        on_cpu = ms.get_current_device().device_target == "CPU"
        self.gather = ops.EmbeddingLookup().set_device("CPU") if on_cpu else ops.SparseGatherV2()

    def construct(self, ids):  # (B, ...) int32 -> (B, ..., dim)
        return self.gather(self.embedding_table, ids, 0)  # 0: EmbeddingLookup's offset, SparseGatherV2's axis


class NeuMF(nn.Cell):
    """He et al. 2017: a GMF branch (element-wise product of embeddings) beside an MLP branch
    (concatenated embeddings through an MLP); a linear layer over both gives the logit."""

    def __init__(self, users: int, items: int, dim: int, hidden: list[int], dropout: float = 0.0,
                 sparse: bool = False):
        super().__init__()
        self.gmf_user, self.gmf_item = embedding(users, dim, sparse), embedding(items, dim, sparse)
        self.mlp_user, self.mlp_item = embedding(users, dim, sparse), embedding(items, dim, sparse)
        self.mlp, width = mlp(2 * dim, hidden, dropout)
        self.head = nn.Dense(dim + width, 1)

    def construct(self, user, item):  # (B,) int32, (B,) int32 -> (B,) logits
        gmf = self.gmf_user(user) * self.gmf_item(item)  # (B, D)
        deep = self.mlp(ops.cat((self.mlp_user(user), self.mlp_item(item)), -1))  # (B, H)
        return self.head(ops.cat((gmf, deep), -1)).squeeze(-1).astype(ms.float32)  # fp32 under AMP too


class TwoTower(nn.Cell):
    """A user tower and an item tower; the logit is the dot product of their outputs plus an
    item bias, so item vectors can be precomputed and searched with a vector index. Each
    tower is residual (embedding + MLP(embedding)): a plain MLP tower collapsed to a
    user-independent output here and ranked no better than popularity. Dot products learn
    slowly at NeuMF's rate: use optim.lr ~0.01."""

    def __init__(self, users: int, items: int, dim: int, hidden: list[int], dropout: float = 0.0,
                 sparse: bool = False):
        super().__init__()
        self.user_embed = embedding(users, dim, sparse, Normal(0.1))
        self.item_embed = embedding(items, dim, sparse, Normal(0.1))
        self.user_tower, _ = mlp(dim, hidden + [dim], dropout, last_relu=False)
        self.item_tower, _ = mlp(dim, hidden + [dim], dropout, last_relu=False)
        self.item_bias = embedding(items, 1, sparse, "zeros")

    def construct(self, user, item):  # (B,), (B,) -> (B,)
        eu, ev = self.user_embed(user), self.item_embed(item)  # (B, D)
        u, v = eu + self.user_tower(eu), ev + self.item_tower(ev)  # (B, D)
        return ((u * v).sum(-1) + self.item_bias(item).squeeze(-1)).astype(ms.float32)  # fp32 under AMP too


class DeepFM(nn.Cell):
    """Guo et al. 2017: first-order weights + factorisation-machine pairwise interactions +
    an MLP, all over one shared embedding table indexed by (field offset + value)."""

    def __init__(self, rows: int, fields: int, dim: int, hidden: list[int], dropout: float = 0.0,
                 sparse: bool = False):
        super().__init__()
        self.embed = embedding(rows, dim, sparse)
        self.linear = embedding(rows, 1, sparse, "zeros")
        self.bias = ms.Parameter(ops.zeros(1, ms.float32), name="bias")
        self.deep, width = mlp(fields * dim, hidden, dropout)
        self.out = nn.Dense(width, 1)

    def construct(self, features):  # (B, F) int32 -> (B,) logits
        e = self.embed(features)  # (B, F, D)
        first = self.linear(features).sum((1, 2))  # (B,)
        summed = e.sum(1)
        pairwise = 0.5 * (summed * summed - (e * e).sum(1)).sum(-1)  # (B,): sum over field pairs of <e_i, e_j>
        deep = self.out(self.deep(ops.flatten(e))).squeeze(-1)  # (B,)
        return (self.bias + first + pairwise + deep).astype(ms.float32)  # fp32 under AMP too


def bce_with_logits(logits, label):
    """Mean binary cross-entropy, written in the overflow-safe form (and in fp32 under AMP)."""
    x, y = logits.astype(ms.float32), label.astype(ms.float32)
    return (ops.relu(x) - x * y + ops.log1p(ops.exp(-ops.abs(x)))).mean()


class PairLoss(nn.Cell):
    def __init__(self, network: nn.Cell):
        super().__init__()
        self.network = network

    def construct(self, user, item, label):
        return bce_with_logits(self.network(user, item), label)


class FeatureLoss(nn.Cell):
    def __init__(self, network: nn.Cell):
        super().__init__()
        self.network = network

    def construct(self, features, label):
        return bce_with_logits(self.network(features), label)
