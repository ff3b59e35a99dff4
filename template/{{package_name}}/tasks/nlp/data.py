"""Text in, token windows out: the tokenizer, the token file and the train/eval split.

The corpus (``corpus.py``) is streamed in chunks through the tokenizer (``tokenizer.py``) into
a token file cached by content (``tokenfile.py``): the first run tokenises, later runs with the
same text and tokenizer start at once. The last ``data.eval_fraction`` of the tokens is held
out. Windows of ``model.block_size + 1`` tokens are read from the memmap by index.
The tokenizer is saved in ``Data.meta``, so every checkpoint carries what evaluation and
``generate.py`` need.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...engine.errors import DataError
from ...engine.task import Data
from .corpus import Corpus
from .tokenfile import TokenFile, cache_key, cached_text, token_file
from .tokenizer import Tokenizer

BPE_TRAIN_BYTES = 100 << 20  # a BPE learns its merges from at most the first 100 MB of the corpus
INHERITED = ("chat_template", "special_tokens", "generation", "hf_config")  # task meta a fine-tuned model keeps

__all__ = ["Tokenizer", "Windows", "blocks", "load_data", "load_eval_data"]  # Tokenizer: for generate.py


class Windows:
    """Windows of ``block_size + 1`` token ids (inputs, and the same shifted by one as targets),
    ``block_size`` apart, over tokens [start, stop) of a token file: window i of an epoch starts
    at token ``start + shift + i * block_size`` (a ``TrainSource``). Each token is a target at
    most once per epoch. With a ``seed`` (training) the ``shift`` in [0, block_size) is drawn
    from (seed, epoch), so each epoch cuts the text at other places; without one (evaluation)
    it is 0 and the windows are fixed."""

    def __init__(self, tokens: TokenFile, start: int, stop: int, block_size: int, seed: int | None = None):
        self.file, self.start, self.block_size, self.seed = tokens, start, block_size, seed
        usable = stop - start - 1  # tokens that can start a window's input
        self.n = max(0, usable // block_size)
        if seed is not None and (usable - block_size + 1) // block_size >= 1:
            self.n = (usable - block_size + 1) // block_size  # one window less: room for any shift
        self.max_shift = 0 if seed is None else min(block_size - 1, usable - self.n * block_size)

    def __len__(self) -> int:
        return self.n

    def shift(self, epoch: int) -> int:
        return int(np.random.default_rng([self.seed or 0, epoch]).integers(self.max_shift + 1))

    def take(self, indices: np.ndarray, epoch: int = 0) -> tuple[np.ndarray]:
        """(len(indices), block_size + 1) int32 windows. The memmap is opened per call (as
        nanoGPT does): pages read for earlier batches are not kept mapped by this process."""
        offsets = self.start + self.shift(epoch) + np.asarray(indices, np.int64)[:, None] * self.block_size
        return (self.file.tokens()[offsets + np.arange(self.block_size + 1)].astype(np.int32),)


def load_data(cfg) -> Data:
    """Fit (or load) the tokenizer, tokenise the corpus once, split it: ``Data.train`` windows
    of the first tokens, ``Data.eval`` windows of the last ``data.eval_fraction``."""
    corpus, cache = Corpus(cfg.data.path), cache_dir(cfg)
    data = split(cfg, corpus, fit_tokenizer(cfg, corpus, cache), cache)
    if cfg.model.pretrained:  # an imported model's chat template, special tokens, generation defaults
        saved = pretrained_meta(cfg)
        data.meta.update({key: saved[key] for key in INHERITED if key in saved})
    return data


def load_eval_data(cfg, meta: dict) -> Data:
    """``eval.py``: the same split of ``data.path``, tokenised with the checkpoint's tokenizer."""
    corpus = Corpus(cfg.data.path)
    return split(cfg, corpus, Tokenizer.from_meta(meta), cache_dir(cfg))


def cache_dir(cfg) -> Path:
    """``data.cache_dir``, by default ``.cache`` inside ``output.dir`` (beside the runs)."""
    return Path(cfg.data.cache_dir or Path(cfg.output.dir) / ".cache").expanduser()


def fit_tokenizer(cfg, corpus: Corpus, cache: Path) -> Tokenizer:
    """``model.pretrained``'s tokenizer, ``data.tokenizer_file``, or the tokenizer fitted to the
    corpus (a ``char`` alphabet, a trained BPE), cached by the corpus digest and the settings
    that shape it."""
    d = cfg.data
    if cfg.model.pretrained:
        return pretrained_tokenizer(cfg)
    if d.tokenizer_file:
        return Tokenizer.from_file(d.tokenizer_file)
    if d.tokenizer == "byte":
        return Tokenizer("byte")
    settings = [d.tokenizer] + ([str(d.vocab_size), str(BPE_TRAIN_BYTES)] if d.tokenizer == "bpe" else [])
    path = cache / f"tokenizer-{cache_key(corpus.digest(), *settings)}.json"

    def fit() -> str:
        fitted = Tokenizer.fit(corpus.chunks(max_bytes=BPE_TRAIN_BYTES if d.tokenizer == "bpe" else None),
                               d.tokenizer, d.vocab_size)
        return json.dumps(fitted.to_meta(), ensure_ascii=False)

    return Tokenizer.from_meta({"tokenizer": json.loads(cached_text(path, fit))})


def pretrained_meta(cfg) -> dict:
    """The task meta of ``model.pretrained``."""
    from ...engine.checkpoint import read_meta  # imports MindSpore (load_data runs after the runtime setup)

    return read_meta(cfg.model.pretrained)["task_meta"]


def pretrained_tokenizer(cfg) -> Tokenizer:
    """The tokenizer ``model.pretrained`` was trained with: the data must use it as it is."""
    where = f"model.pretrained={cfg.model.pretrained}"
    saved = Tokenizer.from_meta(pretrained_meta(cfg))
    if cfg.data.tokenizer != saved.kind:
        raise DataError(f"data.tokenizer={cfg.data.tokenizer}: {where} uses a {saved.kind} tokenizer; "
                        f"set data.tokenizer={saved.kind}")
    if cfg.data.tokenizer_file:
        given = Tokenizer.from_file(cfg.data.tokenizer_file)
        if given.to_meta() != saved.to_meta():
            raise DataError(f"data.tokenizer_file={cfg.data.tokenizer_file!r} ({given.vocab_size} tokens) is not the "
                            f"tokenizer {where} was trained with ({saved.vocab_size} tokens)")
    return saved


def split(cfg, corpus: Corpus, tokenizer: Tokenizer, cache: Path) -> Data:
    tokens = token_file(corpus, tokenizer, cache)
    block, n = cfg.model.block_size, tokens.n
    n_train = n - int(n * cfg.data.eval_fraction)
    if n < block + 1:
        raise DataError(f"{corpus.source}: {n} tokens is shorter than one block of "
                        f"model.block_size + 1 = {block + 1}; give more text or lower model.block_size")
    if min(n_train, n - n_train) < block + 1:
        raise DataError(f"{corpus.source}: too short to hold out data.eval_fraction={cfg.data.eval_fraction} and "
                        f"keep a block of {block + 1} tokens on each side ({n_train} train, {n - n_train} eval "
                        "tokens); give more text or lower model.block_size")
    meta = {"tokenizer": tokenizer.to_meta(), "source": corpus.source,
            # Token counts of the training split: the unigram baseline, and generate.py's first token.
            "unigram_counts": tokens.counts(n_train, tokenizer.vocab_size).tolist()}
    return Data(train=Windows(tokens, 0, n_train, block, seed=cfg.seed), eval=Windows(tokens, n_train, n, block),
                meta=meta)


def blocks(ids: np.ndarray, block_size: int) -> np.ndarray:
    """Consecutive windows of ``block_size + 1`` tokens of an in-memory ``ids`` (what ``Windows``
    reads from the token file): (N, block_size + 1)."""
    n = (len(ids) - 1) // block_size
    index = np.arange(n)[:, None] * block_size + np.arange(block_size + 1)
    return ids[index].astype(np.int32)
