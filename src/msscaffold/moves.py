"""User edits that follow a file the template moved (or name it as a conflict).

``copier update`` deletes a file that the new template version no longer has, user edits and
all, and adds its successor fresh. After the update this module looks at each deleted file:
unedited, the deletion stands; edited, the edit is merged into the new file most like the old
one (``git merge-file``: the old render is the base), or, with no such file, the user's copy is
put back and named, so nothing is lost silently.
"""

from __future__ import annotations

import difflib
import subprocess
import tempfile
from pathlib import Path

from copier import Settings, run_copy

from msscaffold.gitcmd import git

SIMILAR = 0.5  # difflib ratio of the old file's lines to a new file's above which it is its successor


def follow_moves(project: Path, src: str, old_ref: str, answers: dict) -> list[str]:
    """After an update of ``project`` from ``old_ref``: merge the user's edits of deleted files
    into their successors; return the files left to resolve by hand (relative to ``project``)."""
    deleted = git("ls-files", "--deleted", cwd=project).splitlines()
    if not deleted:
        return []
    added = git("ls-files", "--others", "--exclude-standard", cwd=project).splitlines()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        data = {k: v for k, v in answers.items() if not k.startswith("_")}
        run_copy(src, old, data=data, vcs_ref=old_ref, settings=Settings(), defaults=True, unsafe=False, quiet=True)
        unresolved = []
        for rel in deleted:
            base = old / rel
            mine = git("show", f"HEAD:./{rel}", cwd=project)
            if not base.is_file() or mine == base.read_text(encoding="utf-8"):
                continue  # not the template's file, or unedited: the deletion stands
            successor = most_similar(base.read_text(encoding="utf-8"), project, added)
            if successor is None:  # nothing took its place: keep the user's copy, and say so
                (project / rel).write_text(mine, encoding="utf-8")
                unresolved.append(f"{rel} (removed by the template; your edited copy is kept)")
                continue
            with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, encoding="utf-8") as theirs:
                theirs.write(mine)
            merged = subprocess.run(["git", "merge-file", "-L", successor, "-L", f"{rel} (old template)",
                                     "-L", f"{rel} (your edit)", successor, str(base), theirs.name],
                                    cwd=project, capture_output=True, text=True)
            Path(theirs.name).unlink()
            if merged.returncode != 0:  # conflict markers are in the successor
                unresolved.append(f"{successor} (your edit of {rel}, which moved there)")
    return unresolved


def most_similar(text: str, project: Path, candidates: list[str]) -> str | None:
    lines = text.splitlines()
    best, best_ratio = None, SIMILAR
    for rel in candidates:
        try:
            other = (project / rel).read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        ratio = difflib.SequenceMatcher(None, lines, other, autojunk=False).ratio()
        if ratio > best_ratio:
            best, best_ratio = rel, ratio
    return best
