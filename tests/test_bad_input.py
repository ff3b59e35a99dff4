"""Bad input: one-line error on stderr, no traceback, exit code != 0, nothing created or changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from helpers import generate, git, msscaffold


def snapshot(root):
    """Every path under root with its content, to prove a failed command changed nothing."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            state[path] = open(path, "rb").read() if os.path.isfile(path) else None
    return state


def assert_one_line_error(result, *needles):
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


NEW_CASES = {
    "unknown task": (["--task", "speech"], "unknown task 'speech'"),
    "name 9lives": (["--name", "9lives"], "project_name '9lives'"),
    "name with space": (["--name", "my project"], "project_name 'my project'"),
    "name keyword": (["--name", "import"], "keyword"),
    "name empty": (["--name", ""], "project_name ''"),
    "name path": (["--name", "../x"], "project_name '../x'"),
    "package mindspore": (["-d", "package_name=mindspore"], "package_name 'mindspore'"),
    "package class": (["-d", "package_name=class"], "package_name 'class'"),
    "unknown data key": (["-d", "colour=blue"], "unknown answer 'colour'"),
    "data not KEY=VALUE": (["-d", "epochs"], "KEY=VALUE"),
    "epochs not a number": (["-d", "epochs=abc"], "epochs must be an integer"),
    "epochs zero": (["-d", "epochs=0"], "epochs must be > 0"),
    "template missing": (["--template", "/nonexistent/template"], "does not exist"),
    "vcs ref missing": (["--vcs-ref", "v999"], "'v999' not found"),
}


@pytest.mark.parametrize("args, needle", NEW_CASES.values(), ids=NEW_CASES.keys())
def test_new_refuses(tmp_path, args, needle):
    before = snapshot(tmp_path)
    result = msscaffold("new", "proj", *args, cwd=tmp_path)
    assert_one_line_error(result, needle)
    assert snapshot(tmp_path) == before


def test_new_refuses_non_empty_destination(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "keep.txt").write_text("mine")
    before = snapshot(tmp_path)
    assert_one_line_error(msscaffold("new", "proj", cwd=tmp_path), "not empty")
    assert snapshot(tmp_path) == before


def test_new_refuses_file_destination(tmp_path):
    (tmp_path / "proj").write_text("a file")
    before = snapshot(tmp_path)
    assert_one_line_error(msscaffold("new", "proj", cwd=tmp_path), "is a file")
    assert snapshot(tmp_path) == before


def test_new_refuses_unwritable_parent(tmp_path):
    parent = tmp_path / "locked"
    parent.mkdir()
    cmd = [sys.executable, "-m", "msscaffold", "new", str(parent / "proj")]
    if os.geteuid() == 0:
        # root ignores permission bits: make the parent a read-only bind mount instead.
        assert shutil.which("unshare"), "need unshare to make a read-only folder as root"
        script = f'mount --bind "{parent}" "{parent}" && mount -o remount,bind,ro "{parent}" && exec "$@"'
        cmd = ["unshare", "-m", "sh", "-c", script, "sh", *cmd]
    else:
        parent.chmod(0o555)
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    finally:
        parent.chmod(0o755)
    assert_one_line_error(result, "not writable")
    assert list(parent.iterdir()) == []


def test_update_refuses_outside_git(tmp_path):
    project = generate(tmp_path, git=False)
    before = snapshot(tmp_path)
    assert_one_line_error(msscaffold("update", str(project)), "not inside a git repository")
    assert snapshot(tmp_path) == before


def test_update_refuses_dirty_tree(tmp_path):
    project = generate(tmp_path)
    (project / "README.md").write_text("edited, not committed\n")
    before = snapshot(tmp_path)
    assert_one_line_error(msscaffold("update", str(project)), "uncommitted changes")
    assert snapshot(tmp_path) == before


def test_update_refuses_folder_without_answers(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "x.txt").write_text("x")
    git("init", "-q", cwd=folder)
    git("add", "-A", cwd=folder)
    git("commit", "-qm", "x", cwd=folder)
    before = snapshot(tmp_path)
    assert_one_line_error(msscaffold("update", str(folder)), "no .copier-answers.yml")
    assert snapshot(tmp_path) == before


def test_debug_shows_traceback(tmp_path):
    result = msscaffold("--debug", "new", "proj", "--task", "speech", cwd=tmp_path)
    assert result.returncode != 0 and "Traceback" in result.stderr
