"""Update round trip in a throwaway tagged clone of this repo: vN -> vN+1 keeps user edits."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import REPO, git, msscaffold, read_answers

FILLER = "".join(f"filler {i}\n" for i in range(12))  # keeps the two edited lines far apart
NOTES_V1 = f"alpha\n{FILLER}omega\n"
NOTES_V2 = f"alpha, improved by the template\n{FILLER}omega\n"


@pytest.fixture
def template(tmp_path):
    """A clone of this repo's committed template with releases v1.0.0 and (later) v1.1.0."""
    clone = tmp_path / "template-src"
    git("clone", "-q", "--no-tags", str(REPO), str(clone), cwd=tmp_path)
    (clone / "template" / "NOTES.md").write_text(NOTES_V1)
    git("add", "-A", cwd=clone)
    git("commit", "-qm", "notes v1", cwd=clone)
    git("tag", "v1.0.0", cwd=clone)
    return clone


def release_v2(clone):
    (clone / "template" / "NOTES.md").write_text(NOTES_V2)
    (clone / "template" / "NEW.md").write_text("a file added by the template\n")
    git("add", "-A", cwd=clone)
    git("commit", "-qm", "notes v2", cwd=clone)
    git("tag", "v1.1.0", cwd=clone)


def generated(tmp_path, template, user_line_index):
    """A project at v1.0.0 with one committed user edit to NOTES.md (line 0 or the last)."""
    result = msscaffold("new", "proj", "--template", str(template), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    project = tmp_path / "proj"
    assert read_answers(project)["_commit"] == "v1.0.0"
    lines = (project / "NOTES.md").read_text().splitlines()
    lines[user_line_index] += ", edited by the user"
    (project / "NOTES.md").write_text("\n".join(lines) + "\n")
    git("commit", "-qam", "user edit", cwd=project)
    release_v2(template)
    return project


def test_update_merges_template_change_and_keeps_user_edit(tmp_path, template):
    project = generated(tmp_path, template, -1)
    result = msscaffold("update", str(project))
    assert result.returncode == 0, result.stderr
    notes = (project / "NOTES.md").read_text()
    assert "alpha, improved by the template" in notes and "omega, edited by the user" in notes
    assert (project / "NEW.md").is_file()
    assert read_answers(project)["_commit"] == "v1.1.0"


def test_update_conflict_exits_nonzero_naming_the_file(tmp_path, template):
    project = generated(tmp_path, template, 0)
    result = msscaffold("update", str(project))
    assert result.returncode != 0
    assert "NOTES.md" in result.stderr and "conflict" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "<<<<<<< " in (project / "NOTES.md").read_text()


def test_plain_copier_update_works_too(tmp_path, template):
    project = generated(tmp_path, template, -1)
    cmd = [sys.executable, "-m", "copier", "update", "--defaults", "--skip-answered"]
    result = subprocess.run(cmd, cwd=project, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    notes = (project / "NOTES.md").read_text()
    assert "alpha, improved by the template" in notes and "omega, edited by the user" in notes
    assert read_answers(project)["_commit"] == "v1.1.0"
