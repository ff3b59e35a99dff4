"""The CLI surface: help, version, tasks, and `new` end to end (CliRunner and subprocess)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys

import pytest
from helpers import REPO, available_tasks, git, msscaffold, read_answers, task_facts
from typer.testing import CliRunner

from msscaffold import __version__
from msscaffold.cli import app

runner = CliRunner()


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"msscaffold {__version__}"


def test_help_everywhere():
    for args in ([], ["--help"], ["new", "--help"], ["update", "--help"], ["tasks", "--help"]):
        result = runner.invoke(app, args)
        assert "Usage" in result.output, args
    assert "--data" in runner.invoke(app, ["new", "--help"]).output


def test_tasks_lists_every_task_of_the_template():
    result = runner.invoke(app, ["tasks"])
    assert result.exit_code == 0, result.output
    assert set(available_tasks()) == {"vision", "nlp", "recommender", "multimodal"}
    for name in available_tasks():
        line = next(ln for ln in result.stdout.splitlines() if ln.startswith(name))
        assert task_facts(name).summary in line
        assert task_facts(name).trains_on in result.stdout


def test_new_in_process(tmp_path):
    dest = tmp_path / "my projects" / "proj"
    result = runner.invoke(app, ["new", str(dest), "--task", "vision", "-d", "epochs=2", "--no-git"])
    assert result.exit_code == 0, result.output
    next_line = next(line for line in result.output.splitlines() if line.startswith("Next: "))
    assert shlex.split(next_line.removeprefix("Next: "))[:2] == ["cd", str(dest)]  # pasted in a shell
    answers = read_answers(dest)
    assert (answers["project_name"], answers["package_name"], answers["epochs"]) == ("proj", "proj", 2)
    assert not (dest / ".git").exists()


def test_new_subprocess_makes_one_commit(tmp_path):
    result = msscaffold("new", "my-proj", "--task", "vision", "--name", "cool-net", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    project = tmp_path / "my-proj"
    answers = read_answers(project)
    assert answers["project_name"] == "cool-net" and answers["package_name"] == "cool_net"
    assert answers["_commit"] and answers["_src_path"]
    assert git("rev-list", "--count", "HEAD", cwd=project).strip() == "1"
    assert git("status", "--porcelain", cwd=project) == ""


def test_new_without_git_identity_still_commits(tmp_path, monkeypatch):
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var)
    monkeypatch.delenv("EMAIL", raising=False)
    # Forbid git's guess from user@hostname, as on a fresh machine with no git config.
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.useConfigOnly")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
    result = msscaffold("new", "p", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert git("rev-list", "--count", "HEAD", cwd=tmp_path / "p").strip() == "1"
    assert git("log", "-1", "--format=%an", cwd=tmp_path / "p").strip() == "msscaffold"


def _boom(exc):
    def fail(*args, **kwargs):
        raise exc

    return fail


def test_ctrl_c_exits_130_in_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """Ctrl-C after Copier has written the project (during the first commit)."""
    from msscaffold import generate

    monkeypatch.setattr(generate, "commit_all", _boom(KeyboardInterrupt()))
    result = runner.invoke(app, ["new", str(tmp_path / "proj")])
    assert result.exit_code == 130
    assert result.stderr.strip().splitlines() == ["error: interrupted"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_during_new_leaves_nothing(tmp_path, monkeypatch, signum):
    """SIGTERM (``timeout``, a scheduler) or SIGHUP (a closed terminal) once Copier has written
    the project: rolled back as Ctrl-C is (0.10.1: the process died, leaving the files)."""
    from msscaffold import generate

    def stopped(*args, **kwargs):
        os.kill(os.getpid(), signum)

    monkeypatch.setattr(generate, "commit_all", stopped)
    previous = signal.signal(signum, signal.SIG_DFL)  # as a terminal starts it (pytest may run under nohup)
    try:
        result = runner.invoke(app, ["new", str(tmp_path / "proj")])
        assert signal.getsignal(signum) is signal.SIG_DFL  # the process's own handlers are back
    finally:
        signal.signal(signum, previous)
    assert result.exit_code == 130
    assert result.stderr.strip().splitlines() == ["error: interrupted"]
    assert list(tmp_path.iterdir()) == []


def test_under_nohup_a_closed_terminal_does_not_stop_new(tmp_path, monkeypatch):
    """A SIGHUP the process ignores (``nohup msscaffold new …``) stays ignored: the project is
    written (0.14.0 replaced the ignore with its rollback handler, so nohup did not protect it)."""
    from msscaffold import generate

    commit_all = generate.commit_all

    def hung_up(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGHUP)
        commit_all(*args, **kwargs)

    monkeypatch.setattr(generate, "commit_all", hung_up)
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        result = runner.invoke(app, ["new", str(tmp_path / "proj")])
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "proj" / ".git").is_dir() and (tmp_path / "proj" / "train.py").is_file()


def test_a_stop_signal_as_new_reports_success_keeps_the_success(tmp_path):
    """SIGTERM after the project is complete (as `new` prints it): exit 0 with the project, never
    143 with a complete project that a retrying script then meets as "destination exists"."""
    script = tmp_path / "late.py"
    script.write_text(
        "import os, signal\n"
        "import msscaffold.cli as cli\n"
        "say = cli.out.print\n"
        "def late(*args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    say(*args, **kwargs)\n"
        "cli.out.print = late\n"
        "cli.app(prog_name='msscaffold')\n"
    )
    result = subprocess.run([sys.executable, str(script), "new", "proj", "--task", "vision"], cwd=tmp_path,
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Created proj (vision")
    assert (tmp_path / "proj" / ".copier-answers.yml").is_file()


def test_a_bug_shows_its_traceback_and_says_so(tmp_path, monkeypatch):
    from msscaffold import generate

    monkeypatch.setattr(generate, "commit_all", _boom(RuntimeError("an unexpected state")))
    result = runner.invoke(app, ["new", str(tmp_path / "proj")])
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "RuntimeError: an unexpected state" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: This is a bug in msscaffold")
    assert list(tmp_path.iterdir()) == []


def test_user_errors_have_no_traceback_unless_debug(tmp_path):
    plain = msscaffold("new", "p", "-d", "seed=-1", cwd=tmp_path)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    expected = "error: Validation error for question 'seed': seed must be >= 0"
    assert plain.stderr.strip().splitlines() == [expected]
    for debug in (["--debug"], []):
        env = {**os.environ, "MSSCAFFOLD_DEBUG": "1"} if not debug else None
        result = msscaffold(*debug, "new", "p", "-d", "seed=-1", cwd=tmp_path, env=env)
        assert result.returncode == 1 and "Traceback" in result.stderr
        assert result.stderr.strip().splitlines()[-1] == plain.stderr.strip()
    assert list(tmp_path.iterdir()) == []


def _raise_in(module: str, function: str):
    """A ValueError raised by a function named `function` in a module named `module`."""
    namespace = {"__name__": module}
    exec(f"def {function}():\n    raise ValueError('x')\n", namespace)
    try:
        namespace[function]()
    except ValueError as exc:
        return exc


def test_only_copiers_answer_checks_count_as_user_errors():
    from msscaffold.generate import _is_answer_error

    assert _is_answer_error(_raise_in("copier._user_data", "validate_answer"))
    assert _is_answer_error(_raise_in("copier._user_data", "_parse_answer"))
    assert not _is_answer_error(_raise_in("copier._main", "_render_file"))  # a bug, not an answer
    assert not _is_answer_error(_raise_in("msscaffold.x", "validate_answer"))


def quick_start_commands() -> list[str]:
    """The README's quick start, one command per `&&`."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [part.strip() for part in block.strip().split("&&")]


def test_quick_start_typed_in_a_clone_keeps_update_and_new_working(tmp_path):
    """The quick start as typed, in a fresh clone (editable-install: the clone's src first on the path;
    pip and the training are left out: the environment has the packages, test_tasks trains), then
    `msscaffold update` in the project and a second `new` from the clone: all exit 0. Inside the
    clone, `new` is refused in one line, and so is a clone that holds another repository."""
    clone = tmp_path / "clone"
    git("clone", "--quiet", str(REPO), str(clone), cwd=tmp_path)
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}
    cwd = clone
    for command in quick_start_commands():
        words = shlex.split(command)
        if words[0] == "cd":
            cwd = (cwd / words[1]).resolve()
        elif words[0] == "msscaffold":
            result = msscaffold(*words[1:], cwd=cwd, env=env)
            assert result.returncode == 0, result.stderr
        else:
            assert words[0] in ("pip", "python"), command
    assert cwd == tmp_path / "demo" and (cwd / ".copier-answers.yml").is_file()
    assert git("status", "--porcelain", cwd=clone) == ""  # the clone sees nothing new
    update = msscaffold("update", cwd=cwd, env=env)
    assert update.returncode == 0, update.stderr
    again = msscaffold("new", "--task", "recommender", "../rec2", cwd=clone, env=env)
    assert again.returncode == 0, again.stderr

    inside = msscaffold("new", "--task", "vision", "demo2", cwd=clone, env=env)
    assert inside.returncode == 1 and "inside the template source" in inside.stderr
    assert not (clone / "demo2").exists()
    git("init", "--quiet", str(clone / "stray"), cwd=clone)
    nested = msscaffold("update", cwd=cwd, env=env)
    assert nested.returncode == 1 and nested.stderr.count("\n") == 1, nested.stderr
    assert "stray/" in nested.stderr
