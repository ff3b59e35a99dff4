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
    "seed negative": (["-d", "seed=-5"], "seed must be >= 0"),
    "seed past 32 bits": (["-d", "seed=99999999999"], "seed must be below 2147483648"),
    "epochs huge": (["-d", "epochs=99999999999999999999999999"], "epochs must be at most 100000"),
    "batch huge": (["-d", "batch_size=10000000"], "batch_size must be at most 65536"),
    "epochs not whole": (["-d", "epochs=1.5"], "epochs must be an integer"),
    "lr nan": (["-d", "learning_rate=nan"], "learning_rate must be a finite number"),
    "lr overflows": (["-d", "learning_rate=1e400"], "learning_rate must be a finite number"),
    "lr negative": (["-d", "learning_rate=-0.1"], "learning_rate must be > 0"),
    "unknown license": (["-d", "license=GPL-3.0"], "'license'"),
    "year not a year": (["-d", "copyright_year=99"], "copyright_year must be a four-digit year"),
    "device unknown": (["-d", "device=TPU"], "'device'"),
    "data given twice": (["-d", "seed=1", "-d", "seed=2"], "seed given twice"),
    "task twice": (["--task", "nlp", "-d", "task=vision"], "task given twice"),
    "name trailing newline": (["--name", "demo\n"], "project_name"),
    "package trailing newline": (["-d", "package_name=demo\n"], "package_name"),
    "description newline": (["-d", "description=line one\nline two"], "description must be one line"),
    "description tab": (["-d", "description=a\tb"], "description must be one line"),
    "description CR": (["-d", "description=a\rb"], "description must be one line"),
    "description line separator": (["-d", "description=a\u2028b"], "description must be one line"),
    "author newline": (["-d", "author_name=Ada\nLovelace"], "author_name must be one line"),
    "author DEL": (["-d", "author_name=Ada\x7f"], "author_name must be one line"),
    "author empty": (["-d", "author_name= "], "author_name must not be empty"),
    "email newline": (["-d", "author_email=ada@example.com\n"], "author_email must be one line"),
    "email no at": (["-d", "author_email=ada.example.com"], "not an e-mail address"),
}


@pytest.mark.parametrize("args, needle", NEW_CASES.values(), ids=NEW_CASES.keys())
def test_new_refuses(tmp_path, args, needle):
    before = snapshot(tmp_path)
    result = msscaffold("new", "proj", *args, cwd=tmp_path)
    assert_one_line_error(result, needle)
    assert snapshot(tmp_path) == before


def test_a_template_with_tasks_is_refused_naming_what_msscaffold_does_instead(tmp_path):
    """Copier's own line suggests a --trust option msscaffold does not have."""
    template = tmp_path / "unsafe"
    template.mkdir()
    (template / "copier.yml").write_text('_tasks:\n  - "touch pwned"\nproject_name:\n  type: str\n'
                                         "  default: x\n")
    (template / "README.md").write_text("hi\n")
    before = snapshot(tmp_path)
    result = msscaffold("new", "proj", "--template", str(template), cwd=tmp_path)
    assert_one_line_error(result, "the template uses _tasks (code Copier would run on this machine)",
                          "msscaffold never runs a template's code and has no --trust")
    assert "consider adding the `--trust` option" not in result.stderr
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


def make_dangling(tmp_path):
    (tmp_path / "proj").symlink_to(tmp_path / "gone")


def make_dir_link(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "proj").symlink_to(tmp_path / "real")


def make_file_link(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "proj").symlink_to(tmp_path / "notes.txt")


def make_fifo(tmp_path):
    os.mkfifo(tmp_path / "proj")


def make_dangling_parent(tmp_path):
    (tmp_path / "parent").symlink_to(tmp_path / "gone")


ODD_DESTINATIONS = {
    "dangling symlink": (make_dangling, "proj", "is a broken symlink"),
    "symlink to a folder": (make_dir_link, "proj", "is a symlink"),
    "symlink to a file": (make_file_link, "proj", "is a symlink"),
    "fifo": (make_fifo, "proj", "is a file, not a folder"),
    "under a dangling symlink": (make_dangling_parent, "parent/proj", "is a broken symlink"),
    "under a file": (lambda p: (p / "f").write_text("x"), "f/proj", "is not a directory"),
}


@pytest.mark.parametrize("make, dest, needle", ODD_DESTINATIONS.values(), ids=ODD_DESTINATIONS.keys())
def test_new_refuses_odd_destination(tmp_path, make, dest, needle):
    """Never a raw FileExistsError, never writing through a link: one line, nothing changed."""
    make(tmp_path)
    before = snapshot(tmp_path)
    links = {p: os.readlink(p) for p in tmp_path.iterdir() if p.is_symlink()}
    result = msscaffold("new", dest, cwd=tmp_path)
    assert_one_line_error(result, needle)
    assert "FileExistsError" not in result.stderr
    assert snapshot(tmp_path) == before
    assert {p: os.readlink(p) for p in tmp_path.iterdir() if p.is_symlink()} == links


def broken_template(tmp_path):
    """A template whose second file fails to render: Copier has already written the first."""
    src = tmp_path / "broken-template"
    (src / "template").mkdir(parents=True)
    (src / "copier.yml").write_text("_subdirectory: template\nname:\n  type: str\n  default: x\n")
    (src / "template" / "a.txt").write_text("written first\n")
    (src / "template" / "z.txt.jinja").write_text("{{ 1 // 0 }}\n")
    return src


@pytest.mark.parametrize("dest", ["proj", "deep/er/proj", "empty"])
def test_failed_new_leaves_nothing_behind(tmp_path, dest):
    src = broken_template(tmp_path)
    work = tmp_path / "work"
    (work / "empty").mkdir(parents=True)
    before = snapshot(work)
    result = msscaffold("new", dest, "--template", str(src), cwd=work)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "ZeroDivisionError" in result.stderr and last.startswith("error: This is a bug"), result.stderr
    assert snapshot(work) == before  # an existing empty folder stays, empty; nothing else appears


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


def committed_edit(project, text):
    (project / ".copier-answers.yml").write_text(text)
    git("commit", "-qam", "edit answers", cwd=project)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("_src_path: /nonexistent/template\n_commit: v1.0.0\n", "/nonexistent/template"),
        ("_src_path: [unclosed\n", "is not valid YAML"),
        ("- a list\n", "lacks _src_path/_commit"),
    ],
    ids=["source gone", "not YAML", "not a mapping"],
)
def test_update_refuses_unusable_answers(tmp_path, text, needle):
    project = generate(tmp_path)
    committed_edit(project, text)
    before = snapshot(tmp_path)
    assert_one_line_error(msscaffold("update", str(project)), needle)
    assert snapshot(tmp_path) == before


USAGE_CASES = {
    "missing destination": (["new"], "Missing argument"),
    "unknown option": (["new", "proj", "--colour", "blue"], "No such option: --colour"),
    "unknown command": (["create", "proj"], "No such command 'create'"),
    "option without value": (["new", "proj", "--task"], "'--task' requires an argument"),
}


@pytest.mark.parametrize("args, needle", USAGE_CASES.values(), ids=USAGE_CASES.keys())
def test_usage_errors_are_one_line_too(tmp_path, args, needle):
    before = snapshot(tmp_path)
    result = msscaffold(*args, cwd=tmp_path)
    assert_one_line_error(result, needle)
    assert result.returncode == 2  # a usage error, as Typer/click number them
    assert snapshot(tmp_path) == before
