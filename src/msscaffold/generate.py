"""Thin wrapper over Copier's public API: checks up front, then ``run_copy``/``run_update``.

Everything Copier could read from the user's environment that changes answers is pinned:
explicit ``settings`` (no user Copier settings), no ``_tasks``/``_jinja_extensions`` in the
template (so never ``unsafe``), ``defaults=True`` unless prompting on a terminal.

All or nothing: a ``new`` or ``update`` that fails or is stopped (Ctrl-C, SIGTERM, SIGHUP: a
closed terminal, ``timeout``) leaves the destination as it found it (``rollback.py``).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import warnings
from pathlib import Path

import yaml
from copier import Settings, run_copy, run_update

from msscaffold import __version__
from msscaffold.errors import MsscaffoldError
from msscaffold.gitcmd import git, toplevel
from msscaffold.moves import follow_moves
from msscaffold.rollback import rolled_back
from msscaffold.source import (
    TemplateSource,
    check_commit,
    check_no_nested_repo,
    copier_config,
    for_update,
    inside,
)
from msscaffold.tasks import features as task_features
from msscaffold.tasks import parse_features

ANSWERS_FILE = ".copier-answers.yml"
_BOOLS = dict.fromkeys(("true", "yes", "on", "1"), True) | dict.fromkeys(("false", "no", "off", "0"), False)
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")  # no nan/inf
_EXPECTED = {"int": "an integer", "float": "a finite number", "bool": "true or false"}
# Where Copier raises a plain ValueError for a bad *answer* (invalid choice, failed validator,
# wrong type, missing required answer). Any other ValueError from inside Copier is a bug.
_COPIER_ANSWER_CHECKS = {"validate_answer", "_parse_answer", "parse_answer", "cast_answer", "_ask"}


def _cast(key: str, kind: str, value: str):
    """Copier's question types from a ``--data`` string, refusing values that do not fit."""
    text = value.strip()
    if kind == "int" and _INT.fullmatch(text):
        return int(text)
    if kind == "float" and _FLOAT.fullmatch(text) and math.isfinite(float(text)):
        return float(text)
    if kind == "bool" and text.lower() in _BOOLS:
        return _BOOLS[text.lower()]
    if kind in _EXPECTED:
        raise MsscaffoldError(f"--data {key}={value}: {key} must be {_EXPECTED[kind]}")
    return value


def check_destination(dest: Path) -> None:
    """Refuse, in one line, a destination Copier would half-write, clobber or fail to create."""
    if dest.is_symlink():
        target = os.readlink(dest)
        if not dest.exists():
            raise MsscaffoldError(f"destination {dest} is a broken symlink (to {target}): remove it first")
        raise MsscaffoldError(f"destination {dest} is a symlink (to {target}); give the real folder instead")
    if dest.exists() and not dest.is_dir():
        raise MsscaffoldError(f"destination {dest} is a file, not a folder")
    if dest.is_dir() and any(dest.iterdir()):
        raise MsscaffoldError(f"destination {dest} exists and is not empty")
    ancestor = Path(os.path.abspath(dest))
    while not ancestor.exists():
        if ancestor.is_symlink():
            raise MsscaffoldError(f"cannot create {dest}: {ancestor} is a broken symlink")
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise MsscaffoldError(f"cannot create {dest}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise MsscaffoldError(f"cannot create {dest}: {ancestor} is not writable")


def check_data(data: dict[str, str], config: dict | None) -> dict:
    """Refuse unknown answer keys and values of the wrong type, naming the key."""
    if config is None:  # remote template: Copier validates what it can
        return dict(data)
    # Derived values (``when: false``, e.g. the task's entry script) are not answers.
    questions = {k: v for k, v in config.items()
                 if not k.startswith("_") and not (isinstance(v, dict) and v.get("when") is False)}
    checked = {}
    for key, value in data.items():
        if key not in questions:
            known = ", ".join(sorted(questions))
            raise MsscaffoldError(f"unknown answer {key!r} (--data keys: {known})")
        spec = questions[key] if isinstance(questions[key], dict) else {}
        if key == "features":  # a multiselect: "onnx,sweeps", "all" or "none", of the task's features
            task = str(data.get("task") or (config.get("task") or {}).get("default") or "")
            checked[key] = value if isinstance(value, list) else parse_features(value, config, task)
            continue
        checked[key] = _cast(key, spec.get("type", "str"), value)
    return checked


def _is_answer_error(exc: ValueError) -> bool:
    """Is this plain ValueError Copier refusing an answer (rather than a bug somewhere)?"""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    code = tb.tb_frame.f_code
    module = tb.tb_frame.f_globals.get("__name__", "")
    return module.startswith("copier.") and code.co_name in _COPIER_ANSWER_CHECKS


def _copier_call(fn, *args, **kwargs):
    """Run a Copier entry point; its user-facing failures become MsscaffoldError.

    User-facing: Copier's own errors (``CopierError``: bad template, dirty project,
    ``InteractiveSessionError``, ...), an answer Copier refuses (a plain ``ValueError``
    raised by its answer checks) and a failing git command. Anything else propagates
    unchanged: it is a bug, and the CLI shows its traceback. Ctrl-C always propagates.
    """
    from copier.errors import CopierError, UnsafeTemplateError
    from plumbum import ProcessExecutionError

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Dirty template changes included")
            return fn(*args, **kwargs)
    except KeyboardInterrupt:  # includes Copier's CopierAnswersInterrupt
        raise
    except UnsafeTemplateError as exc:  # Copier's own line suggests a --trust that msscaffold does not have
        found = re.search(r"unsafe features?: (.*?)\.\n", str(exc))
        names = found[1].split(",") if found else ["unsafe features"]
        features = ", ".join(f"_{name.strip()}" if found else name for name in names)
        raise MsscaffoldError(
            f"the template uses {features} (code Copier would run on this machine); msscaffold never runs "
            "a template's code and has no --trust: use a template without them, or run "
            "`copier copy --trust` yourself if you trust it"
        ) from exc
    except CopierError as exc:
        raise MsscaffoldError(_one_line(exc)) from exc
    except ValueError as exc:
        if not _is_answer_error(exc):
            raise
        raise MsscaffoldError(_one_line(exc)) from exc
    except ProcessExecutionError as exc:
        lines = [ln for ln in (exc.stderr or "").splitlines() if ln.strip()]
        last = lines[-1] if lines else str(exc)
        if "No url found for submodule" in last:  # a repository nested in a local template source
            last += " (the template source holds another git repository: move that folder out of it)"
        raise MsscaffoldError(f"git failed: {last}") from exc


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _created_paths(dest: Path) -> tuple[Path, bool]:
    """The topmost folder a copy into ``dest`` will create, and whether it exists already."""
    path = Path(os.path.abspath(dest))
    if path.exists():
        return path, True
    while not path.parent.exists():
        path = path.parent
    return path, False


def _remove_output(top: Path, existed: bool) -> None:
    """Undo a failed ``new``: what it created goes; a folder that existed (empty) stays, empty."""
    if not existed:
        shutil.rmtree(top, ignore_errors=True)
        return
    for child in top.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def new_project(
    dest: Path,
    *,
    source: TemplateSource,
    data: dict[str, str],
    interactive: bool = False,
    init_git: bool = True,
    quiet: bool = True,
    hold_signals: bool = False,
) -> dict:
    """Render the template into ``dest`` (and make it a git repo); return the answers.

    On any failure (Ctrl-C included) nothing is left behind: ``dest`` was checked to be
    missing or empty, and whatever this call created is removed again. ``hold_signals`` (the
    CLI): once complete, stop signals are ignored while the caller reports it (rollback.py).
    """
    check_destination(dest)
    if (root := inside(dest, source)) is not None:
        raise MsscaffoldError(f"{dest} is inside the template source {root}: generate the project outside it "
                              f"(e.g. msscaffold new {os.path.relpath(root.parent / Path(dest).name)})")
    check_no_nested_repo(source)
    answers = check_data(data, copier_config(source))
    top, existed = _created_paths(dest)
    with rolled_back(lambda: _remove_output(top, existed), hold=hold_signals):
        _copier_call(
            run_copy,
            source.src,
            dest,
            answers,
            vcs_ref=source.ref,
            settings=Settings(),
            user_defaults={"project_name": Path(os.path.abspath(dest)).name},
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
    try:
        answers = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise MsscaffoldError(f"{file} is not valid YAML: {_one_line(exc)}") from None
    if not isinstance(answers, dict) or not answers.get("_src_path") or not answers.get("_commit"):
        raise MsscaffoldError(f"{file} lacks _src_path/_commit: the project cannot be updated")
    if git("status", "--porcelain", cwd=top).strip():
        raise MsscaffoldError(f"{top} has uncommitted changes: commit or stash them, then update")
    return answers


def update_project(
    path: Path, *, vcs_ref: str | None = None, interactive: bool = False, quiet: bool = True,
    hold_signals: bool = False,
) -> list[str]:
    """Run ``copier update`` on ``path``; return the files left with conflicts. A failed or
    stopped update restores the project's committed state (it was clean: nothing else is lost)."""
    answers = read_answers(path)
    source = for_update(str(answers["_src_path"]), vcs_ref)
    check_commit(source, str(answers["_commit"]))
    check_no_nested_repo(source)
    top = toplevel(path)
    head = git("rev-parse", "HEAD", cwd=top).strip()
    with rolled_back(lambda: _restore(top, head), hold=hold_signals):
        _copier_call(
            run_update,
            path,
            data=_kept_features(source, answers),
            vcs_ref=source.ref,
            settings=Settings(),
            defaults=not interactive,
            overwrite=True,
            conflict="inline",
            unsafe=False,
            quiet=quiet,
        )
        moved = _copier_call(follow_moves, path, source.src, str(answers["_commit"]), answers)
    described = {entry.partition(" (")[0] for entry in moved}
    return sorted({*(f for f in find_conflicts(path) if f not in described), *moved})


def _kept_features(source: TemplateSource, answers: dict) -> dict:
    """A feature the project's own release did not offer was core there (e.g. 0.14.0's ResNets, before
    the ``archs`` feature): the update adds it to the ``features`` answer, so none of its files is removed."""
    had = answers.get("features")
    if not isinstance(had, list) or source.path is None:  # no answer: every feature (features.jinja)
        return {}
    task = str(answers.get("task", ""))
    old = copier_config(TemplateSource(source.src, str(answers["_commit"]), "custom"))
    new = copier_config(source)
    if old is None or new is None:
        return {}
    known = {f.name for f in task_features(old, task)}
    offered = [f.name for f in task_features(new, task)]
    if not set(offered) - known:
        return {}
    return {"features": [name for name in offered if name in had or name not in known]}


def _restore(top: Path, head: str) -> None:
    """Back to commit ``head`` with nothing untracked added (ignored files, e.g. runs/, stay)."""
    git("reset", "--quiet", "--hard", head, cwd=top)
    git("clean", "-d", "--force", "--quiet", cwd=top)


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


def add_features(path: Path, names: list[str], *, quiet: bool = True) -> tuple[list[str], list[str]]:
    """Bring optional features into a generated project: Copier's update re-answers ``features``
    at the project's own template version (no template upgrade mixed in), so the features' files
    arrive, the files they share merge and the user's edits stay. Returns (added, conflicts);
    ``added`` is empty when every feature asked for was already there (nothing is changed)."""
    answers = read_answers(path)
    commit = str(answers["_commit"])
    source = for_update(str(answers["_src_path"]), commit)
    check_commit(source, commit)
    check_no_nested_repo(source)
    config = copier_config(source)
    if config is not None and "features" not in config:
        raise MsscaffoldError(f"the project's template version {commit} has no optional features: "
                              "run msscaffold update first")
    task = str(answers.get("task", ""))
    wanted = parse_features(",".join(names), config, task)
    offered = [f.name for f in task_features(config, task)]
    # No answer: a project of a release before features existed, which had every one.
    had = answers["features"] if isinstance(answers.get("features"), list) else offered
    added = [name for name in wanted if name not in had]
    if not added:
        return [], []
    top = toplevel(path)
    head = git("rev-parse", "HEAD", cwd=top).strip()
    with rolled_back(lambda: _restore(top, head)):
        _copier_call(
            run_update,
            path,
            data={"features": [name for name in offered if name in had or name in added]},
            vcs_ref=source.ref,
            settings=Settings(),
            defaults=True,
            overwrite=True,
            conflict="inline",
            unsafe=False,
            quiet=quiet,
        )
    return added, find_conflicts(path)
