"""Chat and instruction data: a JSONL file of conversations -> token ids and which of them train.

One example per line, in one of three styles (one style per file):

    {"messages": [{"role": "system", "content": "..."}, {"role": "user", ...}, {"role": "assistant", ...}]}
    {"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}   # ShareGPT
    {"instruction": "...", "input": "...", "output": "..."}                                     # Alpaca

Each conversation is rendered once with the checkpoint's chat template (``chat.py``) and
tokenised once, as transformers' ``apply_chat_template(tokenize=True)`` does; the loss targets
are found by character offsets (``targets.py``): the template's ``{% generation %}`` blocks where it has them (as
``return_assistant_tokens_mask``), else each assistant message's text where the template put it,
with the end-of-turn mark that follows it (the model learns to stop; ChatML's newline after it is
not the assistant's). So templates that render earlier turns differently once later ones follow
(Qwen3's and DeepSeek-R1's dropped reasoning, Mistral's system text) train every assistant turn.
What a template renders for the assistant before its text (Qwen3's ``<think>`` block, from the
content or ``reasoning_content``) trains with it; reasoning a template drops is not there to train.
A template that writes no end of turn (GLM-4: the next role token ends it) gets the one its
generation config names: the next turn's role token where it is one, else its eos appended.
Only those tokens are targets unless ``data.train_on_prompt``. The file is streamed into a cached token file
(``tokens.bin``) with a parallel ``mask.bin`` (1: a target) and each example's first token
(``starts.npy``) and line (``lines.npy``), so memory does not grow with the file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ....engine.errors import DataError
from .chat import TemplateError
from .targets import rendered, target_mask
from .tokenfile import TokenFile, cache_key, write_atomically
from .tokenizer import Tokenizer, token_dtype

# ChatML: the template of a model that brings none (trained here, or a bare tokenizer.json),
# after the BOS its tokenizer opens a text with (a Llama base's), if any
DEFAULT_TEMPLATE = ("{% if bos_token %}{{ bos_token }}{% endif %}"
                    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
STYLES = {"messages": "OpenAI messages", "conversations": "ShareGPT conversations", "instruction": "Alpaca"}
FORMATS = {"OpenAI messages": "chat", "ShareGPT conversations": "chat", "Alpaca": "instruct"}
SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "tool": "tool", "function_call": "assistant", "observation": "tool"}
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
    """The row as ``[{"role", "content", ...}]``; ValueError says what is wrong with it. An OpenAI
    message keeps its other keys (``tool_calls``, ``name``, ``tool_call_id``) for the template."""
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
        calls = isinstance(turn, dict) and turn.get("tool_calls")
        if not isinstance(turn, dict) or not isinstance(turn.get(role), str) or not (
                isinstance(turn.get(text), str) or (calls and turn.get(text) is None)):
            raise ValueError(f"turn {i + 1} needs {role!r} and {text!r} strings")
        name = turn[role] if kind == "OpenAI messages" else SHAREGPT_ROLES.get(turn[role])
        if name is None:
            raise ValueError(f"turn {i + 1}: unknown {role!r} {turn[role]!r} (expected one of "
                             f"{', '.join(SHAREGPT_ROLES)})")
        extra = {k: v for k, v in turn.items() if k not in (role, text)} if kind == "OpenAI messages" else {}
        if name == "assistant":
            check_reasoning(i, turn[text], extra.get("reasoning_content"))
        out.append({"role": name, "content": turn[text], **extra})
    if not any(m["role"] == "assistant" for m in out):
        raise ValueError("no assistant turn: nothing to learn from")
    return out


def check_reasoning(i: int, content, reasoning) -> None:
    """An assistant turn's ``<think>`` block must be closed; ``reasoning_content`` must be text."""
    if reasoning is not None and not isinstance(reasoning, str):
        raise ValueError(f"turn {i + 1}: reasoning_content must be a string")
    if isinstance(content, str) and "<think>" in content and "</think>" not in content.split("<think>")[-1]:
        raise ValueError(f"turn {i + 1}: a <think> block that is not closed (no </think> after it)")


def chat_token_file(path: str, kind: str, tokenizer: Tokenizer, meta: dict, train_on_prompt: bool,
                    cache: Path, template: str = "default", template_kwargs: dict | None = None) -> TokenFile:
    """The cached token file of the JSONL at ``path`` (with ``mask.bin``, ``starts.npy`` and
    ``lines.npy``), tokenising it first if needed."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataError(f"{file}: no such file")
    from .corpus import Corpus

    stops = [tokenizer.decode([i]) for i in meta.get("generation", {}).get("eos_token_ids", [])]
    settings = {"name": template, "variables": dict(template_kwargs or {}), "stops": stops}
    key = json.dumps([tokenizer.to_meta(), meta.get("chat_template"), meta.get("special_tokens"), kind,
                      train_on_prompt, settings, 3], sort_keys=True)  # 3: + reasoning, stop marks
    folder = cache / f"chat-{cache_key(Corpus(str(file)).digest(), key)}"
    if not (folder / "info.json").is_file():
        write_atomically(folder, lambda tmp: _tokenise(file, kind, tokenizer, meta, train_on_prompt, settings, tmp))
    return TokenFile(folder)


def _tokenise(file: Path, kind: str, tokenizer: Tokenizer, meta: dict, train_on_prompt: bool, settings: dict,
              folder: Path):
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
                tools = {"tools": row["tools"]} if isinstance(row.get("tools"), list) else {}
                text, spans = rendered(meta, messages(row, found),
                                       {**settings, "variables": {**settings["variables"], **tools}})
            except (ValueError, TemplateError) as exc:
                raise DataError(f"{file}:{number}: {exc}") from None
            ids, offsets = tokenizer.encode_offsets(text, f"{file}:{number}")
            mask = np.ones(len(ids), np.uint8) if train_on_prompt else target_mask(offsets, spans)
            ids.astype(dtype).tofile(ids_out)
            mask.tofile(mask_out)
            starts.append(n)
            lines.append(number)
            n += len(ids)
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
