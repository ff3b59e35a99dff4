"""Chat templates: a conversation rendered as the model was trained to read it.

An imported model's ``tokenizer_config.json`` carries a Jinja template (``meta['chat_template']``:
one string, or a list of ``{name, template}`` picked by ``data.chat_template``); it is rendered
in the environment transformers' ``apply_chat_template`` renders it in: a sandbox (the template
is code from a downloaded file), ``trim_blocks`` and ``lstrip_blocks``, loop controls, its
``tojson`` (no HTML escaping, non-ASCII kept), ``strftime_now``, ``raise_exception``, the
``{% generation %}`` tag that marks the assistant's text, the special tokens, and any extra
variables (``tools``, ``documents``, ``enable_thinking``: ``data.template_kwargs``).
"""

from __future__ import annotations

import functools
import json
from contextlib import contextmanager
from datetime import datetime

from ....engine.errors import UserError


class TemplateError(UserError):
    pass


def template_text(meta: dict, name: str = "default") -> str:
    """The checkpoint's template, or the one named ``name`` of a list of them (Hermes, Command-R)."""
    template = meta.get("chat_template")
    if not template:
        raise TemplateError("this checkpoint has no chat template (its tokenizer_config.json had none): "
                            "use --prompt with plain text")
    if isinstance(template, str):
        return template
    named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
    if name not in named or not isinstance(named[name], str):
        raise TemplateError(f"data.chat_template={name!r}: the checkpoint's templates are {', '.join(map(str, named))}")
    return named[name]


def render(meta: dict, messages: list[dict], add_generation_prompt: bool = False, name: str = "default",
           **variables) -> str:
    """``messages`` ([{"role": ..., "content": ...}]) through the checkpoint's chat template."""
    return render_spans(meta, messages, add_generation_prompt, name, **variables)[0]


def render_spans(meta: dict, messages: list[dict], add_generation_prompt: bool = False, name: str = "default",
                 **variables) -> tuple[str, list[tuple[int, int]] | None]:
    """The rendered text and the character spans of its ``{% generation %}`` blocks (None: the
    template has no such tag), as transformers computes ``assistant_masks``."""
    from jinja2 import TemplateError as JinjaError

    template = _compiled(template_text(meta, name))
    chunks, spans = [], []
    context = {**meta.get("special_tokens", {}), **variables, "messages": messages,
               "add_generation_prompt": add_generation_prompt}
    try:
        with template.environment.tracking(chunks, spans):
            for chunk in template.generate(**context):
                chunks.append(chunk)
    except TemplateError:
        raise
    except (JinjaError, ArithmeticError, LookupError, TypeError, ValueError) as exc:  # whatever a template raises
        raise TemplateError(f"the chat template failed on this conversation ({type(exc).__name__}: {exc})") from None
    return "".join(chunks), spans if template.environment.has_generation else None


@functools.cache
def _compiled(template: str):
    import jinja2
    from jinja2 import TemplateError as JinjaError
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """``{% generation %}...{% endgeneration %}``: records where its text lands in the output."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            self.environment.has_generation = True
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_mark"), [], [], body).set_lineno(lineno)

        def _mark(self, caller):
            text = caller()
            if self.environment.spans is not None:
                start = sum(map(len, self.environment.chunks))
                self.environment.spans.append((start, start + len(text)))
            return text

    class Environment(ImmutableSandboxedEnvironment):
        has_generation, chunks, spans = False, None, None

        @contextmanager
        def tracking(self, chunks: list, spans: list):
            """While rendering: the output so far (``chunks``) and the generation blocks' spans."""
            self.chunks, self.spans = chunks, spans
            try:
                yield
            finally:
                self.chunks = self.spans = None

    def raise_exception(message):
        raise TemplateError(f"the chat template refused the conversation: {message}")

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = Environment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=lambda fmt: datetime.now().strftime(fmt))
    try:
        return env.from_string(template)
    except JinjaError as exc:
        raise TemplateError(f"the chat template does not parse ({exc})") from None
