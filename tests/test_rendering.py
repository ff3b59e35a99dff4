"""What people type reaches TOML, YAML and Markdown intact; the generated project installs and lints.

A pyproject is rendered by hand from a template, so every answer with a quote, a backslash or a
non-ASCII character is a chance to break it; control characters are refused by the validators
(see test_bad_input.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from helpers import available_tasks, generate, git, read_answers
from markdown_it import MarkdownIt

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: hatchling (test extra) brings tomli
    import tomli as tomllib

HOSTILE = {
    "author_name": 'Ada "Bobby" O\'Neil',
    "author_email": '"ada.o\'neil"@example.com',
    "description": (
        "C:\\data\\new — \"quoted\", 'single', *not bold*, _x_, `y`, <b>, [a](b), #7 & $z$, ~~s~~, Zoë 😀"
    ),
}


def yaml_files(project: Path) -> list[Path]:
    files = [p for p in project.rglob("*") if p.suffix in (".yml", ".yaml") and ".git" not in p.parts]
    return [*files, project / ".copier-answers.yml"]


def first_paragraph(markdown: str) -> str:
    """The plain text of the first paragraph, as a CommonMark renderer shows it."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    inline = tokens[[t.type for t in tokens].index("paragraph_open") + 1]
    assert {child.type for child in inline.children} <= {"text", "softbreak"}, inline.children
    return "".join(child.content for child in inline.children)


def light_venv(tmp_path: Path) -> Path:
    """A venv that sees this interpreter's packages (hatchling, pip) but installs into itself."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "_outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_hostile_answers_round_trip_and_the_project_installs(tmp_path):
    project = generate(tmp_path, "vision", name="hostile", package_name="vis", **HOSTILE)

    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert pyproject["description"] == HOSTILE["description"]
    assert pyproject["authors"] == [{"name": HOSTILE["author_name"], "email": HOSTILE["author_email"]}]
    assert pyproject["requires-python"] == ">=3.10,<3.13"

    for file in yaml_files(project):
        assert yaml.safe_load(file.read_text(encoding="utf-8")) is not None, file
    answers = read_answers(project)
    assert {key: answers[key] for key in HOSTILE} == HOSTILE

    readme = (project / "README.md").read_text(encoding="utf-8")
    assert first_paragraph(readme.split("\n", 1)[1]) == HOSTILE["description"]
    assert f"Copyright (c) {answers['copyright_year']} {HOSTILE['author_name']}\n" in (
        project / "LICENSE"
    ).read_text(encoding="utf-8")

    python = light_venv(tmp_path)
    pip = [
        str(python),
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "--disable-pip-version-check",
        "-e",
        str(project),
    ]
    result = subprocess.run(pip, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    probe = (
        "import importlib.metadata as m, vis; md = m.metadata('hostile');"
        "print(vis.__file__); print(md['Summary']); print(md['Author-email']);"
        "print(md['License-Expression'])"
    )
    shown = subprocess.run(
        [str(python), "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": ""},
    ).stdout.splitlines()
    assert shown[0] == str(project / "vis" / "__init__.py")
    assert shown[1] == HOSTILE["description"]
    assert 'Ada \\"Bobby\\" O\'Neil' in shown[2] and "example.com" in shown[2]
    assert shown[3] == "MIT"

    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "."], cwd=project, capture_output=True, text=True
    )
    assert lint.returncode == 0, lint.stdout
    assert git("status", "--porcelain", cwd=project) == ""  # an editable install writes nothing into it


def test_empty_email_is_left_out(tmp_path):
    project = generate(tmp_path, "vision", git=False, author_email="")
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert pyproject["authors"] == [{"name": "Your Name"}]


# Names that sort before and after `tests` (the generated tests import both the package and
# `tests.callbacks`, and isort must not reorder them for either).
@pytest.mark.parametrize("package", ["abc_net", "text_cls", "unet", "vis"])
@pytest.mark.parametrize("task", available_tasks())
def test_generated_project_is_lint_clean_for_any_package_name(tmp_path, task, package):
    project = generate(tmp_path, task, git=False, package_name=package)
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout
    isort = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]["isort"]
    assert isort["known-first-party"] == [package]
