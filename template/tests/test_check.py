"""``python -m <package> check``: the device check users run on their own hardware, here on CPU."""

import subprocess
import sys

import pytest

from tests.conftest import PACKAGE, ROOT

CHECKS = ["fp32", "amp", "resume", "eval", "export", "msrun"]


@pytest.mark.slow
def test_the_device_check_passes_on_cpu_one_line_per_check(tmp_path):
    result = subprocess.run([sys.executable, "-m", PACKAGE, "check", "--device", "CPU", "--out", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=1200)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert [line.split()[:2] for line in lines[:-1]] == [["ok", name] for name in CHECKS], result.stdout
    assert lines[-1] == "check: 6 of 6 passed on device CPU"
    assert list((tmp_path / "export").glob("*.mindir"))
