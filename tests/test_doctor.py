"""``msscaffold doctor``: it runs the template's own doctor.py (one source), in simulated bad environments.

Real subprocesses, as a user runs them; the environment is made bad from outside (a fake NumPy
2 distribution first on the path, a PATH without the environment's bin/).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys

from helpers import PACKAGE_DIR, REPO, msscaffold

DOCTOR = REPO / "template" / PACKAGE_DIR / "doctor.py"


def lines_of(stdout: str) -> dict[str, str]:
    rows = [line.split(None, 2) for line in stdout.splitlines() if line[:4].strip() in ("ok", "warn", "fail")]
    return {row[1]: " ".join(row) for row in rows}


def test_doctor_prints_one_screen():
    result = msscaffold("doctor")
    rows = lines_of(result.stdout)
    assert {"python", "mindspore", "numpy", "import", "gpu", "ascend", "cpu", "msrun", "extras"} <= set(rows)
    assert len(result.stdout.splitlines()) <= 30
    assert result.returncode == (1 if any(v.startswith("fail") for v in rows.values()) else 0), result.stdout


def test_doctor_fails_on_a_numpy_2(tmp_path):
    info = tmp_path / "numpy-2.2.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 2.2.1\n")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    result = msscaffold("doctor", env={**os.environ, "PYTHONPATH": path})
    assert result.returncode == 1, result.stdout + result.stderr
    assert lines_of(result.stdout)["numpy"].startswith("fail numpy 2.2.1")
    assert 'pip install "numpy>=1.24,<2"' in result.stdout


def test_doctor_fails_without_msrun_on_path(tmp_path):
    (tmp_path / "git").symlink_to(shutil.which("git"))  # msscaffold itself needs git, not msrun
    result = msscaffold("doctor", env={**os.environ, "PATH": str(tmp_path)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert lines_of(result.stdout)["msrun"].startswith("fail msrun msrun not on PATH")


def test_doctor_is_plain_python_with_the_projects_pins():
    """Standard library only and no relative imports (msscaffold runs the file alone), and its
    pins are the generated pyproject.toml's."""
    tree = ast.parse(DOCTOR.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module.split(".")[0] in sys.stdlib_module_names, node.module
        elif isinstance(node, ast.Import):
            assert all(a.name.split(".")[0] in sys.stdlib_module_names for a in node.names)
    pyproject = (REPO / "template" / "pyproject.toml.jinja").read_text(encoding="utf-8")
    assert 'requires-python = ">=3.10,<3.13"' in pyproject
    assert re.search(r'"mindspore>=2\.7\.2,<2\.11"', pyproject) and re.search(r'"numpy>=1\.24,<2"', pyproject)
    text = DOCTOR.read_text(encoding="utf-8")
    assert "PYTHON = ((3, 10), (3, 13))" in text and "MINDSPORE = ((2, 7, 2), (2, 11))" in text
    assert "NUMPY = ((1, 24), (2, 0))" in text


def test_generator_never_imports_mindspore():
    code = "import sys, msscaffold.cli, msscaffold.doctor; sys.exit('mindspore' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
