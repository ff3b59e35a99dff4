"""The ``msscaffold`` command line: ``new``, ``update``, ``add``, ``tasks``, ``doctor``.

msscaffold new my-project --task vision --features onnx,sweeps
msscaffold update my-project
msscaffold add onnx
msscaffold tasks
msscaffold doctor
"""

from __future__ import annotations

import shlex
import sys
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from msscaffold import __version__
from msscaffold.errors import MsscaffoldError

# Typer's usage-error classes (from click, or its vendored copy), found without importing either.
_UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

err = Console(stderr=True, soft_wrap=True, highlight=False)
out = Console(soft_wrap=True, highlight=False)


class _OneLineUsageErrors(TyperGroup):
    """Command-line usage errors (a missing argument, an unknown option) in one line, exit code 2,
    like every other error here, instead of Typer's usage block and error box."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except _ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError" or not isinstance(exc, _UsageError):
                exc.show()  # bare `msscaffold`: the help text
                sys.exit(exc.exit_code)
            where = f" (see: {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
            _error(exc.format_message() + where)
            sys.exit(exc.exit_code)
        except typer.Abort:
            _error("aborted")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=_OneLineUsageErrors, no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False
)
BUG = (
    "This is a bug in msscaffold {version} (or in the template, with --template), not in your "
    "input: please report it with the command you ran and the traceback above."
)


@dataclass(frozen=True)
class Options:
    """The global options, handed from the callback to every command through the Typer context."""

    debug: bool = False


def _task_names(src) -> list[str]:
    from msscaffold import source
    from msscaffold.tasks import task_names

    return task_names(source.copier_config(src))


def _complete_task(incomplete: str) -> list[str]:
    from msscaffold import source

    return [name for name in _task_names(source.resolve()) if name.startswith(incomplete)]


def _error(message: str) -> None:
    err.print(f"[red]error:[/red] {escape(' '.join(message.split()))}")


@contextmanager
def errors(ctx: typer.Context):
    """The one error boundary, like Copier's own.

    - A user error (``MsscaffoldError``: bad answers, destination, template, git state;
      Copier's refusals arrive here already converted by ``generate``) or an OS error
      (disk full, permission denied): one line on stderr, exit code 1.
    - Ctrl-C: one line, exit code 130.
    - Anything else is a bug: its traceback, then one line saying so, exit code 1.
    ``--debug`` adds the traceback to the first two kinds.
    """
    debug = isinstance(ctx.obj, Options) and ctx.obj.debug
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        _error("interrupted")
        raise typer.Exit(130) from None
    except (MsscaffoldError, OSError) as exc:
        if debug:
            traceback.print_exc()
        message = str(exc) if isinstance(exc, MsscaffoldError) else f"{exc} (--debug shows where)"
        _error(message)
        raise typer.Exit(1) from None
    except Exception:
        traceback.print_exc()
        _error(BUG.format(version=__version__))
        raise typer.Exit(1) from None


def _version(value: bool) -> None:
    if value:
        out.print(f"msscaffold {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", envvar="MSSCAFFOLD_DEBUG", help="Add the traceback to one-line errors."),
    ] = False,
) -> None:
    """Generate MindSpore deep-learning projects that stay updatable with Copier."""
    ctx.obj = Options(debug=debug)


def _whole_process(ctx: typer.Context) -> bool:
    """Is this command the whole process (``msscaffold ...``, not an in-process ``CliRunner``)? Then
    once its work is complete, stop signals are ignored while it reports and exits (rollback.py)."""
    return ctx.find_root().info_name == "msscaffold"


def _parse_data(items: list[str], **options: str | None) -> dict[str, str]:
    """``-d KEY=VALUE`` answers plus the options that are answers (``--task``, ``--name``)."""
    data: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise MsscaffoldError(f"--data {item!r}: expected KEY=VALUE")
        if key in data and data[key] != value:
            raise MsscaffoldError(f"--data {key} given twice ({data[key]!r} and {value!r})")
        data[key] = value
    for key, value in options.items():
        if value is None:
            continue
        if key in data and data[key] != value:
            raise MsscaffoldError(f"{key} given twice: {value!r} by its option and {data[key]!r} by --data")
        data[key] = value
    return data


@app.command()
def new(
    ctx: typer.Context,
    dest: Annotated[Path, typer.Argument(help="Folder to create (must be missing or empty).")],
    task: Annotated[
        str | None,
        typer.Option(help="Task family (see `msscaffold tasks`).", autocompletion=_complete_task),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Project name (default: DEST's folder name).")] = None,
    features: Annotated[
        str | None,
        typer.Option(help="Optional features, comma-separated, or all / none (default: all): onnx, sweeps, "
                     "doctor, check, docker, loggers, reports, recipes; weights (vision, multimodal); archs, "
                     "folders, finetune (vision). One line each: `msscaffold tasks`."),
    ] = None,
    data: Annotated[list[str], typer.Option("--data", "-d", help="Any template answer, KEY=VALUE.")] = [],  # noqa: B006
    template: Annotated[str | None, typer.Option(help="Template path or git URL.")] = None,
    vcs_ref: Annotated[str | None, typer.Option(help="Template git ref (tag, branch, commit).")] = None,
    no_git: Annotated[bool, typer.Option("--no-git", help="Do not git init + commit.")] = False,
    defaults: Annotated[bool, typer.Option("--defaults", help="Never prompt; use defaults.")] = False,
) -> None:
    """Generate a new project in DEST."""
    with errors(ctx):
        from msscaffold import generate, source

        answers = _parse_data(data, task=task, project_name=name, features=features)
        src = source.resolve(template, vcs_ref)
        names = _task_names(src)
        if task is not None and names and task not in names:
            available = ", ".join(names)
            message = f"unknown task {task!r}: not available in this template (choose from {available})"
            raise MsscaffoldError(message)
        interactive = sys.stdin.isatty() and not defaults
        result = generate.new_project(
            dest,
            source=src,
            data=answers,
            interactive=interactive,
            init_git=not no_git,
            hold_signals=_whole_process(ctx),
        )
        out.print(f"Created {dest} ({result.get('task', '?')}, template {result.get('_commit', src.src)}).")
        next_step = f"cd {shlex.quote(str(dest))} && pip install -e '.[dev]' && python train.py"
        out.print(f"Next: {next_step}", markup=False)


@app.command()
def update(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="Project folder.")] = Path("."),
    vcs_ref: Annotated[str | None, typer.Option(help="Template git ref to update to.")] = None,
    defaults: Annotated[
        bool, typer.Option("--defaults", help="Never prompt; keep previous answers.")
    ] = False,
) -> None:
    """Update a generated project to the current template; fail listing any conflicts."""
    with errors(ctx):
        from msscaffold import update

        interactive = sys.stdin.isatty() and not defaults
        conflicts = update.update_project(
            path, vcs_ref=vcs_ref, interactive=interactive, hold_signals=_whole_process(ctx)
        )
        if conflicts:
            raise MsscaffoldError(f"update left conflicts to resolve in: {', '.join(conflicts)}")
        out.print(f"Updated {path}. Review with: git -C {path} diff")


@app.command()
def add(
    ctx: typer.Context,
    names: Annotated[
        list[str], typer.Argument(metavar="FEATURE", help="Features to add (see `msscaffold tasks`).")
    ],
    path: Annotated[Path, typer.Option(help="Project folder.")] = Path("."),
) -> None:
    """Add optional features to a generated project (Copier's update re-answers `features`: your
    edits are kept). Needs a clean git tree; leaves the change for you to review and commit."""
    with errors(ctx):
        from msscaffold import update

        added, conflicts = update.add_features(path, names)
        if not added:
            out.print(f"Already in {path}: {', '.join(names)} (nothing to add).")
            return
        if conflicts:
            raise MsscaffoldError(f"add left conflicts to resolve in: {', '.join(conflicts)}")
        out.print(f"Added {', '.join(added)}. Review with: git -C {path} status")


@app.command()
def tasks(ctx: typer.Context) -> None:
    """List the task families, what each trains on by default, and their optional features."""
    with errors(ctx):
        from msscaffold import source
        from msscaffold.tasks import FACTS, describe, features

        src = source.resolve()
        config = source.copier_config(src)
        for name in _task_names(src):
            task = describe(name, source.read_text(src, FACTS.format(task=name)))
            out.print(f"{task.name:<12} {task.summary}")
            out.print(f"{'':<12} default: {task.trains_on}")
            for feature in features(config, name):
                out.print(f"{'':<12} feature {feature.name:<8} {feature.summary}")


@app.command()
def doctor(
    ctx: typer.Context,
    project: Annotated[
        Path | None, typer.Option(help="A generated project to check too (its config and extras).")
    ] = None,
) -> None:
    """Check Python, MindSpore and this machine for training (the projects' own `doctor`)."""
    with errors(ctx):
        from msscaffold import doctor as _doctor

        code = _doctor.run(["--project", str(project)] if project else [])
    raise typer.Exit(code)
