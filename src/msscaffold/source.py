"""Where the template comes from.

- Development checkout (this file lives in ``<repo>/src/msscaffold`` next to ``copier.yml``
  and ``.git``): the checkout itself, at HEAD including uncommitted changes.
- Installed package: the git bundle shipped in ``_bundle/`` is cloned once (atomically) into
  ``platformdirs.user_data_dir("msscaffold")/template`` and its tags fetched again whenever
  the bundle changes; projects are generated from tag ``v<installed version>``. The answers
  file then records that per-user repo as ``_src_path``, so ``copier update`` works offline,
  even after ``pip uninstall msscaffold``.
- ``--template SRC``: any path or git URL Copier accepts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs
import yaml

from msscaffold import __version__
from msscaffold.errors import MsscaffoldError
from msscaffold.gitcmd import git

PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLE = PACKAGE_DIR / "_bundle" / "template.bundle"
STAMP = "msscaffold-bundle-stamp"  # kept in the per-user repo's .git


@dataclass(frozen=True)
class TemplateSource:
    src: str  # what Copier gets as src_path (and records as _src_path)
    ref: str | None  # Copier's vcs_ref; None = Copier's default (latest release tag)
    kind: str  # "checkout", "bundle" or "custom"

    @property
    def path(self) -> Path | None:
        """The source as a local directory, or None for a remote URL."""
        if is_remote(self.src):
            return None
        return Path(self.src).expanduser()


def is_remote(src: str) -> bool:
    return "://" in src or src.startswith(("git@", "gh:", "gl:"))


def checkout_root() -> Path | None:
    """The development checkout this package runs from, if any."""
    root = PACKAGE_DIR.parents[1]
    if (root / "copier.yml").is_file() and (root / ".git").exists():
        return root
    return None


def user_repo() -> Path:
    return Path(platformdirs.user_data_dir("msscaffold")) / "template"


def tilde(path: Path) -> str:
    """``~/...`` when under the home folder: the answers file then suits any user."""
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except ValueError:
        return str(path)


def materialise(bundle: Path = BUNDLE, repo: Path | None = None) -> Path:
    """Clone the bundle into the per-user repo once, and fetch its tags when it changes."""
    repo = repo or user_repo()
    if not bundle.is_file():
        raise MsscaffoldError(f"this msscaffold install has no template bundle ({bundle}); reinstall it")
    stat = bundle.stat()
    stamp = f"{__version__} {stat.st_size} {stat.st_mtime_ns}\n"
    if not (repo / ".git").is_dir():
        repo.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".template-", dir=repo.parent))
        try:
            git("clone", "--quiet", str(bundle), str(tmp), cwd=repo.parent)
            git("remote", "remove", "origin", cwd=tmp)  # the bundle path dies with the install
            os.rename(tmp, repo)  # atomic: a concurrent first run either wins or finds it done
        except OSError:
            if not (repo / ".git").is_dir():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    stamp_file = repo / ".git" / STAMP
    if not stamp_file.is_file() or stamp_file.read_text() != stamp:
        git("fetch", "--quiet", str(bundle), "refs/tags/*:refs/tags/*", cwd=repo)
        stamp_file.write_text(stamp)
    return repo


def resolve(template: str | None = None, vcs_ref: str | None = None) -> TemplateSource:
    """Pick the template source for ``new`` (and ``tasks``)."""
    if template:
        source = TemplateSource(template, vcs_ref, "custom")
        if source.path is not None and not source.path.exists():
            raise MsscaffoldError(f"template path {template} does not exist")
    elif (root := checkout_root()) is not None:
        source = TemplateSource(str(root), vcs_ref or "HEAD", "checkout")
    else:
        repo = materialise()
        source = TemplateSource(tilde(repo), vcs_ref or f"v{__version__}", "bundle")
    check_ref(source)
    return source


def for_update(src_path: str, vcs_ref: str | None = None) -> TemplateSource:
    """Refresh the per-user repo when a project was generated from it; pick the update ref."""
    if Path(src_path).expanduser() == user_repo() and checkout_root() is None and BUNDLE.is_file():
        materialise()
        return TemplateSource(src_path, vcs_ref or f"v{__version__}", "bundle")
    return TemplateSource(src_path, vcs_ref, "custom")


def check_ref(source: TemplateSource) -> None:
    """Fail early, in one line, when a local git source lacks the requested ref."""
    path = source.path
    if source.ref is None or path is None or not (path / ".git").exists():
        return
    if not git("rev-parse", "--verify", "--quiet", f"{source.ref}^{{commit}}", cwd=path, check=False):
        raise MsscaffoldError(f"template ref {source.ref!r} not found in {source.src}")


def read_text(source: TemplateSource, rel: str) -> str | None:
    """A file of the template at the ref to be rendered, or None where it cannot be read cheaply."""
    path = source.path
    if path is None:
        return None
    if source.kind == "checkout" or not (path / ".git").exists():
        file = path / rel
        return file.read_text(encoding="utf-8") if file.is_file() else None
    return git("show", f"{source.ref or 'HEAD'}:{rel}", cwd=path, check=False) or None


def copier_config(source: TemplateSource) -> dict | None:
    """The template's copier.yml at the ref to be rendered, or None where it cannot be read cheaply."""
    text = read_text(source, "copier.yml")
    if text is None:
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:  # e.g. Copier's !include: let Copier itself read it
        return None
    return data if isinstance(data, dict) else None
