"""Text <-> token ids: ``char``, ``byte`` or a byte-level ``bpe`` (Hugging Face ``tokenizers``).

Every kind is fitted from a stream of text chunks, never from the whole corpus as one string,
and round-trips through ``to_meta()``: the tokenizer travels inside every checkpoint (a BPE as
its whole ``tokenizer.json``), so ``eval.py`` and ``generate.py`` rebuild the training-time one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ....engine.errors import DataError

BPE_PIECE_CHARS = 1 << 20  # encoding: pieces encoded in parallel
# Training: fed in small pieces, the trainer's memory stays bounded (measured on 30 MB of text:
# 141 MB peak with 64 KB pieces, 1.47 GB with 8 MB ones, and twice as fast).
BPE_TRAIN_PIECE_CHARS = 1 << 16
SPECIAL = "<|endoftext|>"  # GPT-2's one special token: a trained BPE has it too (id 0)
# A tokenizer.json's end-of-text token when nothing names it (tokenizer_config.json's eos_token
# does, for an import): GPT-2/Qwen, Llama-2/Mistral/TinyLlama, Llama-3, Gemma.
EOS_NAMES = (SPECIAL, "</s>", "<|end_of_text|>", "<eos>")


class Tokenizer:
    """Text <-> int32 ids, one id per character (``char``), per UTF-8 byte (``byte``) or per
    byte-level BPE token (``bpe``)."""

    def __init__(self, kind: str, chars: str = "", bpe_json: str = "", eos: str | None = None):
        self.kind = kind
        self.chars = chars  # char: the vocabulary, sorted by code point
        self._codes = np.array([ord(c) for c in chars], dtype=np.uint32)
        self.bpe_json = bpe_json  # bpe: the tokenizer.json text
        self._bpe = _parse_bpe(bpe_json, "the checkpoint's tokenizer") if kind == "bpe" else None
        self.eos = eos  # bpe: the end-of-text token's spelling, when the model's files name it

    @classmethod
    def fit(cls, chunks: Iterable[str], kind: str, vocab_size: int = 0) -> Tokenizer:
        """A tokenizer for the text in ``chunks``: its alphabet (``char``), or a BPE of
        ``vocab_size`` trained on it (``bpe``); ``byte`` needs no text."""
        if kind == "char":
            seen: set[str] = set()
            for chunk in chunks:
                seen.update(chunk)
            return cls("char", "".join(sorted(seen)))
        if kind == "bpe":
            return cls("bpe", bpe_json=train_bpe(chunks, vocab_size))
        return cls("byte")

    @classmethod
    def from_file(cls, path: str, key: str = "data.tokenizer_file") -> Tokenizer:
        """A published ``tokenizer.json`` (e.g. GPT-2's); errors name ``key``."""
        try:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DataError(f"{key}={path!r}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"{key}={path!r}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
        _parse_bpe(text, f"{key}={path!r}")
        return cls("bpe", bpe_json=text)

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> Tokenizer:
        saved = meta["tokenizer"]
        return cls(saved["kind"], saved.get("chars", ""), saved.get("json", ""), saved.get("eos"))

    def to_meta(self) -> dict[str, Any]:
        if self.kind == "bpe":
            return {"kind": "bpe", "json": self.bpe_json, **({"eos": self.eos} if self.eos else {})}
        return {"kind": self.kind, "chars": self.chars}

    def with_special_tokens(self, tokens, eos: str) -> Tokenizer:
        """A BPE that also reads each of ``tokens`` as one special token (new ids after its vocabulary,
        as ``tokenizer.add_special_tokens`` numbers them), ``eos`` its end of text."""
        bpe = _parse_bpe(self.bpe_json, "the checkpoint's tokenizer")
        bpe.add_special_tokens(list(tokens))
        return Tokenizer("bpe", bpe_json=bpe.to_str(), eos=eos)

    @property
    def vocab_size(self) -> int:
        if self.kind == "bpe":
            return self._bpe.get_vocab_size(with_added_tokens=True)
        return len(self.chars) if self.kind == "char" else 256

    def encode(self, text: str, source: str = "text") -> np.ndarray:
        """``text`` -> int32 ids; characters outside a ``char`` vocabulary are an error naming ``source``."""
        if self.kind == "byte":
            return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32)
        if self.kind == "bpe":
            # Pieces of ~1 MB cut at line breaks, encoded in parallel by the Rust library. A
            # piece edge may split a run of whitespace that one string would merge: chunked
            # text can differ from one call by a few tokens (the cache is deterministic).
            # No special tokens: a Llama tokenizer.json would open every piece with its BOS
            # (documents get theirs from document_start).
            encode = getattr(self._bpe, "encode_batch_fast", self._bpe.encode_batch)  # _fast: no offsets
            pieces = encode(list(line_pieces(text, BPE_PIECE_CHARS)), add_special_tokens=False)
            return np.concatenate([np.asarray(p.ids, dtype=np.int32) for p in pieces] or [np.zeros(0, np.int32)])
        codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")  # one code point per character
        ids = np.searchsorted(self._codes, codes).clip(0, max(len(self._codes) - 1, 0))
        known = self._codes[ids] == codes if len(self._codes) else np.zeros(len(codes), bool)
        if not known.all():
            bad = sorted({chr(c) for c in codes[~known]})
            shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in bad[:3])
            raise DataError(f"{source}: {len(bad)} character(s) not in the model's vocabulary of "
                            f"{self.vocab_size} (the characters of its training text), e.g. {shown}")
        return ids.astype(np.int32)

    def encode_offsets(self, text: str, source: str = "text") -> tuple[np.ndarray, np.ndarray]:
        """``text`` -> int32 ids in one call (special tokens written in it are read as such, as
        ``tokenizer(text, add_special_tokens=False)`` does) and each token's (start, end)
        character offsets, (n, 2)."""
        if self.kind == "bpe":
            encoding = self._bpe.encode(text, add_special_tokens=False)
            return np.asarray(encoding.ids, np.int32), np.asarray(encoding.offsets, np.int64).reshape(-1, 2)
        ids = self.encode(text, source)
        if self.kind == "char":
            starts = np.arange(len(ids))
            return ids, np.stack([starts, starts + 1], axis=1)
        sizes = np.fromiter((len(c.encode("utf-8")) for c in text), np.int64, len(text))  # byte: a char's bytes
        char = np.repeat(np.arange(len(text)), sizes)
        return ids, np.stack([char, char + 1], axis=1)

    @property
    def eos_id(self) -> int | None:
        """The end-of-text token's id: the one the model's files name, else the first of
        ``EOS_NAMES`` the vocabulary has; None for characters and bytes (they have none)."""
        if self.kind != "bpe":
            return None
        names = (self.eos,) if self.eos else EOS_NAMES
        return next((i for i in map(self._bpe.token_to_id, names) if i is not None), None)

    @property
    def document_start(self) -> list[int]:
        """What the tokenizer puts before a text (a Llama tokenizer.json: its BOS; GPT-2, Qwen:
        nothing), read off its own post-processor: a text encoded with and without its specials."""
        if self.kind != "bpe":
            return []
        bare = self._bpe.encode("a", add_special_tokens=False).ids
        full = self._bpe.encode("a").ids
        return next((full[:i] for i in range(len(full)) if full[i:i + len(bare)] == bare), [])

    @property
    def document_end(self) -> list[int]:
        """What goes between two documents (files) of a corpus: the end-of-text token's id for a
        BPE (as GPT-2, Llama and nanoGPT train), a newline for characters and bytes, which have none."""
        eos = self.eos_id
        return [eos] if eos is not None else self.encode("\n").tolist()

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        if self.kind == "byte":
            return bytes(ids).decode("utf-8", errors="replace")
        if self.kind == "bpe":
            return self._bpe.decode(ids, skip_special_tokens=False)
        return "".join(self.chars[i] for i in ids)


def line_pieces(text: str, size: int):
    """``text`` in consecutive pieces of about ``size`` characters, each ending at a line break
    where there is one."""
    start = 0
    while start < len(text):
        end = text.find("\n", start + size) + 1 or len(text)
        yield text[start:end]
        start = end


def train_bpe(chunks: Iterable[str], vocab_size: int) -> str:
    """A byte-level BPE of ``vocab_size`` tokens trained on ``chunks`` (GPT-2's scheme: every
    byte has a symbol, so any text encodes and decodes back exactly); returns its JSON."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    bpe = HFTokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[SPECIAL], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    pieces = (piece for chunk in chunks for piece in line_pieces(chunk, BPE_TRAIN_PIECE_CHARS))
    bpe.train_from_iterator(pieces, trainer=trainer)
    return bpe.to_str()


def _parse_bpe(text: str, source: str):
    from tokenizers import Tokenizer as HFTokenizer

    try:
        json.loads(text)
        return HFTokenizer.from_str(text)
    except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"{source}: not a Hugging Face tokenizer.json ({first})") from None


def token_dtype(vocab_size: int) -> np.dtype:
    """The narrowest unsigned integer that holds every id: 2 bytes a token up to 65,536 tokens."""
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)
