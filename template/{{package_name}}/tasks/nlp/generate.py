"""Sample text from a trained language model (the sampler behind ``generate.py``).

Decoding is incremental: the prompt is encoded once ("prefill"), then every new token is one
step of a single position that reuses the keys and values of the earlier positions, kept in
a cache per layer (``GPT.prefill`` / ``GPT.step``). The caches have the fixed length
``model.block_size``, so each of the two functions compiles to one static-shape graph.

The context window: the model sees the whole text while it fits in ``block_size`` tokens.
When it no longer fits (learned positions cannot slide token by token under a cache), the
window jumps: it restarts from the last ``block_size // 2`` tokens, encoded again in one
prefill, and grows token by token until it is full again (``window_start``). A prompt longer
than the window is cut the same way. ``cache=False`` (``generate.py --no-cache``) encodes the
whole window again for every token, with the same windows: the same tokens, slower.

An empty prompt starts from a first token drawn from the training text's token frequencies.
Sampling uses NumPy's generator seeded with ``--seed``, so the same checkpoint, prompt and
seed give the same text, with or without the cache.
"""

from __future__ import annotations

import sys

import numpy as np

from ...engine.errors import UserError


def sample(network, meta: dict, block_size: int, prompt: str = "", max_new_tokens: int = 200,
           temperature: float = 1.0, top_k: int | None = None, seed: int = 0, cache: bool = True,
           top_p: float | None = None, stop: tuple[str, ...] = (), add_special_tokens: bool = True,
           repetition_penalty: float = 1.0) -> str:
    """Return up to ``max_new_tokens`` new tokens, decoded (the prompt is not repeated)."""
    return "".join(stream(network, meta, block_size, prompt, max_new_tokens, temperature, top_k, seed, cache, top_p,
                          stop, add_special_tokens, repetition_penalty))


def stream(network, meta: dict, block_size: int, prompt: str = "", max_new_tokens: int = 200,
           temperature: float = 1.0, top_k: int | None = None, seed: int = 0, cache: bool = True,
           top_p: float | None = None, stop: tuple[str, ...] = (), add_special_tokens: bool = True,
           repetition_penalty: float = 1.0):
    """The new text piece by piece, as tokens are drawn; it stops at an end-of-text token (the
    checkpoint's ``generation.eos_token_ids``, or its tokenizer's) or at a ``stop`` text (a chat
    turn's end, however it is tokenised), neither of which is shown. A piece never ends inside
    a character: bytes of one split across tokens wait for the rest.

    ``add_special_tokens``: the prompt starts as the tokenizer starts a text (a Llama tokenizer's
    BOS), as ``tokenizer(prompt)`` in transformers and every document in training; a rendered chat
    template carries its own. New tokens are decoded after the prompt's, not alone: a SentencePiece
    word's leading space survives. ``repetition_penalty`` (generation_config.json's, e.g. Qwen2.5's
    1.05) lowers the logit of every token already in the context, as transformers does."""
    from .data import Tokenizer

    check_settings(max_new_tokens, temperature, top_k, top_p, repetition_penalty)
    tokenizer = Tokenizer.from_meta(meta)
    vocab = tokenizer.vocab_size  # embedding rows past it (padding) are never drawn
    eos = end_ids(meta, tokenizer)
    ids = prompt_ids(tokenizer, prompt, "--prompt", add_special_tokens)
    if len(ids) >= block_size:  # never cut silently: a conversation must fit whole, a text is said to be cut
        if not add_special_tokens:
            raise UserError(f"the conversation is {len(ids)} tokens, the model's context model.block_size="
                            f"{block_size}: start a new one, or fine-tune with a longer model.block_size")
        print(f"note: the prompt is {len(ids)} tokens, longer than the context model.block_size={block_size}: "
              f"the text goes on from its last {block_size - window_start(len(ids), block_size)} tokens",
              file=sys.stderr, flush=True)
    context = list(ids)
    head = tokenizer.decode(context)
    rng = np.random.default_rng(seed)
    next_logits = (CachedDecoder if cache else WindowDecoder)(network, block_size)
    new: list[int] = []
    shown = ""
    for _ in range(max_new_tokens):
        if ids:
            logits = penalize(next_logits(ids)[:vocab].astype(np.float64), ids, repetition_penalty)
        else:  # nothing to condition on: the training text's token frequencies
            logits = np.log(np.asarray(meta["unigram_counts"], dtype=np.float64) + 1.0)
        token = pick(logits, temperature, top_k, rng, top_p)
        if token in eos:
            break
        ids.append(token)
        new.append(token)
        text = decode_new(tokenizer, context, head, new)
        ended = min((text.index(s) for s in stop if s in text), default=None)
        if ended is not None:
            yield text[len(shown):ended]
            return
        # A character still incomplete waits for its next bytes; a stop text's start, for the rest of it.
        held = max((k for s in stop for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        if not text.endswith("\ufffd") and len(text) - held > len(shown):
            yield text[len(shown):len(text) - held]
            shown = text[:len(text) - held]
    if (text := decode_new(tokenizer, context, head, new)) != shown:
        yield text[len(shown):]


def complete(network, meta: dict, block_size: int, prompts: list[str], max_new_tokens: int = 200,
             temperature: float = 1.0, top_k: int | None = None, seed: int = 0,
             top_p: float | None = None, repetition_penalty: float = 1.0) -> list[str]:
    """The new text of each prompt, as ``sample`` gives it for that prompt alone (each row draws
    from its own generator seeded with ``seed``), computed as one batch: prompts left-padded to
    the longest, every row one step per token (a finished row steps on, ignored). A network
    whose positions are learned (``gpt``) has no left padding: its prompts run one by one."""
    from .data import Tokenizer

    check_settings(max_new_tokens, temperature, top_k, top_p, repetition_penalty)
    if not getattr(network, "left_pads", False):
        return [sample(network, meta, block_size, prompt, max_new_tokens, temperature, top_k, seed, True, top_p,
                       repetition_penalty=repetition_penalty) for prompt in prompts]
    tokenizer = Tokenizer.from_meta(meta)
    vocab, eos = tokenizer.vocab_size, end_ids(meta, tokenizer)
    rows = [prompt_ids(tokenizer, prompt, "--prompts") for prompt in prompts]
    longest = max(map(len, rows))
    if longest + max_new_tokens > block_size:
        raise UserError(f"--prompts: the longest prompt is {longest} tokens; with --max-new-tokens {max_new_tokens} "
                        f"that passes the context model.block_size={block_size} (a batch never slides its window)")
    rngs = [np.random.default_rng(seed) for _ in rows]
    new: list[list[int]] = [[] for _ in rows]
    done = [False] * len(rows)
    decoder = BatchDecoder(network, block_size)
    logits = decoder.prefill(rows)
    for _ in range(max_new_tokens):
        for i, row_logits in enumerate(logits):
            if not done[i]:
                logits_i = penalize(row_logits[:vocab].astype(np.float64), rows[i] + new[i], repetition_penalty)
                token = pick(logits_i, temperature, top_k, rngs[i], top_p)
                done[i] = token in eos
                new[i] += [] if done[i] else [token]
        if all(done):
            break
        logits = decoder.step([row[-1] if row else 0 for row in new])
    return [decode_new(tokenizer, row, tokenizer.decode(row), tokens) for row, tokens in zip(rows, new)]


class BatchDecoder:
    """Next-token logits of several rows at once: left-padded to a common end, then one cached
    step per token for every row (``Llama.prefill`` / ``step`` with ``pad``)."""

    def __init__(self, network, block_size: int):
        import mindspore as ms

        self.ms, self.block_size = ms, block_size
        self.prefill_, self.step_ = ms.jit(network.prefill), ms.jit(network.step)

    def prefill(self, rows: list[list[int]]) -> np.ndarray:
        ms, width = self.ms, max(map(len, rows))
        window = np.zeros((len(rows), self.block_size), dtype=np.int32)
        for i, row in enumerate(rows):
            window[i, width - len(row):width] = row
        self.pad = ms.Tensor([width - len(row) for row in rows], ms.int32)
        self.position = width
        logits, *self.caches = self.prefill_(ms.Tensor(window), self.pad)
        return logits.asnumpy()[:, width - 1]

    def step(self, tokens: list[int]) -> np.ndarray:
        ms = self.ms
        keys, values = (ms.mutable(c) for c in self.caches)
        logits, *self.caches = self.step_(ms.Tensor(np.array(tokens, np.int32).reshape(-1, 1)),
                                          ms.Tensor([self.position], ms.int32), keys, values, self.pad)
        self.position += 1
        return logits.asnumpy()[:, 0]


def end_ids(meta: dict, tokenizer) -> set[int]:
    """The checkpoint's end-of-text ids (generation_config.json's), else its tokenizer's."""
    return set(meta.get("generation", {}).get("eos_token_ids") or [tokenizer.eos_id]) - {None}


def prompt_ids(tokenizer, prompt: str, key: str, add_special_tokens: bool = True) -> list[int]:
    """A prompt's ids, opened as the tokenizer opens a text (a Llama tokenizer's BOS)."""
    return [*(tokenizer.document_start if add_special_tokens else []), *tokenizer.encode(prompt, key).tolist()]


def decode_new(tokenizer, context: list[int], head: str, new: list[int]) -> str:
    """The text of ``new`` as it reads after ``context`` (decoded as ``head``)."""
    full = tokenizer.decode(context + new)
    return full[len(head):] if full.startswith(head) else tokenizer.decode(new)


def window_start(n: int, block_size: int) -> int:
    """Index of the first of ``n`` tokens the model sees: 0 while they fit; past that the window
    holds ``keep`` .. ``block_size`` tokens, restarting at ``keep`` each time it overflows."""
    if n <= block_size:
        return 0
    keep = max(1, block_size // 2)
    return n - keep - (n - block_size - 1) % (block_size - keep + 1)


class CachedDecoder:
    """Logits of the token after ``ids``, one cached step per call while the window grows."""

    def __init__(self, network, block_size: int):
        import mindspore as ms  # here, not at the top: bad arguments are refused before the slow import

        self.ms, self.block_size = ms, block_size
        self.prefill, self.step = ms.jit(network.prefill), ms.jit(network.step)
        self.start, self.caches = None, None

    def __call__(self, ids: list[int]) -> np.ndarray:
        ms = self.ms
        start = window_start(len(ids), self.block_size)
        if start != self.start:  # a new window: encode it in one pass and keep its keys and values
            context = ids[start:]
            window = np.zeros((1, self.block_size), dtype=np.int32)  # right-padded: causal attention ignores it
            window[0, :len(context)] = context
            logits, keys, values = self.prefill(ms.Tensor(window))
            self.start, self.caches = start, (keys, values)
            return logits.asnumpy()[0, len(context) - 1]
        # One more token than last call: run just it, at its position in the window. mutable():
        # a tuple of tensors is otherwise a constant to ms.jit, recompiled on every call.
        keys, values = (ms.mutable(c) for c in self.caches)
        position = ms.Tensor([len(ids) - 1 - start], ms.int32)
        logits, keys, values = self.step(ms.Tensor([[ids[-1]]], ms.int32), position, keys, values)
        self.caches = (keys, values)
        return logits.asnumpy()[0, 0]


class WindowDecoder:
    """Logits of the token after ``ids``, the whole window encoded again on every call."""

    def __init__(self, network, block_size: int):
        import mindspore as ms

        self.ms, self.block_size = ms, block_size
        # Always (1, block_size), zero-padded on the right: one shape, compiled once (about 30x
        # faster per token than running the forward eagerly).
        self.forward = ms.jit(network.construct)

    def __call__(self, ids: list[int]) -> np.ndarray:
        context = ids[window_start(len(ids), self.block_size):]
        window = np.zeros((1, self.block_size), dtype=np.int32)
        window[0, :len(context)] = context
        return self.forward(self.ms.Tensor(window)).asnumpy()[0, len(context) - 1]


def check_settings(max_new_tokens: int, temperature: float, top_k: int | None, top_p: float | None = None,
                   repetition_penalty: float = 1.0) -> None:
    if max_new_tokens < 0:
        raise UserError(f"--max-new-tokens={max_new_tokens}: must be >= 0")
    if not temperature >= 0:
        raise UserError(f"--temperature={temperature}: must be >= 0 (0 = always the most likely token)")
    if top_k is not None and top_k < 1:
        raise UserError(f"--top-k={top_k}: must be >= 1")
    if top_p is not None and not 0 < top_p <= 1:
        raise UserError(f"--top-p={top_p}: must be in (0, 1]")
    if not repetition_penalty > 0:
        raise UserError(f"--repetition-penalty={repetition_penalty}: must be > 0 (1 = off)")


def penalize(logits: np.ndarray, context: list[int], penalty: float) -> np.ndarray:
    """transformers' repetition penalty (CTRL's): each token id in ``context`` (prompt and new
    tokens, each counted once) has its logit divided by ``penalty`` if positive, multiplied if
    negative; applied before temperature, top-k and top-p, in greedy decoding too."""
    if penalty == 1.0 or not context:
        return logits
    seen = np.unique(np.asarray(context, np.int64))
    seen = seen[seen < len(logits)]
    out = logits.copy()
    out[seen] = np.where(out[seen] < 0, out[seen] * penalty, out[seen] / penalty)
    return out


def pick(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator,
         top_p: float | None = None) -> int:
    """One token id from ``logits``: greedy at temperature 0, else sampled among the ``top_k``
    best (exactly k: ties broken by the lower id), then the fewest best whose probabilities
    reach ``top_p`` (nucleus sampling, as transformers filters: top-k first)."""
    if temperature == 0:
        return int(logits.argmax())
    logits = logits / temperature
    order = np.argsort(-logits, kind="stable")  # best first; equal logits: lower id first
    if top_k is not None:
        order = order[:top_k]
    probs = np.exp(logits[order] - logits[order[0]])
    probs /= probs.sum()
    if top_p is not None:  # keep the token that crosses top_p, drop the rest
        order = order[:int(np.searchsorted(np.cumsum(probs), top_p)) + 1]
        probs = probs[:len(order)] / probs[:len(order)].sum()
    return int(order[rng.choice(len(order), p=probs)])
