"""Hatchling build hook: ship the template's git history inside the wheel and sdist.

Release tags are derived from main alone (local tags never travel): in a temporary
clone, every first-parent commit where ``src/msscaffold/VERSION`` took a new value is
tagged ``v<value>``; then ``git bundle create`` writes HEAD plus those tags to
``src/msscaffold/_bundle/template.bundle``. Building from an sdist (no ``.git``)
reuses the bundle the sdist carries. Editable installs need no bundle: a
development checkout is its own template source.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

VERSION_FILE = "src/msscaffold/VERSION"
BUNDLE = "src/msscaffold/_bundle/template.bundle"


def _git(*args: str, cwd: Path) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def release_tags(repo: Path) -> dict[str, str]:
    """Map ``vX.Y.Z`` to the first commit of HEAD's first-parent history with that VERSION."""
    commits = _git("log", "--first-parent", "--reverse", "--format=%H", "--", VERSION_FILE, cwd=repo)
    tags: dict[str, str] = {}
    previous = None
    for commit in commits.split():
        try:
            value = _git("show", f"{commit}:{VERSION_FILE}", cwd=repo).strip()
        except RuntimeError:  # the file was deleted in this commit
            previous = None
            continue
        if value != previous and f"v{value}" not in tags:
            tags[f"v{value}"] = commit
        previous = value
    return tags


def build_bundle(root: Path, out: Path) -> dict[str, str]:
    """Write a bundle of ``root``'s HEAD with the derived release tags to ``out``."""
    if _git("rev-parse", "--is-shallow-repository", cwd=root).strip() == "true":
        raise RuntimeError("cannot build from a shallow clone: release tags need the full history")
    committed = _git("show", f"HEAD:{VERSION_FILE}", cwd=root).strip()
    current = (root / VERSION_FILE).read_text(encoding="utf-8").strip()
    if committed != current:
        raise RuntimeError(
            f"{VERSION_FILE} says {current} but HEAD has {committed}: commit the version change first"
        )
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        _git("clone", "--quiet", "--no-tags", "--no-checkout", str(root), str(clone), cwd=Path(tmp))
        tags = release_tags(clone)
        for tag, commit in tags.items():
            _git("tag", tag, commit, cwd=clone)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(".partial")
        _git("bundle", "create", "--quiet", str(partial), "HEAD", *tags, cwd=clone)
        partial.replace(out)
    return tags


class TemplateBundleHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if version == "editable":
            return
        root = Path(self.root)
        out = root / BUNDLE
        if (root / ".git").exists():
            tags = build_bundle(root, out)
            self.app.display_info(f"template bundle: HEAD + {', '.join(tags)}")
        elif not out.is_file():
            raise RuntimeError(f"no git history and no {BUNDLE}: build from a git clone or an sdist")
