"""Captions to token ids, without MindSpore (``python -m <package> predict`` imports it too):
lower-case words of the training vocabulary, or an imported CLIP's BPE tokenizer."""

from __future__ import annotations

import re

import numpy as np

from ...engine.errors import DataError

PAD, UNK = "<pad>", "<unk>"  # token ids 0 and 1


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def build_vocab(texts: list[str]) -> list[str]:
    return [PAD, UNK, *sorted({w for text in texts for w in words(text)})]


def check_known(texts: list[str], meta: dict) -> None:
    """Refuse a caption without a single word of the training vocabulary (it would embed as the
    unknown word alone); a BPE (CLIP) reads any text."""
    if "tokenizer" in meta:
        return
    known = set(meta["vocab"][2:])
    for text in texts:
        if not any(w in known for w in words(text)):
            raise DataError(f"no word of {text!r} is in the vocabulary the model was trained on "
                            f"(e.g. {', '.join(meta['vocab'][2:7])})")


def encode(texts: list[str], meta: dict) -> np.ndarray:
    """Captions -> int32 (N, max_tokens) ids: CLIP's BPE (``meta`` holds its tokenizer) or word ids."""
    if "tokenizer" in meta:
        return ClipTokenizer.from_meta(meta).encode(texts, meta["max_tokens"])
    return tokenize(texts, meta["vocab"], meta["max_tokens"])


def tokenize(texts: list[str], vocab: list[str], max_tokens: int) -> np.ndarray:
    """Captions -> int32 (N, max_tokens) word ids, 0-padded; unknown words -> 1."""
    index = {w: i for i, w in enumerate(vocab)}
    out = np.zeros((len(texts), max_tokens), np.int32)
    for row, text in enumerate(texts):
        ids = [index.get(w, 1) for w in words(text)][:max_tokens]
        out[row, :len(ids)] = ids
    return out


class ClipTokenizer:
    """A CLIP ``tokenizer.json``: text -> <|startoftext|> BPE tokens <|endoftext|>, cut to
    ``context`` tokens (the end-of-text kept last) and padded with end-of-text tokens."""

    def __init__(self, text: str, source: str = "tokenizer.json"):
        from tokenizers import Tokenizer

        try:
            self.bpe = Tokenizer.from_str(text)
        except Exception as exc:  # tokenizers raises its own exception types
            raise DataError(f"{source}: not a tokenizer.json ({str(exc).splitlines()[0][:120]})") from None
        vocab = self.bpe.get_vocab(with_added_tokens=True)
        missing = [t for t in ("<|startoftext|>", "<|endoftext|>") if t not in vocab]
        if missing:
            raise DataError(f"{source}: no {missing[0]} token: not a CLIP tokenizer")
        self.bos_id, self.eos_id = vocab["<|startoftext|>"], vocab["<|endoftext|>"]
        self.vocab_size, self.text = self.bpe.get_vocab_size(with_added_tokens=True), text

    @classmethod
    def from_meta(cls, meta: dict) -> ClipTokenizer:
        return cls(meta["tokenizer"], "the checkpoint's tokenizer")

    def encode(self, texts: list[str], context: int) -> np.ndarray:
        """Captions -> int32 (N, context) ids."""
        out = np.full((len(texts), context), self.eos_id, np.int32)
        for row, text in enumerate(texts):
            ids = self.bpe.encode(text, add_special_tokens=False).ids[:context - 2]
            out[row, :len(ids) + 1] = [self.bos_id, *ids]  # the end-of-text token follows (padding)
        return out
