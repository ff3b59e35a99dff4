"""Text in, token blocks out: the corpus reader, the tokenizer and the train/eval split.

The tokenizer is tiny and data-derived (``char``: the sorted set of characters in the
corpus; ``byte``: the 256 UTF-8 byte values), and it is saved in ``Data.meta``, so every
checkpoint carries the vocabulary that evaluation and ``generate.py`` need.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...engine.errors import DataError
from ...engine.task import Data

DEFAULT_CORPUS = "Python's bundled pydoc text (pydoc_data.topics)"


class Tokenizer:
    """Text <-> int32 ids, one id per character (``char``) or per UTF-8 byte (``byte``)."""

    def __init__(self, kind: str, chars: str = ""):
        self.kind = kind
        self.chars = chars  # char: the vocabulary, sorted by code point; byte: unused
        self._codes = np.array([ord(c) for c in chars], dtype=np.uint32)

    @classmethod
    def fit(cls, text: str, kind: str) -> Tokenizer:
        return cls(kind, "".join(sorted(set(text))) if kind == "char" else "")

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> Tokenizer:
        return cls(meta["tokenizer"]["kind"], meta["tokenizer"].get("chars", ""))

    def to_meta(self) -> dict[str, Any]:
        return {"kind": self.kind, "chars": self.chars}

    @property
    def vocab_size(self) -> int:
        return len(self.chars) if self.kind == "char" else 256

    def encode(self, text: str, source: str = "text") -> np.ndarray:
        """``text`` -> int32 ids; characters outside the vocabulary are an error naming ``source``."""
        if self.kind == "byte":
            return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32)
        codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")  # one code point per character
        ids = np.searchsorted(self._codes, codes).clip(0, max(len(self._codes) - 1, 0))
        known = self._codes[ids] == codes if len(self._codes) else np.zeros(len(codes), bool)
        if not known.all():
            bad = sorted({chr(c) for c in codes[~known]})
            shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in bad[:3])
            raise DataError(f"{source}: {len(bad)} character(s) not in the model's vocabulary of "
                            f"{self.vocab_size} (the characters of its training text), e.g. {shown}")
        return ids.astype(np.int32)

    def decode(self, ids) -> str:
        if self.kind == "byte":
            return bytes(int(i) for i in ids).decode("utf-8", errors="replace")
        return "".join(self.chars[int(i)] for i in ids)


def load_data(cfg) -> Data:
    """Read the corpus, fit the tokenizer, hold out the end of the text for evaluation and cut
    the training part into blocks: column ``tokens`` (N, block_size + 1), inputs + shifted targets."""
    text, source = read_corpus(cfg.data.path)
    tokenizer = Tokenizer.fit(text, cfg.data.tokenizer)
    block = cfg.model.block_size
    split = len(text) - int(len(text) * cfg.data.eval_fraction)
    train_ids, eval_ids = tokenizer.encode(text[:split], source), tokenizer.encode(text[split:], source)
    if len(train_ids) + len(eval_ids) < block + 1:
        raise DataError(f"{source}: {len(train_ids) + len(eval_ids)} tokens is shorter than one block of "
                        f"model.block_size + 1 = {block + 1}; give more text or lower model.block_size")
    if min(len(train_ids), len(eval_ids)) < block + 1:
        raise DataError(f"{source}: too short to hold out data.eval_fraction={cfg.data.eval_fraction} and keep a "
                        f"block of {block + 1} tokens on each side ({len(train_ids)} train, {len(eval_ids)} eval "
                        "tokens); give more text or lower model.block_size")
    meta = {"tokenizer": tokenizer.to_meta(), "source": source,
            # Token counts of the training text: the unigram baseline, and generate.py's first token.
            "unigram_counts": np.bincount(train_ids, minlength=tokenizer.vocab_size).tolist()}
    # Evaluation keeps its raw text: task.evaluate encodes it with the tokenizer of the meta it
    # is given, which for a checkpoint is the training-time vocabulary.
    return Data(train={"tokens": blocks(train_ids, block)}, eval={"text": text[split:]}, meta=meta)


def blocks(ids: np.ndarray, block_size: int) -> np.ndarray:
    """Consecutive windows of ``block_size + 1`` tokens, ``block_size`` apart: (N, block_size + 1).
    Each token is a target exactly once; the last token of a block starts the next one."""
    n = (len(ids) - 1) // block_size
    index = np.arange(n)[:, None] * block_size + np.arange(block_size + 1)
    return ids[index].astype(np.int32)


def read_corpus(path: str | None) -> tuple[str, str]:
    """Return (text, where it came from). ``None``: the standard library's pydoc topics."""
    if path is None:
        return pydoc_text(), DEFAULT_CORPUS
    root = Path(path)
    if root.is_dir():
        files = sorted(root.rglob("*.txt"))
        if not files:
            raise DataError(f"data.path={path!r}: the folder holds no .txt files")
    elif root.is_file():
        files = [root]
    else:
        raise DataError(f"data.path={path!r}: no such file or folder")
    text = "\n".join(read_text_file(file) for file in files)
    if not text.strip():
        raise DataError(f"data.path={path!r}: the text is empty")
    return text, f"data.path={path!r}"


def read_text_file(file: Path) -> str:
    raw = file.read_bytes()
    if b"\x00" in raw:
        raise DataError(f"{file}: a binary file (NUL bytes), not UTF-8 text")
    try:
        text = raw.decode("utf-8-sig")  # -sig: drop a byte-order mark if there is one
    except UnicodeDecodeError as exc:
        raise DataError(f"{file}: not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                        "is it a binary file?") from None
    return text.replace("\r\n", "\n")


def pydoc_text() -> str:
    """~465k characters of English prose about Python, shipped with CPython (PSF License)."""
    try:
        from pydoc_data.topics import topics
    except ImportError:
        raise DataError("data.path is null (Python's pydoc text) but this Python ships no pydoc_data; "
                        "set data.path to a UTF-8 text file") from None
    return "\n".join(topics[key] for key in sorted(topics))
