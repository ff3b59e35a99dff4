"""The nlp task as the engine sees it: data, model + loss, evaluation, exports."""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

from ...engine import checkpoint
from ...engine.arrays import budget, compiled
from ...engine.errors import CheckpointError, ConfigError
from ...engine.task import Comm, Data, Model, Task
from .config import defined_by
from .data import Tokenizer
from .data.load import load_data, load_eval_data
from .hf import exporter
from .loss import LanguageModelLoss, TokenLosses
from .models import lora
from .models.decoder import FLOAT32_CELLS, Llama
from .models.gpt import GPT


def gpt(vocab: int, m) -> GPT:
    return GPT(vocab, m.block_size, m.n_layer, m.n_head, m.d_model, m.mlp_ratio, m.dropout, m.tie_embeddings, m.bias)


ARCHS = {"gpt": gpt, "gpt2": gpt, "llama": Llama}  # model.arch -> (embedding rows, model config) -> network


def embedding_rows(meta: dict, m) -> int:
    """The embedding's rows: the tokenizer's vocabulary, or model.embedding_rows (padded) when set."""
    tokens = Tokenizer.from_meta(meta).vocab_size
    if m.embedding_rows is not None and m.embedding_rows < tokens:
        raise ConfigError(f"model.embedding_rows={m.embedding_rows} is smaller than the tokenizer's "
                          f"{tokens} tokens")
    return m.embedding_rows or tokens


def build_model(cfg, meta: dict, comm: Comm) -> Model:
    network = ARCHS[cfg.model.arch](embedding_rows(meta, cfg.model), cfg.model)
    if cfg.model.lora.rank:
        lora.freeze_base(network)  # the optimizer is built from trainable_params(): the adapters alone
    # loss.normalize: token sums the targets of chat data (text: every position, a mean is the same)
    summed = cfg.loss.normalize == "token" and meta.get("format") in ("chat", "instruct")
    return Model(network=network, loss=LanguageModelLoss(network, summed), float32_cells=FLOAT32_CELLS,
                 layer_id=network.layer_id, num_layers=network.num_layers)


def warm_start(network: nn.Cell, cfg) -> None:
    """``model.pretrained``: start from every weight of a checkpoint of this project (e.g. GPT-2
    imported by convert_weights.py, to continue training on your text). Its tokenizer comes
    with it: ``data.fit_tokenizer`` takes the checkpoint's."""
    if not cfg.model.pretrained:
        return
    params, meta = checkpoint.read(cfg.model.pretrained)
    saved = meta["config"]["model"]
    if not cfg.model.lora.rank and any(lora.is_adapter(name) for name in params):
        raise CheckpointError(f"model.pretrained={cfg.model.pretrained} has LoRA adapters: set model.lora as it "
                              f"was trained (rank {saved.get('lora', {}).get('rank')})")
    model = cfg.model.model_dump(mode="json")
    for key, value in defined_by(saved).items():  # a config built without load_config (which takes them)
        ours = model["lora"][key[5:]] if key.startswith("lora.") else model[key]
        if value != ours and not (key == "embedding_rows" and cfg.data.add_special_tokens):  # grown: below
            raise CheckpointError(f"model.pretrained={cfg.model.pretrained} has model.{key}={value!r}, "
                                  f"this config {ours!r}: set model.{key}={value}")
    if cfg.model.lora.rank:  # adapters start fresh (B = 0: the base model exactly) unless the file has them
        params = {**{p.name: p for p in network.get_parameters() if lora.is_adapter(p.name)}, **params}
    if cfg.data.add_special_tokens:
        params = with_new_rows(params, network)
    try:
        checkpoint.restore(params, network)
    except CheckpointError as exc:
        raise CheckpointError(f"model.pretrained={cfg.model.pretrained}: {exc}") from None


def with_new_rows(params: dict, network: nn.Cell) -> dict:
    """``data.add_special_tokens``: the checkpoint's embedding (and head) grown to the network's
    rows, each new row the mean of the old ones (transformers' ``resize_token_embeddings``: their
    mean, it adds a 1e-5-scaled noise), so a new token starts as an average one."""
    grown = dict(params)
    for p in network.get_parameters():
        old = params.get(p.name)
        if old is not None and old.shape[0] < p.shape[0] and old.shape[1:] == p.shape[1:]:
            value = old.asnumpy()
            mean = np.repeat(value.mean(0, keepdims=True), p.shape[0] - value.shape[0], axis=0)
            grown[p.name] = Tensor(np.concatenate([value, mean]))
    return grown


def evaluate(network: nn.Cell, data: Data, cfg) -> dict[str, float]:
    """Loss and perplexity per token over the held-out windows of the eval budget (windows of
    ``model.block_size`` tokens, ``block_size`` apart, read from the token file; chat data:
    its examples, scored on the assistant's tokens only), beside the
    perplexity of the unigram baseline (training-split token counts) on the same tokens."""
    block = cfg.model.block_size
    windows = budget(len(data.eval), cfg.eval.max_examples, cfg.seed)
    # Compiled once per network (several times faster than eager); batches of one shape (the
    # last one zero-padded) compile once. Log-softmax and gather run on the device.
    token_losses = compiled(network, cfg.train.jit, head=TokenLosses)
    size = cfg.train.batch_size
    total, targets = 0.0, []
    for i in range(0, len(windows), size):
        batch, *mask = data.eval.take(windows[i:i + size])  # (b, block + 1); chat: the targets' mask (b, block)
        inputs, wanted = np.zeros((2, size, block), dtype=np.int32)
        inputs[:len(batch)], wanted[:len(batch)] = batch[:, :-1], batch[:, 1:]
        losses = token_losses(Tensor(inputs), Tensor(wanted)).asnumpy()[:len(batch)]  # (b, T) float32
        scored = mask[0] > 0 if mask else np.ones(losses.shape, bool)  # chat: the assistant's tokens only
        total += losses[scored].astype(np.float64).sum()
        targets.append(batch[:, 1:][scored])
    targets = np.concatenate(targets)
    loss = total / max(targets.size, 1)
    counts = np.asarray(data.meta["unigram_counts"], dtype=np.float64) + 1.0  # add-one: no zero probability
    unigram_loss = -np.log(counts[targets] / counts.sum()).mean()
    return {"loss": float(loss), "perplexity": perplexity(loss), "unigram_ppl": perplexity(unigram_loss),
            "examples": len(windows)}


def perplexity(loss: float) -> float:
    """exp(loss), inf where that overflows a float (a loss above ~709 nats: a diverged model)."""
    return math.inf if loss >= 709.0 else math.exp(loss)


def exports(network: nn.Cell, meta: dict, cfg) -> dict:
    """The LM with a fixed sequence length of ``model.block_size`` (the batch axis stays dynamic):
    tokens (B, block_size) int32 -> logits (B, block_size, vocab). Shorter contexts: pad on the
    right and read the logits at the last real position (causal attention ignores the padding)."""
    if cfg.model.arch == "llama" and tuple(int(x) for x in ms.__version__.split(".")[:2]) < (2, 10):
        raise ConfigError(f"exporting a llama needs MindSpore 2.10 (MindSpore {ms.__version__} cannot load the "
                          'graph back: MatMul shape error); pip install "mindspore>=2.10,<2.11"')
    lora.merge(network)  # the graph runs W + BA alpha / rank as one matrix
    vocab = Tokenizer.from_meta(meta).vocab_size
    sample = np.random.default_rng(0).integers(0, vocab, size=(1, cfg.model.block_size), dtype=np.int32)
    return {"lm": (network, (Tensor(sample),))}


def deploy_meta(meta: dict, cfg) -> dict:
    """The tokenizer is all a deployed LM needs (the unigram counts only serve evaluation)."""
    extra = {key: meta[key] for key in ("chat_template", "special_tokens") if meta.get(key)}  # imported llama
    return {"tokenizer": meta["tokenizer"], "block_size": cfg.model.block_size, **extra}


TASK = Task(name="nlp", load_data=load_data, build_model=build_model, evaluate=evaluate,
            monitor="loss", mode="min", metrics=("loss", "perplexity", "unigram_ppl"),
            exports=exports, deploy_meta=deploy_meta,
            fixed_data=("tokenizer", "tokenizer_file", "vocab_size"), load_eval_data=load_eval_data,
            warm_start=warm_start, folder_formats={"hf": exporter.write, "peft": exporter.write_adapters},
            outputs={"lm": ("logits", "next-token logits at every position (pad on the right; read the last real "
                                      "position)")})
