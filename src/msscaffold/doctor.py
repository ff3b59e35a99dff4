"""``msscaffold doctor``: the generated projects' own environment checks, run from the template.

The checks live in one file, ``template/{{ package_name }}/doctor.py`` (standard library
only, no relative imports), which every generated project ships as ``python -m <package>
doctor``. msscaffold reads that file from its template source (the checkout, or the installed
bundle at this version's tag) and runs it with this interpreter in a child process: one
source of truth, and the generator never imports MindSpore.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from msscaffold.errors import MsscaffoldError

# The package folder's name in template/, as committed (either spacing of the placeholder).
DOCTOR = ("template/{{package_name}}/doctor.py", "template/{{ package_name }}/doctor.py")


def doctor_source(src=None) -> str:
    from msscaffold import source

    src = src or source.resolve()
    for rel in DOCTOR:
        text = source.read_text(src, rel)
        if text:
            return text
    raise MsscaffoldError(f"the template at {src.src} has no doctor.py (made by an older msscaffold?)")


def run(args: list[str], src=None) -> int:
    """Run the template's doctor with ``args``; its exit status (1 when a check fails)."""
    with tempfile.TemporaryDirectory(prefix="msscaffold-doctor-") as tmp:
        script = Path(tmp) / "doctor.py"
        script.write_text(doctor_source(src), encoding="utf-8")
        return subprocess.run([sys.executable, str(script), *args], check=False).returncode
