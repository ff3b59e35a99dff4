"""What generated code asks of MindSpore: only APIs that 2.7-2.10 offer, none past its announced removal."""

from __future__ import annotations

import ast

import pytest
from helpers import available_tasks, generate

# MindSpore 2.10's docstrings: "deprecated and will be removed after version 2.9.0" (ops.*, nn.*),
# "will be deprecated and removed" (hal.is_available, ms.get_context), "deprecated" (Conv2DBackpropInput).
REMOVED = {
    "ops": {"assign", "assign_add", "masked_fill", "cast", "clip_by_global_norm", "Conv2DBackpropInput"},
    "nn": {"Momentum", "EmbeddingLookup", "AdamWeightDecay"},
    "hal": {"is_available"},
    "ms": {"get_context"},
    "mindspore": {"get_context"},
}


def removed_calls(source: str) -> list[str]:
    """``module.name`` uses of REMOVED in Python code (comments and docstrings are not code)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.attr in REMOVED.get(node.value.id, ()):
                found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
    return found


def test_the_scan_finds_a_removed_call():
    assert removed_calls("from mindspore import ops\nops.assign(p, 1)\n'ops.cast in a docstring'\n") == [
        "ops.assign (line 2)"
    ]


@pytest.mark.parametrize("task", available_tasks())
def test_generated_code_calls_no_mindspore_api_past_its_removal(tmp_path, task):
    project = generate(tmp_path, task, git=False)
    hits = {
        str(path.relative_to(project)): calls
        for path in sorted(project.rglob("*.py"))
        if (calls := removed_calls(path.read_text(encoding="utf-8")))
    }
    assert not hits, hits
