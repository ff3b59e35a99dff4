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


@dataclass(frozen=True)
class Feature:
    name: str
    summary: str


def features(config: dict | None, task: str) -> list[Feature]:
    """The optional features a task offers: the ``features`` choices of a parsed copier.yml whose
    validator (if any) accepts ``task``. A choice's key is ``"name: one line"``."""
    choices = ((config or {}).get("features") or {}).get("choices") or {}
    items = choices.items() if isinstance(choices, dict) else ((str(c), c) for c in choices)
    found = []
    for label, value in items:
        validator = value.get("validator") if isinstance(value, dict) else None
        value = str(value.get("value") if isinstance(value, dict) else value)
        if validator and jinja2.Environment().from_string(str(validator)).render(task=task).strip():
            continue  # not a feature of this task
        name, _, summary = str(label).partition(": ")
        found.append(Feature(value, summary if name == value else str(label)))
    return found


def parse_features(text: str, config: dict | None, task: str) -> list[str]:
    """``onnx,sweeps`` / ``all`` / ``none`` -> the feature names, refusing (one line) a name that is
    unknown or not a feature of ``task``."""
    from msscaffold.errors import MsscaffoldError

    offered = [f.name for f in features(config, task)]
    words = [w.strip() for w in text.replace(" ", ",").split(",") if w.strip()]
    if words == ["all"]:
        return offered
    if words in ([], ["none"]):
        return []
    anywhere = {f.name for t in task_names(config) for f in features(config, t)}
    for word in words:
        if word not in offered:
            why = f"is not one of the {task} task's" if word in anywhere else "is unknown"
            raise MsscaffoldError(f"feature {word!r} {why}: the {task} task's features are "
                                  f"{', '.join(offered) or 'none'} (or all, none)")
    if "weights" in words and "archs" in offered:  # weights import into the archs (vision): it brings them
        words.append("archs")
    if "weights" in words and "finetune" in offered:  # ... and fine-tunes from them: it brings the warm start
        words.append("finetune")
    if {"onnx", "weights"} & set(words) and "folders" in offered:  # vision: predict serves the folders'
        words.append("folders")  # eval view, published weights fine-tune on photos: both bring them
    return [name for name in offered if name in words]
