"""``python -m <package> predict`` in a fresh virtual environment that has onnxruntime, NumPy,
Pillow, pydantic and PyYAML but no MindSpore (what the generated README promises)."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import generate

pytestmark = pytest.mark.slow
RUNTIME = ["onnxruntime", "numpy<2", "pillow", "pydantic", "pyyaml"]


def test_an_exported_classifier_predicts_in_a_venv_without_mindspore(tmp_path):
    pytest.importorskip("onnxruntime")
    uv = shutil.which("uv")
    project = generate(tmp_path, "vision", name="deployme", git=False)
    py = [sys.executable]
    steps = [[*py, "train.py", "--set", "train.max_steps=3", "--set", "output.plot=false"],
             [*py, "export.py", "--format", "onnx"]]
    for step in steps:
        done = subprocess.run(step, cwd=project, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    venv = tmp_path / "venv"
    if uv:
        make = [[uv, "venv", "-q", "--python", sys.executable, str(venv)],
                [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *RUNTIME]]
    else:
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *RUNTIME]
        make = [[*py, "-m", "venv", str(venv)], pip]
    for step in make:
        done = subprocess.run(step, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    python = str(venv / "bin" / "python")
    assert subprocess.run([python, "-c", "import mindspore"], capture_output=True).returncode != 0

    from PIL import Image

    photo = np.random.default_rng(0).integers(0, 256, (40, 30), dtype=np.uint8)
    Image.fromarray(photo).save(tmp_path / "x.png")
    predict = [python, "-m", "deployme", "predict", "--onnx", "export/classifier.onnx",
               str(tmp_path / "x.png"), "--top", "3"]
    done = subprocess.run(predict, cwd=project, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    top = json.loads(done.stdout)
    assert len(top) == 3 and all(0 <= row["probability"] <= 1 for row in top)
    assert top[0]["probability"] >= top[1]["probability"] >= top[2]["probability"]
