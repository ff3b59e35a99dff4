"""Run git and turn its failures into one-line errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

from msscaffold.errors import MsscaffoldError


def git(*args: str, cwd: Path | str, check: bool = True, env: dict | None = None) -> str:
    """Return git's stdout; raise MsscaffoldError with git's first error line on failure."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    except FileNotFoundError:
        raise MsscaffoldError("git is not installed (msscaffold needs git on PATH)") from None
    if check and proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        reason = lines[-1] if lines else f"exit code {proc.returncode}"
        raise MsscaffoldError(f"git {args[0]} failed in {cwd}: {reason}")
    return proc.stdout


def toplevel(path: Path) -> Path | None:
    """The work tree root containing ``path``, or None outside git."""
    proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True)
    return Path(proc.stdout.strip()) if proc.returncode == 0 else None
