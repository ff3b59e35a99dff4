"""Every available task renders a clean project; availability agrees with the template's folders."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    PACKAGE_DIR,
    REPO,
    available_tasks,
    computed_questions,
    copier_yml,
    generate,
    git,
    msscaffold,
    read_answers,
    task_facts,
)

TASKS_DIR = REPO / "template" / PACKAGE_DIR / "tasks"
JUNK = re.compile(
    r"(^|/)(__pycache__|\.DS_Store|\.ruff_cache|\.pytest_cache|_partials)(/|$)|\.(py[co]|jinja|rej)$"
)
LEAK = re.compile(r"(?<!\$)\{\{|\{%")  # `${{ }}` is GitHub Actions syntax, not a leak


def tree(project: Path) -> list[str]:
    return sorted(
        p.relative_to(project).as_posix()
        for p in project.rglob("*")
        if ".git" not in p.relative_to(project).parts
    )


def rendered_from_jinja(rel: str, package: str) -> bool:
    """Was this generated file rendered from a ``.jinja`` template (so Jinja could leak)?"""
    parts = [PACKAGE_DIR if part == package else part for part in rel.split("/")]
    return (REPO / "template" / ("/".join(parts) + ".jinja")).is_file()


def committed_task_folders() -> set[str]:
    """Task folders under template/<package>/tasks/ that git tracks (work in progress does not count)."""
    rel = TASKS_DIR.relative_to(REPO).as_posix()
    try:
        listed = git("ls-files", "-z", "--", rel, cwd=REPO).split("\0")
    except subprocess.CalledProcessError:  # not a git checkout (e.g. an unpacked sdist)
        return {p.name for p in TASKS_DIR.iterdir() if p.is_dir()} if TASKS_DIR.is_dir() else set()
    return {path[len(rel) + 1 :].split("/")[0] for path in listed if path.count("/") > rel.count("/") + 1}


def test_task_choices_agree_with_template_folders():
    available, folders = set(available_tasks()), committed_task_folders()
    assert available == folders, (
        f"copier.yml's task choices are {sorted(available)} but the committed task folders are "
        f"{sorted(folders)}: add/remove the task's line in the choices"
    )


def test_task_not_built_yet_is_refused(tmp_path):
    """A template whose choices list only vision (as before the other tasks landed): both
    msscaffold and plain Copier refuse nlp with one line and create nothing."""
    clone = tmp_path / "vision-only"
    git("clone", "-q", "--no-tags", str(REPO), str(clone), cwd=tmp_path)
    text = (clone / "copier.yml").read_text(encoding="utf-8")
    shrunk = re.sub(r"\n    (nlp|recommender|multimodal): \1", "", text)
    assert shrunk != text
    (clone / "copier.yml").write_text(shrunk, encoding="utf-8")
    git("commit", "-qam", "only vision", cwd=clone)

    result = msscaffold(
        "new", "proj", "--task", "nlp", "--template", str(clone), "--vcs-ref", "HEAD", cwd=tmp_path
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and "not available" in lines[0], result.stderr
    cmd = [sys.executable, "-m", "copier", "copy", "--defaults", "-d", "task=nlp", str(clone), "out"]
    plain = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert plain.returncode != 0 and "nlp" in plain.stderr
    assert not (tmp_path / "proj").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("task", available_tasks())
def test_generated_tree_is_clean(tmp_path, task):
    project = generate(tmp_path, task, name="my-proj")
    answers = read_answers(project)
    package = answers["package_name"]
    files = tree(project)
    assert not [f for f in files if JUNK.search(f)], "junk files"
    assert not [f for f in files if "{{" in f or "{%" in f], "unrendered paths"
    # Only the task's own folder; of models/ exactly the modules its facts name (none: no folder).
    tasks = {f.split("/")[2] for f in files if f.startswith(f"{package}/tasks/") and f.count("/") > 2}
    assert tasks == {task}
    models = {f.removeprefix(f"{package}/models/") for f in files if f.startswith(f"{package}/models/")}
    named = getattr(task_facts(task), "models", [])
    assert models == ({"__init__.py", *named} if named else set())
    scripts = {f for f in files if "/" not in f and f.endswith(".py")}
    # Besides the shared four: the task's own command and its weight importer, if its facts name them.
    facts = task_facts(task)
    own = {facts.entry_script: "cli", facts.weights_script: "convert_weights"}
    own.pop("", None)
    assert scripts == {"train.py", "eval.py", "export.py", "sweep.py", *own}
    for script, module in own.items():
        assert f"tasks.{task}.{module} import main" in (project / script).read_text()
    leaks = [
        f
        for f in files
        if (project / f).is_file()
        and rendered_from_jinja(f, package)
        and LEAK.search((project / f).read_text())
    ]
    assert not leaks, f"Jinja leaked into {leaks}"
    questions = {k for k in copier_yml() if not k.startswith("_")} - computed_questions()
    assert set(answers) == questions | {"_src_path", "_commit"}
    assert answers["task"] == task and answers["package_name"] == "my_proj"
    assert git("rev-list", "--count", "HEAD", cwd=project).strip() == "1"
    assert git("status", "--porcelain", cwd=project) == ""


def test_plain_copier_renders_the_same_project(tmp_path):
    task = available_tasks()[0]
    ours = generate(tmp_path / "a", task, name="demo", git=False)
    cmd = [
        "copier",
        "copy",
        "--defaults",
        "-d",
        f"task={task}",
        "-d",
        "project_name=demo",
        str(REPO),
        "b/demo",
    ]
    result = subprocess.run(
        [sys.executable, "-m", *cmd], cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 0, result.stderr
    theirs = tmp_path / "b" / "demo"
    assert tree(ours) == tree(theirs)
    for rel in tree(ours):
        if (ours / rel).is_file() and rel != ".copier-answers.yml":
            assert (ours / rel).read_bytes() == (theirs / rel).read_bytes(), rel


def test_per_task_training_defaults(tmp_path):
    spec = copier_yml()
    for key in ("epochs", "batch_size", "learning_rate"):  # read from the task's own facts
        assert f"'/config.jinja' as t %}}{{{{ t.{key} }}}}" in spec[key]["default"], key
    answers = read_answers(generate(tmp_path, available_tasks()[0], git=False, seed=7, device="CPU"))
    assert (answers["seed"], answers["device"]) == (7, "CPU")
    assert answers["epochs"] > 0 and answers["batch_size"] > 0 and answers["learning_rate"] > 0


def test_the_readme_counts_the_lines_of_the_four_core_files(tmp_path):
    """'How training works' states how many lines a reader follows: it must be the real count, under ~700."""
    project = generate(tmp_path, "vision", name="count", git=False)
    engine = project / "count" / "engine"
    core = ("loop", "step", "optim", "data")
    lines = sum(len((engine / f"{name}.py").read_text().splitlines()) for name in core)
    assert f"({lines} lines together at this template version)" in (project / "README.md").read_text()
    assert lines <= 700
