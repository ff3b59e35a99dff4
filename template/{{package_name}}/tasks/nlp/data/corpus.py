"""The corpus as a stream of text chunks: Python's pydoc text, a UTF-8 file or a folder of ``.txt``.

Files are read in blocks of ``CHUNK_BYTES`` cut at a line break, so no step ever holds the
whole text as one Python string, and a multi-GB corpus reads in bounded memory. The digest
of the bytes (and file order) names the token cache: any change of the text invalidates it.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from pathlib import Path

from ....engine.errors import DataError

DEFAULT_CORPUS = "Python's bundled pydoc text (pydoc_data.topics)"
CHUNK_BYTES = 8 << 20  # 8 MB blocks: a few times that in memory while tokenising, whatever the corpus size
BOM = b"\xef\xbb\xbf"


class Corpus:
    """Where the text comes from (``data.path``; ``None``: the pydoc text) and how to stream it."""

    def __init__(self, path: str | None):
        self.path = path
        self.source = DEFAULT_CORPUS if path is None else f"data.path={path!r}"
        self.files = [] if path is None else list_files(path)

    @functools.cache  # noqa: B019 - one Corpus per load, hashed once
    def digest(self) -> str:
        """SHA-256 over every file's content and length, in reading order (names do not count)."""
        h = hashlib.sha256()
        if self.path is None:
            h.update(pydoc_text().encode("utf-8"))
        for file in self.files:
            h.update(f"{file.stat().st_size}:".encode())
            with open(file, "rb") as f:
                for block in iter(lambda: f.read(CHUNK_BYTES), b""):  # noqa: B023 - f is this loop's file
                    h.update(block)
        return h.hexdigest()

    def pieces(self) -> Iterator[tuple[int, str]]:
        """(document index, text) pieces (a document is a file; ``\r\n`` read as ``\n``), each
        ending at a line break where one exists."""
        if self.path is None:
            text = pydoc_text()
            yield from ((0, text[i:i + CHUNK_BYTES]) for i in range(0, len(text), CHUNK_BYTES))
            return
        blank = True
        for i, file in enumerate(self.files):
            for chunk in read_chunks(file):
                blank = blank and not chunk.strip()
                yield i, chunk
        if blank:
            raise DataError(f"{self.source}: the text is empty")

    def chunks(self, max_bytes: int | None = None) -> Iterator[str]:
        """The text in pieces, files joined by a newline. ``max_bytes``: stop after about that many bytes."""
        read, last = 0, 0
        for i, chunk in self.pieces():
            if i != last:
                yield "\n"
            yield chunk
            read, last = read + len(chunk), i
            if max_bytes is not None and read >= max_bytes:
                return


def list_files(path: str) -> list[Path]:
    root = Path(path).expanduser()
    if root.is_dir():
        files = sorted(root.rglob("*.txt"))
        if not files:
            raise DataError(f"data.path={path!r}: the folder holds no .txt files")
        return files
    if root.is_file():
        return [root]
    raise DataError(f"data.path={path!r}: no such file or folder")


def read_chunks(file: Path) -> Iterator[str]:
    """``file`` as UTF-8 text in blocks cut after a line break (or, in a line longer than a
    block, between two characters); a NUL byte or invalid UTF-8 is an error naming the offset."""
    offset, rest = 0, b""
    with open(file, "rb") as f:
        while True:
            block = f.read(CHUNK_BYTES)
            data = rest + block
            if not data:
                return
            if offset == 0 and data.startswith(BOM):
                data, offset = data[len(BOM):], len(BOM)
            cut = len(data) if not block else _cut(data)
            piece, rest = data[:cut], data[cut:]
            yield _decode(piece, file, offset)
            offset += len(piece)


def _cut(data: bytes) -> int:
    """Where to end a block: after its last newline, else before an incomplete UTF-8 character
    (or a ``\\r`` whose ``\\n`` may follow)."""
    newline = data.rfind(b"\n")
    if newline >= 0:
        return newline + 1
    cut = len(data) - 1
    while cut > 0 and data[cut] & 0xC0 == 0x80:  # back to the first byte of the last character
        cut -= 1
    return cut - 1 if cut > 0 and data[cut - 1] == 0x0D else cut


def _decode(piece: bytes, file: Path, offset: int) -> str:
    if b"\x00" in piece:
        raise DataError(f"{file}: a binary file (NUL bytes), not UTF-8 text")
    try:
        text = piece.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{file}: not UTF-8 text (invalid byte 0x{piece[exc.start]:02x} at offset "
                        f"{offset + exc.start}); is it a binary file?") from None
    return text.replace("\r\n", "\n")


def pydoc_text() -> str:
    """~465k characters of English prose about Python, shipped with CPython (PSF License)."""
    try:
        from pydoc_data.topics import topics
    except ImportError:
        raise DataError("data.path is null (Python's pydoc text) but this Python ships no pydoc_data; "
                        "set data.path to a UTF-8 text file") from None
    return "\n".join(topics[key] for key in sorted(topics))
