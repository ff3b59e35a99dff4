"""Two towers into one space (CLIP-style) and the symmetric contrastive loss.

Image tower (``model.image_tower``): an MLP on the pixels (default; fastest on CPU for 8x8
digits), a small CNN, or one of the registry's backbones (``small_cnn``, ``resnet18/34/50``,
``models/backbones.py``) followed by a linear projection.
Text tower (``model.text_tower``): word embeddings mean-pooled over the caption's words, then
an MLP (``bag``); or the language model's Transformer blocks (``models/transformer.py``), their
outputs mean-pooled over the caption's words (``transformer``).
CLIP's own towers (``vit`` image tower, ``clip`` text tower, BPE tokenizer) are in ``clip.py``.
Both end in a linear projection to ``embed_dim`` and are L2-normalised, so the similarity
of an image and a caption is a cosine in [-1, 1]; the loss multiplies it by a learned
scale exp(logit_scale), kept in [1, 100] as in CLIP: ``logit_scale`` is clamped to [0, ln 100]
after every update (``ClampLogitScale``), never in the forward pass, where a clamp would zero
its gradient once past the bound and it could never come back.
"""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import Normal, initializer

from ...engine.task import Comm
from ...models.backbones import Options, build_backbone
from ...models.transformer import LN_EPS, Block
from .clip import CLIPTextTower, ViTImageTower

MAX_LOGIT_SCALE = math.log(100.0)  # temperature never below 0.01


def l2_normalise(x):
    return x / ops.sqrt(ops.sum(x * x, dim=-1, keepdim=True) + 1e-12)


def mlp(sizes: list[int]) -> list[nn.Cell]:
    """Dense layers with SiLU between them (none after the last). Smooth rather than ReLU: with
    ReLU, a unit whose input sits within rounding of 0 switches its whole gradient on or off,
    so float noise (a different batch split across devices) could change an update visibly."""
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Dense(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(nn.SiLU())
    return layers


class MLPImageTower(nn.Cell):
    def __init__(self, channels: int, size: int, widths: list[int], embed_dim: int):
        super().__init__()
        self.layers = nn.SequentialCell([nn.Flatten(), *mlp([channels * size * size, *widths, embed_dim])])

    def construct(self, image):  # (B, C, H, W) -> (B, E)
        return self.layers(image)


class CNNImageTower(nn.Cell):
    """3x3 conv + SiLU stages (every stage after the first halves H and W), global average pooling."""

    def __init__(self, channels: int, widths: list[int], embed_dim: int):
        super().__init__()
        layers, in_ch = [], channels
        for stage, width in enumerate(widths):
            layers += [nn.Conv2d(in_ch, width, 3, stride=1 if stage == 0 else 2, pad_mode="same", has_bias=True),
                       nn.SiLU()]
            in_ch = width
        self.convs = nn.SequentialCell(layers)
        self.head = nn.Dense(in_ch, embed_dim)

    def construct(self, image):  # (B, C, H, W) -> (B, E)
        return self.head(ops.mean(self.convs(image), axis=(2, 3)))


class BackboneImageTower(nn.Cell):
    """A vision backbone ((B, C, H, W) -> (B, F) features) and a projection to the shared space."""

    def __init__(self, backbone: nn.Cell, embed_dim: int):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Dense(backbone.out_features, embed_dim)

    def construct(self, image):  # (B, C, H, W) -> (B, E)
        return self.head(self.backbone(image))


def padding_mask(tokens):  # (B, L) int32, 0 = padding -> (B, L, 1) float32, 1 at real words
    # A reshape with -1 as the batch, not expand_dims: the ONNX exporter writes that as a reshape
    # to the concrete shape, and the exported text encoder would take one batch size only.
    return (tokens != 0).astype(ms.float32).reshape(-1, tokens.shape[1], 1)


def masked_mean(x, mask):  # (B, L, W), (B, L, 1) -> (B, W): the mean over real words (0 for none)
    return ops.sum(x * mask, dim=1) / ops.clamp(ops.sum(mask, dim=1), 1.0, None)


class TransformerTextTower(nn.Cell):
    """The LM's pre-LayerNorm blocks over word embeddings + learned positions, mean-pooled over
    the real words. Captions are padded on the right and the attention is causal, so no real
    word ever attends to padding: no extra mask is needed."""

    def __init__(self, vocab_size: int, max_tokens: int, width: int, n_layer: int, n_head: int, embed_dim: int):
        super().__init__()
        # N(0, 1) as the bag tower: at GPT's N(0, 0.02) the captions start out nearly alike, and
        # a batch of 8 captions took 8 steps to fall 10 % instead of 65 % (measured).
        self.embedding = nn.Embedding(vocab_size, width, embedding_table=Normal(1.0), padding_idx=0)
        self.position_embedding = Parameter(initializer(Normal(0.02), (max_tokens, width)), name="position_embedding")
        proj_std = 0.02 / math.sqrt(2 * n_layer)
        self.blocks = nn.SequentialCell([Block(width, n_head, max_tokens, 4, 0.0, proj_std, True)
                                         for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm((width,), epsilon=LN_EPS)
        self.head = nn.Dense(width, embed_dim)

    def construct(self, tokens):  # (B, L) int32 word ids, 0 = padding -> (B, E)
        x = self.embedding(tokens) + self.position_embedding[:tokens.shape[1]]  # (B, L, W)
        return self.head(masked_mean(self.ln_f(self.blocks(x)), padding_mask(tokens)))


class TextTower(nn.Cell):
    def __init__(self, vocab_size: int, width: int, hidden: int, embed_dim: int):
        super().__init__()
        # N(0, 1) as PyTorch: MindSpore's default N(0, 0.01) makes every caption start out as
        # the same vector (the next layer's bias), and training first has to undo that collapse.
        self.embedding = nn.Embedding(vocab_size, width, embedding_table=Normal(1.0), padding_idx=0)
        self.layers = nn.SequentialCell(mlp([width, hidden, embed_dim]))

    def construct(self, tokens):  # (B, L) int32 word ids, 0 = padding -> (B, E)
        return self.layers(masked_mean(self.embedding(tokens), padding_mask(tokens)))


class Encoder(nn.Cell):
    """A tower followed by L2 normalisation: what each exported encoder computes."""

    def __init__(self, tower: nn.Cell):
        super().__init__()
        self.tower = tower

    def construct(self, x):
        return l2_normalise(self.tower(x)).astype(ms.float32)  # float32 under mixed precision too


class DualEncoder(nn.Cell):
    def __init__(self, image_tower: nn.Cell, text_tower: nn.Cell, init_temperature: float):
        super().__init__()
        self.image_encoder = Encoder(image_tower)
        self.text_encoder = Encoder(text_tower)
        self.logit_scale = Parameter(Tensor(math.log(1.0 / init_temperature), ms.float32), name="logit_scale")

    def scale(self):
        """exp(logit_scale): in [1, 100] (``ClampLogitScale`` runs after every update)."""
        return ops.exp(self.logit_scale)

    def construct(self, image, tokens):  # -> (B, E) image and (B, E) text embeddings
        return self.image_encoder(image), self.text_encoder(tokens)


class ClampLogitScale(nn.Cell):
    """The update's constraint (``Model.constrain``): ``logit_scale`` back into [0, ln 100]."""

    def __init__(self, network: DualEncoder):
        super().__init__(auto_prefix=False)
        self.logit_scale = network.logit_scale  # the same Parameter (and name)
        self.upper = MAX_LOGIT_SCALE

    def construct(self):
        return self.logit_scale.copy_(ops.clamp(self.logit_scale, 0.0, self.upper))


def build_image_tower(m, channels: int, image_size: int) -> nn.Cell:
    if m.image_tower == "vit":
        return ViTImageTower(m, channels, image_size)
    if m.image_tower == "mlp":
        return MLPImageTower(channels, image_size, m.image_widths, m.embed_dim)
    if m.image_tower == "cnn":
        return CNNImageTower(channels, m.image_widths, m.embed_dim)
    # small_cnn (GroupNorm: accumulation and data parallelism stay exact) or a ResNet, from the registry
    options = Options(channels, image_size, fast_conv=m.fast_conv, widths=tuple(m.image_widths))
    return BackboneImageTower(build_backbone(m.image_tower, options), m.embed_dim)


def build_text_tower(m, meta: dict) -> nn.Cell:
    if m.text_tower == "clip":  # the imported tokenizer's vocabulary; its context = data.max_tokens
        return CLIPTextTower(meta["vocab_size"], meta["max_tokens"], m.text_width, m.text_layers, m.text_heads,
                             m.embed_dim, meta["eos_id"])
    vocab_size = len(meta["vocab"])
    if m.text_tower == "transformer":  # positions for captions of up to data.max_tokens words
        return TransformerTextTower(vocab_size, meta["max_tokens"], m.text_width, m.text_layers, m.text_heads,
                                    m.embed_dim)
    return TextTower(vocab_size, m.text_width, m.text_hidden, m.embed_dim)


def build_network(cfg, meta: dict) -> DualEncoder:
    m = cfg.model
    image = build_image_tower(m, meta["channels"], meta["image_size"])
    text = build_text_tower(m, meta)
    return DualEncoder(image, text, m.init_temperature)


def contrastive_loss(image, text, image_all, text_all, labels, scale):
    """Symmetric InfoNCE for this process's b pairs against all N pairs of the global batch.

    image, text: (b, E) local embeddings; image_all, text_all: (N, E); labels (b,) int32:
    the row of each local pair in the global batch. Caption i is the target of image i
    among all N captions, and image i the target of caption i among all N images.

    Identical captions (ten classes in a batch of 128) get identical text embeddings, so this
    loss equals the one that counts every identical caption as a positive: no special case.
    """
    image_to_text = scale * ops.matmul(image, text_all.T)  # (b, N) logits
    text_to_image = scale * ops.matmul(text, image_all.T)
    return (ops.cross_entropy(image_to_text, labels) + ops.cross_entropy(text_to_image, labels)) / 2


class ContrastiveLoss(nn.Cell):
    """The training loss, correct under data parallelism.

    With N ranks, each rank writes its embeddings into its own slot of a zero buffer and
    sums the buffers with AllReduce (whose gradient is an AllReduce too, unlike AllGather's,
    which fails on CPU), so every rank sees the whole global batch as negatives. Each rank's
    loss is the mean over its own rows: the sum over ranks is then N times the
    single-process loss on the global batch, and the engine's mean all-reduce of the
    gradients gives exactly the single-process gradient.
    """

    def __init__(self, network: DualEncoder, comm: Comm):
        super().__init__()
        self.network = network
        self.rank, self.size = comm.rank, comm.size
        if self.size > 1:
            self.all_reduce = ops.AllReduce()
            slot = np.zeros((self.size, 1, 1), np.float32)
            slot[self.rank] = 1.0
            self.slot = Tensor(slot)  # (size, 1, 1): 1 at this rank

    def gather(self, x):  # (b, E) on every rank -> (size * b, E)
        buffer = self.all_reduce(self.slot * x.expand_dims(0))  # (size, b, E), zero outside each rank's slot
        # Interleave (row i of rank r -> global row i * size + r): the engine shards batches
        # strided, so this is exactly the row order a single process sees for the same batch,
        # and the logits match it bit for bit.
        return buffer.transpose(1, 0, 2).reshape((-1, x.shape[1]))

    def construct(self, image, tokens):
        image_emb, text_emb = self.network(image, tokens)
        # fp32 from here: under mixed precision the logits (up to +-100) and softmax stay exact
        image_emb, text_emb = image_emb.astype(ms.float32), text_emb.astype(ms.float32)
        scale = self.network.scale().astype(ms.float32)
        # int32 labels: cross_entropy rejects int64 (ops.arange's default)
        labels = ops.arange(image_emb.shape[0], dtype=ms.int32) * self.size + self.rank
        if self.size == 1:
            return contrastive_loss(image_emb, text_emb, image_emb, text_emb, labels, scale)
        return contrastive_loss(image_emb, text_emb, self.gather(image_emb), self.gather(text_emb), labels, scale)
