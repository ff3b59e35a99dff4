"""Which characters of a rendered conversation are the assistant's, and so train: the chat
template's ``{% generation %}`` blocks where it has them, else each assistant message located in
the rendering, with the end-of-turn mark after it (see ``conversations.py``); then which tokens
overlap them."""

from __future__ import annotations

import functools

import numpy as np

from .chat import TemplateError, render_spans

# What ends an assistant's turn in the templates people use (besides the model's own eos token):
# ChatML, Llama-3, Phi, Gemma, Llama-2/Mistral, DeepSeek.
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "</s>", "<|endoftext|>",
               "<｜end▁of▁sentence｜>", "<|end_of_text|>")


def rendered(meta: dict, conversation: list[dict], settings: dict) -> tuple[str, list[tuple[int, int]]]:
    """The conversation rendered once, and the character spans that are the assistant's: the
    template's ``{% generation %}`` blocks, else ``located`` ones. ``settings``: the template's
    name and variables (``data.chat_template``, ``data.template_kwargs``, a row's ``tools``)."""
    render = functools.partial(render_spans, meta, name=settings["name"], **settings["variables"])
    text, spans = render(conversation)
    if spans is None:
        stops = settings.get("stops", [])  # the texts of the generation config's eos ids (GLM-4: <|user|>)
        ends = (meta.get("special_tokens", {}).get("eos_token"), *stops, *END_OF_TURN)
        spans = located(render, text, conversation, ends)
        if spans and stops and not text[spans[-1][1]:].strip() and not any(
                mark and text[:spans[-1][1]].endswith(mark) for mark in ends):
            # The template ends the last answer with nothing: the model must still learn to stop.
            text = text[:spans[-1][1]] + stops[0]
            spans[-1] = (spans[-1][0], len(text))
    if not any(text[a:b].strip() for a, b in spans):
        raise ValueError("the chat template renders none of the assistant's words: nothing to learn from")
    return text, spans


def located(render, text: str, conversation: list[dict], ends: tuple) -> list[tuple[int, int]]:
    """Where the template puts each assistant message in ``text``, with the end-of-turn mark right
    after it. The conversation is rendered again with the message's text replaced by a marker:
    what comes before the marker and after it is the template's own, so the text between is the
    message as the template rendered it (trimmed, its earlier reasoning dropped, or as written).
    A ``<think>`` block the template renders before the text (from ``reasoning_content``) is the
    assistant's too. A template that renders the text differently with a marker (Qwen3 parses
    ``</think>`` out of it) is read by prefixes alone: the turn is what rendering it adds after
    the conversation before it with the generation prompt (``turn_start``, ``turn_end``)."""
    spans = []
    for i, message in enumerate(conversation):
        if message["role"] != "assistant" or not isinstance(message.get("content"), str):
            continue
        marker = f"\ue000{i}\ue001"  # private-use characters: no template changes them
        probe, _ = render([*conversation[:i], {**message, "content": marker}, *conversation[i + 1:]])
        at = probe.find(marker)
        after = len(probe) - at - len(marker)  # what follows the text, the template's own
        opened = turn_start(render, text, conversation, i)
        if at >= 0 and probe[:at] == text[:at] and probe[at + len(marker):] == text[len(text) - after:]:
            start, end = at, len(text) - after
            since = opened if opened is not None else spans[-1][1] if spans else 0
            think = text.rfind("<think>", since, start)  # reasoning rendered before the text trains with it
            if think >= 0 and "</think>" in text[think:start]:
                start = think
        else:
            end = turn_end(render, text, conversation, i)
            if opened is None or end is None:
                raise ValueError(f"turn {i + 1}: the chat template renders the rest of the conversation differently "
                                 "with another assistant text here, so its tokens cannot be found; give the "
                                 "template a {% generation %} block around the assistant's text")
            start = opened
        gap = len(text) - end - len(text[end:].lstrip(" "))  # Llama-2's " </s>"
        if not any(mark and text[:end].endswith(mark) for mark in ends):
            end += next((gap + len(mark) for mark in ends if mark and text.startswith(mark, end + gap)), 0)
        if end > start:
            spans.append((start, end))
    return spans


def turn_start(render, text: str, conversation: list[dict], i: int) -> int | None:
    """Where assistant turn ``i`` starts in ``text``: the end of the conversation before it with the
    generation prompt, when ``text`` begins with that (None: the template is not prefix-stable there)."""
    try:
        prompt, _ = render(conversation[:i], add_generation_prompt=True)
    except TemplateError:  # e.g. a template that wants a user turn first
        return None
    return len(prompt) if text.startswith(prompt) else None


def turn_end(render, text: str, conversation: list[dict], i: int) -> int | None:
    """Where assistant turn ``i`` ends in ``text``: the end of the conversation up to it, without the
    whitespace a template writes after a turn, when ``text`` begins with that."""
    try:
        upto, _ = render(conversation[:i + 1])
    except TemplateError:
        return None
    return len(upto.rstrip()) if text.startswith(upto) else None


def target_mask(offsets: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """1 for each token whose characters overlap an assistant span, else 0 (uint8)."""
    mask = np.zeros(len(offsets), np.uint8)
    for start, end in spans:
        mask |= (offsets[:, 0] < end) & (offsets[:, 1] > start)
    return mask
