"""Sample text from a trained language model (the sampler behind ``generate.py``).

The context window slides: once the text is longer than ``model.block_size`` tokens the
model sees the last ``block_size`` of them. An empty prompt starts from a first token drawn
from the training text's token frequencies. Sampling uses NumPy's generator seeded with
``--seed``, so the same checkpoint, prompt and seed give the same text.
"""

from __future__ import annotations

import numpy as np

from ...engine.errors import UserError


def sample(network, meta: dict, block_size: int, prompt: str = "", max_new_tokens: int = 200,
           temperature: float = 1.0, top_k: int | None = None, seed: int = 0) -> str:
    """Return ``max_new_tokens`` new tokens, decoded (the prompt is not repeated)."""
    import mindspore as ms  # here, not at the top: bad arguments are refused before the slow import

    from .data import Tokenizer

    check_settings(max_new_tokens, temperature, top_k)
    tokenizer = Tokenizer.from_meta(meta)
    ids = tokenizer.encode(prompt, "--prompt").tolist()
    if len(ids) > block_size:
        raise UserError(f"--prompt is {len(ids)} tokens, longer than the model's context of "
                        f"model.block_size={block_size}; shorten it")
    rng = np.random.default_rng(seed)
    # Always feed (1, block_size), the context left-aligned and zero-padded on the right: causal
    # attention keeps the padding out of the real positions, and one fixed shape lets ms.jit
    # compile the forward once (about 30x faster per token than running it eagerly).
    forward = ms.jit(network.construct)
    window = np.zeros((1, block_size), dtype=np.int32)
    new: list[int] = []
    for _ in range(max_new_tokens):
        if ids:
            context = ids[-block_size:]
            window[0, :len(context)] = context
            logits = forward(ms.Tensor(window)).asnumpy()[0, len(context) - 1].astype(np.float64)  # (vocab,)
        else:  # nothing to condition on: the training text's token frequencies
            logits = np.log(np.asarray(meta["unigram_counts"], dtype=np.float64) + 1.0)
        token = pick(logits, temperature, top_k, rng)
        ids.append(token)
        new.append(token)
    return tokenizer.decode(new)


def check_settings(max_new_tokens: int, temperature: float, top_k: int | None) -> None:
    if max_new_tokens < 0:
        raise UserError(f"--max-new-tokens={max_new_tokens}: must be >= 0")
    if not temperature >= 0:
        raise UserError(f"--temperature={temperature}: must be >= 0 (0 = always the most likely token)")
    if top_k is not None and top_k < 1:
        raise UserError(f"--top-k={top_k}: must be >= 1")


def pick(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> int:
    """One token id from ``logits``: greedy at temperature 0, else sampled among the ``top_k`` best."""
    if temperature == 0:
        return int(logits.argmax())
    logits = logits / temperature
    if top_k is not None and top_k < len(logits):
        kth = np.partition(logits, -top_k)[-top_k]
        logits = np.where(logits < kth, -np.inf, logits)
    probs = np.exp(logits - logits.max())
    return int(rng.choice(len(probs), p=probs / probs.sum()))
