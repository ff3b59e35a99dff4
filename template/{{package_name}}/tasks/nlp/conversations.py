"""Chat and instruction data: a JSONL file of conversations -> token ids and which of them train.

One example per line, in one of three styles (one style per file):

    {"messages": [{"role": "system", "content": "..."}, {"role": "user", ...}, {"role": "assistant", ...}]}
    {"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}   # ShareGPT
    {"instruction": "...", "input": "...", "output": "..."}                                     # Alpaca

Each conversation is rendered with the checkpoint's chat template (``chat.py``), the way
transformers' ``apply_chat_template`` does, and cut into prompt and assistant pieces: the
template rendered up to each assistant turn with the generation prompt, then with that turn.
Only the assistant's tokens (its end-of-turn token included: the model learns to stop) are
loss targets unless ``data.train_on_prompt``. The file is streamed into a cached token file
(``tokens.bin``) with a parallel ``mask.bin`` (1: a target) and each example's first token
(``starts.npy``) and line (``lines.npy``), so memory does not grow with the file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ...engine.errors import DataError
from .chat import TemplateError, render
from .tokenfile import TokenFile, cache_key, write_atomically
from .tokenizer import Tokenizer, token_dtype

# ChatML: the template of a model that brings none (trained here, or a bare tokenizer.json)
DEFAULT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
STYLES = {"messages": "OpenAI messages", "conversations": "ShareGPT conversations", "instruction": "Alpaca"}
FORMATS = {"OpenAI messages": "chat", "ShareGPT conversations": "chat", "Alpaca": "instruct"}
SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}
log = logging.getLogger(__name__)
EXPECTED = ('expected {"messages": [...]} (OpenAI), {"conversations": [...]} (ShareGPT) or '
            '{"instruction": ..., "output": ...} (Alpaca)')


def detect(path: str) -> str:
    """``data.format: auto``: ``chat`` or ``instruct`` for a ``.jsonl`` file (by its first
    example's keys), else ``text``."""
    file = Path(path).expanduser()
    if file.suffix != ".jsonl" or not file.is_file():
        return "text"
    for number, row in rows(file):
        try:
            return FORMATS[style(row)]
        except ValueError as exc:
            raise DataError(f"{file}:{number}: {exc}") from None
    raise DataError(f"{file}: no examples (the file is empty)")


def rows(file: Path) -> Iterator[tuple[int, dict]]:
    """(line number, parsed object) of every non-blank line, streamed."""
    try:
        with open(file, encoding="utf-8-sig") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{file}:{number}: not JSON ({exc.msg} at column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{file}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise DataError(f"{file}: cannot read it ({exc.strerror})") from None


def style(row) -> str:
    key = next((key for key in STYLES if isinstance(row, dict) and key in row), None)
    if key is None:
        raise ValueError(EXPECTED)
    return STYLES[key]


def messages(row: dict, kind: str) -> list[dict]:
    """The row as ``[{"role", "content"}]``; ValueError says what is wrong with it."""
    if kind == "Alpaca":
        if not isinstance(row.get("instruction"), str) or not isinstance(row.get("output"), str):
            raise ValueError('an Alpaca example needs "instruction" and "output" strings')
        prompt = row["instruction"] + (f"\n\n{row['input']}" if row.get("input") else "")
        system = [{"role": "system", "content": row["system"]}] if row.get("system") else []
        return [*system, {"role": "user", "content": prompt}, {"role": "assistant", "content": row["output"]}]
    turns = row["messages" if kind == "OpenAI messages" else "conversations"]
    role, text = ("role", "content") if kind == "OpenAI messages" else ("from", "value")
    if not isinstance(turns, list) or not turns:
        raise ValueError(f"{kind}: expected a non-empty list of turns")
    out = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get(role), str) or not isinstance(turn.get(text), str):
            raise ValueError(f"turn {i + 1} needs {role!r} and {text!r} strings")
        name = turn[role] if kind == "OpenAI messages" else SHAREGPT_ROLES.get(turn[role])
        if name is None:
            raise ValueError(f"turn {i + 1}: unknown {role!r} {turn[role]!r} (expected one of "
                             f"{', '.join(SHAREGPT_ROLES)})")
        out.append({"role": name, "content": turn[text]})
    if not any(m["role"] == "assistant" for m in out):
        raise ValueError("no assistant turn: nothing to learn from")
    return out


def pieces(meta: dict, conversation: list[dict]) -> list[tuple[str, bool]]:
    """The rendered conversation as (text, is the assistant's) pieces, in order."""
    out, done = [], ""
    for i, message in enumerate(conversation):
        if message["role"] != "assistant":
            continue
        prompt = render(meta, conversation[:i], add_generation_prompt=True)
        turn = render(meta, conversation[:i + 1])
        if not (prompt.startswith(done) and turn.startswith(prompt)):
            raise ValueError("the chat template renders earlier turns differently once later ones follow, so "
                             "the assistant's tokens cannot be told apart: one assistant turn per example")
        out += [(prompt[len(done):], False), (turn[len(prompt):], True)]
        done = turn
    whole = render(meta, conversation)
    if not whole.startswith(done):
        raise ValueError("the chat template renders the whole conversation differently from its turns")
    if not any(text.strip() for text, _ in out[1::2]):
        raise ValueError("the chat template renders none of the assistant's words: nothing to learn from")
    return [(text, assistant) for text, assistant in [*out, (whole[len(done):], False)] if text]


def chat_token_file(path: str, kind: str, tokenizer: Tokenizer, meta: dict, train_on_prompt: bool,
                    cache: Path) -> TokenFile:
    """The cached token file of the JSONL at ``path`` (with ``mask.bin``, ``starts.npy`` and
    ``lines.npy``), tokenising it first if needed."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataError(f"{file}: no such file")
    from .corpus import Corpus

    settings = json.dumps([tokenizer.to_meta(), meta.get("chat_template"), meta.get("special_tokens"), kind,
                           train_on_prompt], sort_keys=True)
    folder = cache / f"chat-{cache_key(Corpus(str(file)).digest(), settings)}"
    if not (folder / "info.json").is_file():
        write_atomically(folder, lambda tmp: _tokenise(file, kind, tokenizer, meta, train_on_prompt, tmp))
    return TokenFile(folder)


def _tokenise(file: Path, kind: str, tokenizer: Tokenizer, meta: dict, train_on_prompt: bool, folder: Path):
    dtype, starts, lines, n, first = token_dtype(tokenizer.vocab_size), [], [], 0, None
    with open(folder / "tokens.bin", "wb") as ids_out, open(folder / "mask.bin", "wb") as mask_out:
        for number, row in rows(file):
            try:
                found = style(row)
                first = first or found
                if found != first:
                    raise ValueError(f"a line in {found} style, the file's first in {first} style: one per file")
                if FORMATS[found] != kind:
                    raise ValueError(f"a {found} example, but data.format={kind}")
                parts = pieces(meta, messages(row, found))
            except (ValueError, TemplateError) as exc:
                raise DataError(f"{file}:{number}: {exc}") from None
            ids = [tokenizer.encode(text, f"{file}:{number}") for text, _ in parts]
            mask = [np.full(len(i), train_on_prompt or assistant, np.uint8) for i, (_, assistant) in zip(ids, parts)]
            np.concatenate(ids).astype(dtype).tofile(ids_out)
            np.concatenate(mask).tofile(mask_out)
            starts.append(n)
            lines.append(number)
            n += sum(map(len, ids))
    if not starts:
        raise DataError(f"{file}: no examples (the file is empty)")
    np.save(folder / "starts.npy", np.asarray([*starts, n], np.int64))  # one more: the end of the last
    np.save(folder / "lines.npy", np.asarray(lines, np.int64))
    info = {"tokens": n, "dtype": dtype.name, "source": str(file), "tokenizer": tokenizer.kind, "examples": len(lines)}
    (folder / "info.json").write_text(json.dumps(info), encoding="utf-8")


class Examples:
    """One example per row (``data.packing: false``): its first ``block_size + 1`` tokens, the
    rest of the row padding that is never a target. Returns (tokens, target mask) like packed
    ``Windows`` over a chat token file."""

    def __init__(self, tokens: TokenFile, indices: np.ndarray, block_size: int, pad: int):
        self.file, self.indices, self.block_size, self.pad = tokens, indices, block_size, pad
        self.starts = np.load(tokens.folder / "starts.npy")

    def __len__(self) -> int:
        return len(self.indices)

    def take(self, indices: np.ndarray, epoch: int = 0) -> tuple[np.ndarray, np.ndarray]:
        examples = self.indices[np.asarray(indices, np.int64)]
        index = self.starts[examples][:, None] + np.arange(self.block_size + 1)
        inside = index < self.starts[examples + 1][:, None]
        index = np.minimum(index, self.file.n - 1)
        tokens = np.where(inside, self.file.tokens()[index], self.pad).astype(np.int32)
        mask = np.where(inside, self.file.mask()[index], 0)[:, 1:].astype(np.float32)  # (b, block): targets
        return tokens, mask


def usable(tokens: TokenFile, block_size: int, overlong: str) -> np.ndarray:
    """Indices of the examples with a target in their first ``block_size + 1`` tokens;
    ``data.overlong: refuse`` makes a longer example an error naming its line."""
    starts, lines = np.load(tokens.folder / "starts.npy"), np.load(tokens.folder / "lines.npy")
    lengths = np.diff(starts)
    if overlong == "refuse" and (lengths > block_size + 1).any():
        i = int(np.argmax(lengths > block_size + 1))
        raise DataError(f"{tokens.source}:{lines[i]}: {lengths[i]} tokens, longer than model.block_size + 1 = "
                        f"{block_size + 1} (set data.overlong=cut to keep its first tokens, or raise "
                        "model.block_size)")
    mask = tokens.mask()
    kept = np.asarray([i for i, start in enumerate(starts[:-1])
                       if mask[start + 1:min(starts[i + 1], start + block_size + 1)].any()], np.int64)
    cut, dropped = int((lengths > block_size + 1).sum()), len(lengths) - len(kept)
    if cut:
        gone = f", {dropped} of them dropped (no assistant token left)" if dropped else ""
        log.warning("%s: %d of %d examples are longer than model.block_size + 1 = %d tokens: cut to their first "
                    "tokens%s (data.overlong=refuse names them)", tokens.source, cut, len(lengths), block_size + 1,
                    gone)
    return kept
