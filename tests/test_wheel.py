"""The built wheel, as a user gets it: offline `new`, `update`, and `copier update` after uninstall.

Builds from a clean clone (sdist, then the wheel from the sdist), installs into a fresh light venv
(no MindSpore; dependencies come from pip's cache or the package index), then runs everything
with the network unshared where the OS permits it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from helpers import REPO, git, read_answers

pytestmark = pytest.mark.slow


def offline_prefix() -> list[str]:
    """A command prefix that runs without network: `unshare -n` (root) or `unshare -rn` (user ns)."""
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):
        if shutil.which("unshare") and subprocess.run([*prefix, "true"], capture_output=True).returncode == 0:
            return prefix
    pytest.fail("cannot drop the network here (unshare -n / -rn not permitted)")


def run(cmd, cwd, env, check=True):
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check:
        assert result.returncode == 0, f"{cmd}\n{result.stdout}\n{result.stderr}"
    return result


def build(clone, outdir, *args):
    run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(outdir), *args, str(clone)],
        clone,
        None,
    )
    (wheel,) = outdir.glob("*.whl")
    return wheel


def bundle_tags(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as zf:
        path = zf.extract("msscaffold/_bundle/template.bundle", tmp_path / f"x-{wheel.stem}")
    return {
        ln.split()[1].removeprefix("refs/tags/")
        for ln in git("bundle", "list-heads", path, cwd=tmp_path).splitlines()
        if "refs/tags/" in ln
    }


def test_built_wheel_works_offline_and_survives_uninstall(tmp_path):
    clone = tmp_path / "clone"
    git("clone", "-q", "--no-tags", str(REPO), str(clone), cwd=tmp_path)
    old = (clone / "src/msscaffold/VERSION").read_text().strip()
    wheel_old = build(clone, tmp_path / "dist-old")  # sdist, then the wheel from the sdist (no .git)

    new = f"{old}.1"  # a later release: VERSION bump + a template change in one commit
    (clone / "src/msscaffold/VERSION").write_text(f"{new}\n")
    (clone / "template" / "RELEASE.md").write_text(f"added in {new}\n")
    git("add", "-A", cwd=clone)
    git("commit", "-qm", f"release {new}", cwd=clone)
    wheel_new = build(clone, tmp_path / "dist-new", "--wheel")  # straight from the git tree
    assert f"v{old}" in bundle_tags(wheel_old, tmp_path)
    assert {f"v{old}", f"v{new}"} <= bundle_tags(wheel_new, tmp_path)

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], tmp_path, None)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(home), PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}")
    env.pop("PYTHONPATH", None)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run([*pip, str(wheel_old)], tmp_path, env)
    assert "mindspore" not in run([str(venv / "bin" / "python"), "-m", "pip", "list"], tmp_path, env).stdout

    offline = offline_prefix()
    for name in ("proj1", "proj2"):
        run([*offline, "msscaffold", "new", "--task", "vision", name], tmp_path, env)
        answers = read_answers(tmp_path / name)
        assert answers["_commit"] == f"v{old}"
        assert answers["_src_path"] == "~/.local/share/msscaffold/template"

    run([*pip, "--no-deps", "--force-reinstall", str(wheel_new)], tmp_path, env)
    run([*offline, "msscaffold", "update", "proj1"], tmp_path, env)
    assert read_answers(tmp_path / "proj1")["_commit"] == f"v{new}"
    assert (tmp_path / "proj1" / "RELEASE.md").is_file()

    run([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", "-q", "msscaffold"], tmp_path, env)
    run([*offline, "copier", "update", "--defaults"], tmp_path / "proj2", env)
    assert read_answers(tmp_path / "proj2")["_commit"] == f"v{new}"
    assert (tmp_path / "proj2" / "RELEASE.md").is_file()
