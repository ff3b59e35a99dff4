"""The corpus tokenised once into a flat file of ids, read back with ``np.memmap``.

``<cache>/tokens-<key>/tokens.bin`` holds every token of the corpus as ``uint16`` (vocabularies
up to 65,536) or ``uint32``; ``<key>`` hashes the corpus bytes and the tokenizer, so changing
either makes a new file and an unchanged pair is found again at once. Everything in the cache
is written under a temporary name and renamed into place when complete: an interrupted run
leaves no file that a later run could take for a good one. Training windows are read from the
memmap by index, so memory does not grow with the corpus.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from .corpus import Corpus
from .tokenizer import Tokenizer, token_dtype

CACHE_FORMAT = 3  # bump when the file layout changes: old caches are then ignored
COUNT_CHUNK = 1 << 24  # tokens per np.bincount call: bounded memory for the unigram counts


class TokenFile:
    """A complete token file in the cache: ``n`` ids of ``dtype``."""

    def __init__(self, folder: Path):
        info = json.loads((folder / "info.json").read_text(encoding="utf-8"))
        self.folder, self.path = folder, folder / "tokens.bin"
        self.dtype, self.n, self.source = np.dtype(info["dtype"]), int(info["tokens"]), info["source"]
        self.masked = (folder / "mask.bin").is_file()  # chat data: which tokens are loss targets

    def tokens(self) -> np.ndarray:
        """All ids, memory-mapped (read from disk as they are indexed)."""
        return np.memmap(self.path, dtype=self.dtype, mode="r", shape=(self.n,))

    def mask(self) -> np.ndarray:
        """Chat data: 1 where the token is a loss target (the assistant's), memory-mapped."""
        return np.memmap(self.folder / "mask.bin", dtype=np.uint8, mode="r", shape=(self.n,))

    def counts(self, stop: int, vocab_size: int) -> np.ndarray:
        """How often each id occurs in the first ``stop`` tokens (the training split; chat: as a target): counted
        once in chunks over the memmap, then kept beside the tokens."""
        path = self.folder / f"counts-{stop}.npy"
        if path.is_file():
            return np.load(path)
        tokens, counts = self.tokens(), np.zeros(vocab_size, np.int64)
        for i in range(0, stop, COUNT_CHUNK):  # chat data: the targets only (the baseline scores them)
            weights = self.mask()[i:min(i + COUNT_CHUNK, stop)] if self.masked else None
            chunk = np.bincount(tokens[i:min(i + COUNT_CHUNK, stop)], weights, minlength=vocab_size)
            counts += chunk[:vocab_size].astype(np.int64)
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npy")
        np.save(tmp, counts)
        os.replace(tmp, path)
        return counts


def cache_key(*parts: str) -> str:
    return hashlib.sha256("\0".join([str(CACHE_FORMAT), *parts]).encode("utf-8")).hexdigest()[:20]


def token_file(corpus: Corpus, tokenizer: Tokenizer, cache: Path) -> TokenFile:
    """The cached token file of ``corpus`` under ``tokenizer``, tokenising it first if needed."""
    meta = json.dumps(tokenizer.to_meta(), sort_keys=True)
    folder = cache / f"tokens-{cache_key(corpus.digest(), meta)}"
    if not (folder / "info.json").is_file():
        write_atomically(folder, lambda tmp: _tokenise(corpus, tokenizer, tmp))
    return TokenFile(folder)


def _tokenise(corpus: Corpus, tokenizer: Tokenizer, folder: Path) -> None:
    dtype, n, last = token_dtype(tokenizer.vocab_size), 0, -1
    with open(folder / "tokens.bin", "wb") as f:
        for document, chunk in corpus.pieces():  # a chunk at a time: bounded memory
            # Documents as the tokenizer means them: each opened by what it puts before a text
            # (Llama's BOS), the next one after the end-of-text token (ids, never their spelling).
            start = [] if document == last else [*(tokenizer.document_end if last >= 0 else []),
                                                 *tokenizer.document_start]
            ids = np.concatenate([np.asarray(start, np.int32), tokenizer.encode(chunk, corpus.source)])
            ids.astype(dtype).tofile(f)
            n, last = n + len(ids), document
    info = {"tokens": n, "dtype": dtype.name, "source": corpus.source, "tokenizer": tokenizer.kind}
    (folder / "info.json").write_text(json.dumps(info), encoding="utf-8")


def write_atomically(folder: Path, fill) -> None:
    """Make ``folder`` by ``fill(tmp)`` on a temporary folder, then rename it into place. If
    another process (an msrun rank) got there first, its complete copy is kept."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # left by a killed run with the same process id
    try:
        tmp.mkdir()
        fill(tmp)
        try:
            os.rename(tmp, folder)
        except OSError:
            if not (folder / "info.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cached_text(path: Path, make) -> str:
    """``path``'s text, made by ``make()`` and written on first use. The first complete copy
    wins (a hard link never replaces a file): msrun ranks that fit at the same time all use
    the same tokenizer, whichever finished first."""
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(make(), encoding="utf-8")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process wrote it first: read its copy below
        except OSError:
            os.replace(tmp, path)  # a file system without hard links
        finally:
            tmp.unlink(missing_ok=True)
    return path.read_text(encoding="utf-8")
