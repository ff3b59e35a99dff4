"""Thin wrapper over Copier's public API: checks up front, then ``run_copy``/``run_update``.

Everything Copier could read from the user's environment that changes answers is pinned:
explicit ``settings`` (no user Copier settings), no ``_tasks``/``_jinja_extensions`` in the
template (so never ``unsafe``), ``defaults=True`` unless prompting on a terminal.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import yaml
from copier import Settings, run_copy, run_update

from msscaffold import __version__
from msscaffold.errors import MsscaffoldError
from msscaffold.gitcmd import git, toplevel
from msscaffold.source import TemplateSource, copier_config, for_update

ANSWERS_FILE = ".copier-answers.yml"
_BOOLS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def _cast(kind: str, value: str):
    """Copier's question types from a ``--data`` string; ValueError when it does not fit."""
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "bool":
        return _BOOLS[value.lower()] if value.lower() in _BOOLS else int("not a bool")
    return value


def check_destination(dest: Path) -> None:
    """Refuse a destination Copier would half-write or could not create."""
    if dest.is_file():
        raise MsscaffoldError(f"destination {dest} is a file")
    if dest.is_dir() and any(dest.iterdir()):
        raise MsscaffoldError(f"destination {dest} exists and is not empty")
    ancestor = dest.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise MsscaffoldError(f"cannot create {dest}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise MsscaffoldError(f"cannot create {dest}: {ancestor} is not writable")


def check_data(data: dict[str, str], config: dict | None) -> dict:
    """Refuse unknown answer keys and values of the wrong type, naming the key."""
    if config is None:  # remote template: Copier validates what it can
        return dict(data)
    questions = {k: v for k, v in config.items() if not k.startswith("_")}
    checked = {}
    for key, value in data.items():
        if key not in questions:
            known = ", ".join(sorted(questions))
            raise MsscaffoldError(f"unknown answer {key!r} (--data keys: {known})")
        spec = questions[key] if isinstance(questions[key], dict) else {}
        kind = spec.get("type", "str")
        try:
            checked[key] = _cast(kind, value)
        except ValueError:
            expected = {"int": "an integer", "float": "a number", "bool": "true or false"}.get(kind, kind)
            raise MsscaffoldError(f"--data {key}={value}: {key} must be {expected}") from None
    return checked


def _copier_call(fn, *args, **kwargs):
    """Run a Copier entry point; its user-facing failures become MsscaffoldError."""
    from copier.errors import CopierError
    from plumbum import ProcessExecutionError

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Dirty template changes included")
            return fn(*args, **kwargs)
    except (CopierError, ValueError) as exc:
        raise MsscaffoldError(" ".join(str(exc).split()) or type(exc).__name__) from exc
    except ProcessExecutionError as exc:
        lines = [ln for ln in (exc.stderr or "").splitlines() if ln.strip()]
        raise MsscaffoldError(f"git failed: {lines[-1] if lines else exc}") from exc


def new_project(
    dest: Path,
    *,
    source: TemplateSource,
    data: dict[str, str],
    interactive: bool = False,
    init_git: bool = True,
    quiet: bool = True,
) -> dict:
    """Render the template into ``dest`` (and make it a git repo); return the answers."""
    check_destination(dest)
    answers = check_data(data, copier_config(source))
    name = dest.absolute().name
    _copier_call(
        run_copy,
        source.src,
        dest,
        answers,
        vcs_ref=source.ref,
        settings=Settings(),
        user_defaults={"project_name": name},
        defaults=not interactive,
        unsafe=False,
        quiet=quiet,
    )
    file = dest / ANSWERS_FILE
    answers = yaml.safe_load(file.read_text(encoding="utf-8")) if file.is_file() else {}
    if init_git:
        commit = answers.get("_commit", "unversioned")
        commit_all(dest, f"Initial commit from msscaffold {__version__} (template {commit})")
    return answers


def commit_all(repo: Path, message: str) -> None:
    """``git init`` + one commit; with no git identity configured, a placeholder author."""
    git("init", "--quiet", "--template=", cwd=repo)  # no sample hooks to copy: faster
    git("add", "--all", cwd=repo)
    commit = ["commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", message]
    try:
        git(*commit, cwd=repo)
    except MsscaffoldError as exc:
        if not any(word in str(exc) for word in ("ident", "email", "who you are")):
            raise
        git("-c", "user.name=msscaffold", "-c", "user.email=msscaffold@localhost", *commit, cwd=repo)


def read_answers(path: Path) -> dict:
    """The project's answers, after the checks ``copier update`` needs (git, clean, generated)."""
    if not path.is_dir():
        raise MsscaffoldError(f"{path} is not a directory")
    top = toplevel(path)
    if top is None:
        raise MsscaffoldError(f"{path} is not inside a git repository: commit the project to git first")
    file = path / ANSWERS_FILE
    if not file.is_file():
        raise MsscaffoldError(f"{path} has no {ANSWERS_FILE}: not a project generated by msscaffold/Copier")
    answers = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    if not answers.get("_src_path") or not answers.get("_commit"):
        raise MsscaffoldError(f"{file} lacks _src_path/_commit: the project cannot be updated")
    if git("status", "--porcelain", cwd=top).strip():
        raise MsscaffoldError(f"{top} has uncommitted changes: commit or stash them, then update")
    return answers


def update_project(
    path: Path, *, vcs_ref: str | None = None, interactive: bool = False, quiet: bool = True
) -> list[str]:
    """Run ``copier update`` on ``path``; return the files left with conflicts."""
    answers = read_answers(path)
    source = for_update(str(answers["_src_path"]), vcs_ref)
    _copier_call(
        run_update,
        path,
        vcs_ref=source.ref,
        settings=Settings(),
        defaults=not interactive,
        overwrite=True,
        conflict="inline",
        unsafe=False,
        quiet=quiet,
    )
    return find_conflicts(path)


def find_conflicts(path: Path) -> list[str]:
    """Unmerged paths, ``*.rej`` files and files with conflict markers, relative to ``path``."""
    found = set(git("diff", "--name-only", "--diff-filter=U", "--relative", cwd=path).split("\n"))
    changed = git("status", "--porcelain", "-uall", "--no-renames", cwd=path)
    top = Path(git("rev-parse", "--show-toplevel", cwd=path).strip())
    for line in changed.splitlines():
        file = top / line[3:].strip('"')
        rel = os.path.relpath(file, path)
        if file.suffix == ".rej":
            found.add(rel)
        elif file.is_file() and _has_markers(file):
            found.add(rel)
    return sorted(f for f in found if f)


def _has_markers(file: Path) -> bool:
    try:
        text = file.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return False
    return any(line.startswith("<<<<<<< ") for line in text.splitlines())
