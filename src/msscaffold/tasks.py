"""The four task families, and which of them a template version has built.

Availability has one source of truth: the ``task`` question's validator in copier.yml
(so plain ``copier copy`` refuses the same tasks). This module evaluates that validator.
"""

from __future__ import annotations

from dataclasses import dataclass

import jinja2


@dataclass(frozen=True)
class Task:
    name: str
    summary: str
    trains_on: str


TASKS = {
    t.name: t
    for t in (
        Task(
            "vision",
            "image classification",
            "ResNet-style CNN on the embedded scikit-learn 8x8 digits",
        ),
        Task(
            "nlp",
            "language modelling + text generation",
            "decoder-only Transformer char LM on Python's bundled pydoc text",
        ),
        Task(
            "recommender",
            "top-K recommendation and CTR prediction",
            "NeuMF top-K / DeepFM CTR on synthetic interactions or the MovieLens-100k subset",
        ),
        Task(
            "multimodal",
            "image-text contrastive retrieval",
            "CLIP-style two-tower model on digits + generated captions",
        ),
    )
}


def availability(config: dict | None) -> dict[str, str | None]:
    """Map each task to None when available, else the validator's reason."""
    validator = ((config or {}).get("task") or {}).get("validator")
    if not validator:
        return {name: None for name in TASKS}
    template = jinja2.Environment(autoescape=False).from_string(validator)
    result = {}
    for name in TASKS:
        message = " ".join(template.render(task=name).split())
        result[name] = message or None
    return result
