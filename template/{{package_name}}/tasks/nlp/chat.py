"""Chat templates: a conversation rendered as the model was trained to read it.

An imported model's ``tokenizer_config.json`` carries a Jinja template (``meta['chat_template']``);
it is rendered as transformers' ``apply_chat_template`` renders it: a sandboxed environment
(the template is code from a downloaded file), ``trim_blocks`` and ``lstrip_blocks``, the
special tokens and ``raise_exception`` in scope, ``add_generation_prompt`` to open the
assistant's turn.
"""

from __future__ import annotations

import functools

from ...engine.errors import UserError


class TemplateError(UserError):
    pass


@functools.cache
def _compiled(template: str):
    from jinja2 import TemplateError as JinjaError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(f"the chat template refused the conversation: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(template)
    except JinjaError as exc:
        raise TemplateError(f"the chat template does not parse ({exc})") from None


def render(meta: dict, messages: list[dict], add_generation_prompt: bool = False) -> str:
    """``messages`` ([{"role": ..., "content": ...}]) through the checkpoint's chat template."""
    from jinja2 import TemplateError as JinjaError

    template = meta.get("chat_template")
    if not template:
        raise TemplateError("this checkpoint has no chat template (its tokenizer_config.json had none): "
                            "use --prompt with plain text")
    special = meta.get("special_tokens", {})
    try:
        return _compiled(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                          **special)
    except TemplateError:
        raise
    except (JinjaError, ArithmeticError, LookupError, TypeError, ValueError) as exc:  # whatever a template raises
        raise TemplateError(f"the chat template failed on this conversation ({type(exc).__name__}: {exc})") from None
