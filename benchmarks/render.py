"""Render a project from this checkout for a benchmark, as a user would with `msscaffold new`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def render(dest: Path, task: str, ref: str = "HEAD") -> Path:
    """The template at git ``ref`` of this checkout, rendered into ``dest`` (named after it), no git."""
    cmd = [
        sys.executable,
        "-m",
        "msscaffold",
        "new",
        str(dest),
        "--task",
        task,
        "--template",
        str(REPO),
        "--vcs-ref",
        ref,
        "--no-git",
        "-d",
        f"project_name={dest.name}",
    ]
    subprocess.run(cmd, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return dest
