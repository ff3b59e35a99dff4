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
import logging
from pathlib import Path

import numpy as np

from ....engine.errors import DataError
from ....engine.task import Data
from . import conversations
from .corpus import Corpus
from .tokenfile import TokenFile, cache_key, cached_text, token_file
from .tokenizer import Tokenizer

log = logging.getLogger(__name__)
CHATML_MARKERS = ("<|im_start|>", "<|im_end|>")  # conversations.DEFAULT_TEMPLATE's
BPE_TRAIN_BYTES = 100 << 20  # a BPE learns its merges from at most the first 100 MB of the corpus
TEXT_BLOCK = 256  # model.block_size: null with model.pretrained, on plain text (at most the checkpoint's context)
INHERITED = ("chat_template", "special_tokens", "generation", "hf_config", "source_folder")  # a fine-tune keeps them

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

    def take(self, indices: np.ndarray, epoch: int = 0) -> tuple[np.ndarray, ...]:
        """(len(indices), block_size + 1) int32 windows (and for chat data the float32 mask of
        their targets, (len(indices), block_size)). The memmap is opened per call (as nanoGPT
        does): pages read for earlier batches are not kept mapped by this process."""
        offsets = self.start + self.shift(epoch) + np.asarray(indices, np.int64)[:, None] * self.block_size
        index = offsets + np.arange(self.block_size + 1)
        windows = self.file.tokens()[index].astype(np.int32)
        return (windows, self.file.mask()[index[:, 1:]].astype(np.float32)) if self.file.masked else (windows,)


def load_data(cfg) -> Data:
    """Fit (or load) the tokenizer, tokenise the corpus once, split it: ``Data.train`` windows
    of the first tokens, ``Data.eval`` windows of the last ``data.eval_fraction``. Chat and
    instruction data (a JSONL): ``load_chat``."""
    if (kind := data_format(cfg)) != "text":
        tokenizer, inherited = chat_tokenizer(cfg, kind), inherited_meta(cfg)
        if cfg.data.add_special_tokens:
            tokenizer, inherited = with_chatml_tokens(cfg, tokenizer, inherited)
        return load_chat(cfg, kind, tokenizer, inherited)
    if cfg.model.block_size is None:  # model.pretrained: a block of text, within its context
        cfg.model.block_size = min(TEXT_BLOCK, pretrained_context(cfg))
        print(f"data: model.block_size={cfg.model.block_size} (null: {TEXT_BLOCK} tokens of text, at most "
              "the context of model.pretrained)", flush=True)
    corpus, cache = Corpus(cfg.data.path), cache_dir(cfg)
    data = split(cfg, corpus, fit_tokenizer(cfg, corpus, cache), cache)
    data.meta.update(inherited_meta(cfg))
    return data


def load_eval_data(cfg, meta: dict) -> Data:
    """``eval.py``: the same split of ``data.path``, tokenised with the checkpoint's tokenizer."""
    if (kind := data_format(cfg)) != "text":
        return load_chat(cfg, kind, Tokenizer.from_meta(meta), meta)
    corpus = Corpus(cfg.data.path)
    return split(cfg, corpus, Tokenizer.from_meta(meta), cache_dir(cfg))


def data_format(cfg) -> str:
    """``data.format``, ``auto`` resolved: chat or instruct for a ``.jsonl`` file, else text."""
    if cfg.data.format != "auto":
        return cfg.data.format
    return conversations.detect(cfg.data.path) if cfg.data.path else "text"


def chat_tokenizer(cfg, kind: str) -> Tokenizer:
    """Chat data is tokenised as a model reads it: ``model.pretrained``'s tokenizer, a
    ``data.tokenizer_file``, or bytes; none is fitted to the conversations."""
    if cfg.model.pretrained:
        return pretrained_tokenizer(cfg)
    if cfg.data.tokenizer_file:
        return Tokenizer.from_file(cfg.data.tokenizer_file)
    if cfg.data.tokenizer == "byte":
        return Tokenizer("byte")
    raise DataError(f"data.format={kind} takes a model's tokenizer, not one fitted to the conversations "
                    f"(data.tokenizer={cfg.data.tokenizer}): set model.pretrained, data.tokenizer_file or "
                    "data.tokenizer=byte")


def load_chat(cfg, kind: str, tokenizer: Tokenizer, inherited: dict) -> Data:
    """Conversations (``conversations.py``) as rows of one example each (``data.packing: false``)
    or packed into windows like text, with the mask of the tokens that are loss targets. Eval:
    ``data.eval_path``, else the last ``data.eval_fraction`` of the examples."""
    d, cache = cfg.data, cache_dir(cfg)
    meta = {**inherited, "tokenizer": tokenizer.to_meta(), "format": kind}
    if cfg.model.pretrained and not meta.get("chat_template") and not d.add_special_tokens:  # said, not silent
        markers = {m: len(tokenizer.encode(m)) for m in CHATML_MARKERS}
        log.warning(f"model.pretrained={cfg.model.pretrained} has no chat template: its conversations are written "
                    f"in ChatML, whose markers are {', '.join(f'{m} ({n} tokens)' for m, n in markers.items())} "
                    "to its tokenizer; data.add_special_tokens=true makes them single new tokens (or give a "
                    "model with a template for its own format)")
    meta["chat_template"] = meta.get("chat_template") or conversations.DEFAULT_TEMPLATE
    files = {path: conversations.chat_token_file(path, kind, tokenizer, meta, d.train_on_prompt, cache,
                                                 d.chat_template, d.template_kwargs)
             for path in (d.path, d.eval_path) if path}
    if cfg.model.block_size is None:  # model.pretrained: every example whole, if the model's context allows
        cfg.model.block_size = context_length(cfg, files.values())
    block = cfg.model.block_size

    def examples(path: str) -> tuple[TokenFile, np.ndarray]:
        tokens = files[path]
        if d.packing:  # examples back to back: any length fits
            return tokens, np.arange(len(np.load(tokens.folder / "starts.npy")) - 1)
        return tokens, conversations.usable(tokens, block, d.overlong)

    train, train_rows = examples(d.path)
    if d.eval_path:
        (evals, eval_rows), stop = examples(d.eval_path), train.n
    else:
        held = max(1, int(len(train_rows) * d.eval_fraction))
        evals, train_rows, eval_rows = train, train_rows[:-held], train_rows[-held:]
        stop = int(np.load(train.folder / "starts.npy")[eval_rows[0]]) if len(eval_rows) else train.n
    if not len(train_rows) or not len(eval_rows):
        raise DataError(f"data.path={d.path!r}: {len(train_rows)} training and {len(eval_rows)} eval examples "
                        "with an assistant token in their first model.block_size + 1 tokens: give more examples "
                        "(or data.eval_path), or raise model.block_size")
    meta.update(source=f"data.path={d.path!r}", unigram_counts=train.counts(stop, tokenizer.vocab_size).tolist())
    if d.packing:
        start = stop if evals is train else 0
        return Data(train=Windows(train, 0, stop, block, seed=cfg.seed), eval=Windows(evals, start, evals.n, block),
                    meta=meta)
    pad = tokenizer.eos_id or 0
    return Data(train=conversations.Examples(train, train_rows, block, pad),
                eval=conversations.Examples(evals, eval_rows, block, pad), meta=meta)


def context_length(cfg, files) -> int:
    """``model.block_size: null`` with ``model.pretrained``, on chat data: the longest example
    (inputs: its tokens but one), rounded up to a multiple of 64, at most the checkpoint's context."""
    longest = max(int(np.diff(np.load(tokens.folder / "starts.npy")).max()) - 1 for tokens in files)
    context = pretrained_context(cfg)
    block = min(context, -(-longest // 64) * 64)
    fits = "every example whole" if block >= longest else f"longer examples cut (the context is {context})"
    print(f"data: model.block_size={block}: the longest example has {longest + 1} tokens; {fits}", flush=True)
    return block


def pretrained_context(cfg) -> int:
    """The context ``model.pretrained`` was saved with (an import: its config's, at most 2,048)."""
    from ....engine.checkpoint import read_meta

    return int(read_meta(cfg.model.pretrained)["config"]["model"]["block_size"])


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


def inherited_meta(cfg) -> dict:
    """What a fine-tune keeps of ``model.pretrained``'s task meta (``INHERITED``: an imported
    model's chat template, special tokens, generation defaults, original config); {} without one."""
    saved = pretrained_meta(cfg) if cfg.model.pretrained else {}
    return {key: saved[key] for key in INHERITED if key in saved}


def pretrained_meta(cfg) -> dict:
    """The task meta of ``model.pretrained``."""
    from ....engine.checkpoint import read_meta  # imports MindSpore (load_data runs after the runtime setup)

    return read_meta(cfg.model.pretrained)["task_meta"]


def with_chatml_tokens(cfg, tokenizer: Tokenizer, inherited: dict) -> tuple[Tokenizer, dict]:
    """``data.add_special_tokens`` (as TRL's ``setup_chat_format``): ChatML's markers become new
    special tokens of a model with no chat template, ``<|im_end|>`` its end of text; the
    embedding and head grow by their rows (``task.warm_start`` fills them with the mean row)."""
    where = f"model.pretrained={cfg.model.pretrained}"
    if not cfg.model.pretrained or tokenizer.kind != "bpe":
        raise DataError("data.add_special_tokens adds ChatML's markers to a model.pretrained with a BPE tokenizer; "
                        "set model.pretrained (or data.add_special_tokens=false)")
    if inherited.get("chat_template"):
        raise DataError(f"data.add_special_tokens: {where} has its own chat template, whose markers are its "
                        "tokens already; set data.add_special_tokens=false")
    tokenizer = tokenizer.with_special_tokens(CHATML_MARKERS, eos=CHATML_MARKERS[1])
    generation = dict(inherited.get("generation", {}))
    eos = [*generation.get("eos_token_ids", []), tokenizer.eos_id]
    generation["eos_token_ids"] = eos
    if "original" in generation:  # an export's generation_config.json stops at <|im_end|> too
        generation["original"] = {**generation["original"], "eos_token_id": eos}
    special = {**inherited.get("special_tokens", {}), "eos_token": CHATML_MARKERS[1]}
    if cfg.model.embedding_rows is not None and cfg.model.embedding_rows < tokenizer.vocab_size:
        cfg.model.embedding_rows = tokenizer.vocab_size
    ids = ", ".join(f"{m} = {tokenizer.encode(m).tolist()}" for m in CHATML_MARKERS)
    log.info(f"data.add_special_tokens: {ids} of {tokenizer.vocab_size} tokens")
    return tokenizer, {**inherited, "special_tokens": special, "generation": generation}


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
