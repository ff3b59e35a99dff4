"""The CLI surface: help, version, tasks, and `new` end to end (CliRunner and subprocess)."""

from __future__ import annotations

from helpers import available_tasks, git, msscaffold, read_answers, task_facts
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
    dest = tmp_path / "proj"
    result = runner.invoke(app, ["new", str(dest), "--task", "vision", "-d", "epochs=2", "--no-git"])
    assert result.exit_code == 0, result.output
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
