"""The ``msscaffold`` command line: ``new``, ``update``, ``tasks``.

msscaffold new my-project --task vision
msscaffold update my-project
msscaffold tasks
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from msscaffold import __version__
from msscaffold.errors import MsscaffoldError

app = typer.Typer(no_args_is_help=True, add_completion=True)
err = Console(stderr=True, soft_wrap=True, highlight=False)
out = Console(soft_wrap=True, highlight=False)
_state = {"debug": False}


def _task_names(src) -> list[str]:
    from msscaffold import source
    from msscaffold.tasks import task_names

    return task_names(source.copier_config(src))


def _complete_task(incomplete: str) -> list[str]:
    from msscaffold import source

    return [name for name in _task_names(source.resolve()) if name.startswith(incomplete)]


@contextmanager
def errors():
    """The one error boundary: every failure is one line on stderr and exit code 1."""
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except (Exception, KeyboardInterrupt) as exc:
        if _state["debug"]:
            raise
        if isinstance(exc, KeyboardInterrupt):
            err.print("[red]error:[/red] interrupted")
            raise typer.Exit(130) from None
        if isinstance(exc, MsscaffoldError):
            message = str(exc)
        else:
            message = f"{type(exc).__name__}: {exc} (run with --debug for the traceback)"
        err.print(f"[red]error:[/red] {escape(' '.join(message.split()))}")
        raise typer.Exit(1) from None


def _version(value: bool) -> None:
    if value:
        out.print(f"msscaffold {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")
    ] = False,
) -> None:
    """Generate MindSpore deep-learning projects that stay updatable with Copier."""
    _state["debug"] = debug


def _parse_data(items: list[str]) -> dict[str, str]:
    data = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise MsscaffoldError(f"--data {item!r}: expected KEY=VALUE")
        data[key.strip()] = value
    return data


@app.command()
def new(
    dest: Annotated[Path, typer.Argument(help="Folder to create (must be missing or empty).")],
    task: Annotated[
        str | None,
        typer.Option(help="Task family (see `msscaffold tasks`).", autocompletion=_complete_task),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Project name [default: DEST's folder name].")] = None,
    data: Annotated[list[str], typer.Option("--data", "-d", help="Any template answer, KEY=VALUE.")] = [],  # noqa: B006
    template: Annotated[str | None, typer.Option(help="Template path or git URL.")] = None,
    vcs_ref: Annotated[str | None, typer.Option(help="Template git ref (tag, branch, commit).")] = None,
    no_git: Annotated[bool, typer.Option("--no-git", help="Do not git init + commit.")] = False,
    defaults: Annotated[bool, typer.Option("--defaults", help="Never prompt; use defaults.")] = False,
) -> None:
    """Generate a new project in DEST."""
    with errors():
        from msscaffold import generate, source

        answers = _parse_data(data)
        src = source.resolve(template, vcs_ref)
        if task is not None:
            names = _task_names(src)
            if names and task not in names:
                raise MsscaffoldError(f"task {task!r} is not available in this template (available: "
                                      f"{', '.join(names)})")
            answers["task"] = task
        if name is not None:
            answers["project_name"] = name
        interactive = sys.stdin.isatty() and not defaults
        result = generate.new_project(
            dest, source=src, data=answers, interactive=interactive, init_git=not no_git
        )
        out.print(f"Created {dest} ({result.get('task', '?')}, template {result.get('_commit', src.src)}).")
        out.print(f"Next: cd {dest} && pip install -e . && python train.py")


@app.command()
def update(
    path: Annotated[Path, typer.Argument(help="Project folder.")] = Path("."),
    vcs_ref: Annotated[str | None, typer.Option(help="Template git ref to update to.")] = None,
    defaults: Annotated[
        bool, typer.Option("--defaults", help="Never prompt; keep previous answers.")
    ] = False,
) -> None:
    """Update a generated project to the current template; fail listing any conflicts."""
    with errors():
        from msscaffold import generate

        interactive = sys.stdin.isatty() and not defaults
        conflicts = generate.update_project(path, vcs_ref=vcs_ref, interactive=interactive)
        if conflicts:
            raise MsscaffoldError(f"update left conflicts to resolve in: {', '.join(conflicts)}")
        out.print(f"Updated {path}. Review with: git -C {path} diff")


@app.command()
def tasks() -> None:
    """List the task families, what each trains on by default, and which are available."""
    with errors():
        from msscaffold import source
        from msscaffold.tasks import FACTS, describe

        src = source.resolve()
        for name in _task_names(src):
            task = describe(name, source.read_text(src, FACTS.format(task=name)))
            out.print(f"{task.name:<12} {task.summary}")
            out.print(f"{'':<12} default: {task.trains_on}")
