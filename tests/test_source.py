"""Template source: release tags derived from VERSION history, bundle -> per-user repo."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from helpers import REPO, git

from msscaffold import source
from msscaffold.errors import MsscaffoldError

spec = importlib.util.spec_from_file_location("hatch_build", REPO / "hatch_build.py")
hatch_build = importlib.util.module_from_spec(spec)
sys.modules["hatch_build"] = hatch_build
spec.loader.exec_module(hatch_build)


def commit_version(repo, value, note):
    path = repo / hatch_build.VERSION_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")
    (repo / "notes.txt").write_text(note)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", note, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo).strip()


@pytest.fixture
def history(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    first = commit_version(repo, "0.1.0", "a")
    commit_version(repo, "0.1.0", "b")  # same version: not a release
    second = commit_version(repo, "0.2.0", "c")
    commit_version(repo, "0.2.0", "d")
    return repo, {"v0.1.0": first, "v0.2.0": second}


def test_release_tags_are_the_commits_where_version_changed(history):
    repo, expected = history
    assert hatch_build.release_tags(repo) == expected


def test_bundle_ignores_local_tags_and_carries_every_release(history, tmp_path):
    repo, expected = history
    git("tag", "v9.9.9", cwd=repo)  # a local tag: must not travel
    out = tmp_path / "t.bundle"
    assert hatch_build.build_bundle(repo, out) == expected
    heads = git("bundle", "list-heads", str(out), cwd=tmp_path)
    assert "refs/tags/v0.1.0" in heads and "refs/tags/v0.2.0" in heads and "v9.9.9" not in heads


def test_bundle_refuses_uncommitted_version(history, tmp_path):
    repo, _ = history
    (repo / hatch_build.VERSION_FILE).write_text("0.3.0\n")
    with pytest.raises(RuntimeError, match="commit the version change"):
        hatch_build.build_bundle(repo, tmp_path / "t.bundle")


def test_materialise_clones_once_then_fetches_new_tags(history, tmp_path, data_home):
    repo, expected = history
    bundle = tmp_path / "t.bundle"
    hatch_build.build_bundle(repo, bundle)
    user = source.materialise(bundle)
    assert user == data_home / "msscaffold" / "template"
    assert set(git("tag", cwd=user).split()) == set(expected)
    commit_version(repo, "0.3.0", "e")  # a newer install ships a newer bundle
    hatch_build.build_bundle(repo, bundle)
    source.materialise(bundle)
    assert "v0.3.0" in git("tag", cwd=user).split()
    assert not list(user.parent.glob(".template-*")), "temporary clone left behind"


def test_missing_bundle_is_a_clear_error(tmp_path, data_home):
    with pytest.raises(MsscaffoldError, match="no template bundle"):
        source.materialise(tmp_path / "missing.bundle")


def test_development_checkout_is_its_own_source():
    src = source.resolve()
    assert (src.kind, src.src, src.ref) == ("checkout", str(REPO), "HEAD")


def test_tilde_paths_under_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert source.tilde(tmp_path / "a" / "b") == "~/a/b"
    assert source.tilde(REPO) == str(REPO)
