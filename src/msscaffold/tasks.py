"""The task families a template offers, read from the template itself.

The list is the ``task`` question's ``choices`` in copier.yml (so plain ``copier copy``
offers the same tasks); what each task is and trains on comes from its facts file,
``template/_partials/<task>/config.jinja``, which copier.yml reads for the task's defaults
too. Adding a task to the template needs no change here.
"""

from __future__ import annotations

from dataclasses import dataclass

import jinja2

FACTS = "template/_partials/{task}/config.jinja"


@dataclass(frozen=True)
class Task:
    name: str
    summary: str
    trains_on: str


def task_names(config: dict | None) -> list[str]:
    """The ``task`` choices of a parsed copier.yml, in their order."""
    choices = ((config or {}).get("task") or {}).get("choices") or []
    return [str(name) for name in (choices.values() if isinstance(choices, dict) else choices)]


def describe(name: str, facts: str | None) -> Task:
    """A task's one-line summary and default training, from the text of its facts file."""
    if facts is None:
        return Task(name, "(no description in this template)", "?")
    module = jinja2.Environment(autoescape=False).from_string(facts).module
    return Task(name, str(getattr(module, "summary", "")), str(getattr(module, "trains_on", "")))
