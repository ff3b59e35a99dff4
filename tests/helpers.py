"""Helpers shared by the generator tests and the task training tests.

from helpers import generate, available_tasks
project = generate(tmp_path, "vision", epochs=1)   # a git repo with one commit
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import jinja2
import yaml

from msscaffold import generate as _generate
from msscaffold.source import TemplateSource
from msscaffold.tasks import FACTS, task_names

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIR = next(  # the package folder's name in template/ ("{{ package_name }}", spacing as committed)
    (p.name for p in (REPO / "template").iterdir() if re.fullmatch(r"\{\{\s*package_name\s*\}\}", p.name)),
    "{{ package_name }}",
)
CHECKOUT = TemplateSource(str(REPO), "HEAD", "checkout")  # working tree, uncommitted changes included


def copier_yml() -> dict:
    return yaml.safe_load((REPO / "copier.yml").read_text(encoding="utf-8"))


def available_tasks() -> list[str]:
    """Tasks this checkout's copier.yml offers (the ``task`` choices)."""
    return task_names(copier_yml())


def task_facts(task: str, repo: Path = REPO):
    """The task's facts file as a Jinja module: ``summary``, ``epochs``, ``entry_script``, ``target``..."""
    return (
        jinja2.Environment().from_string((repo / FACTS.format(task=task)).read_text(encoding="utf-8")).module
    )


def computed_questions() -> set[str]:
    """copier.yml questions that are derived, never asked nor recorded (``when: false``)."""
    return {k for k, v in copier_yml().items() if isinstance(v, dict) and v.get("when") is False}


def generate(
    tmp_path: Path, task: str = "vision", *, name: str = "demo", git: bool = True, **answers
) -> Path:
    """Render this checkout's template into ``tmp_path/name`` the way ``msscaffold new`` does."""
    dest = tmp_path / name
    data = {"task": task, "project_name": name, **{k: str(v) for k, v in answers.items()}}
    _generate.new_project(dest, source=CHECKOUT, data=data, init_git=git)
    return dest


def read_answers(project: Path) -> dict:
    return yaml.safe_load((project / ".copier-answers.yml").read_text(encoding="utf-8"))


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def msscaffold(*args: str, cwd: Path | None = None, **kwargs) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess (stdin closed, so never interactive)."""
    return subprocess.run(
        [sys.executable, "-m", "msscaffold", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        **kwargs,
    )
