"""Bad input through the real entry scripts: one line on stderr, exit status 1, nothing written.

In fresh processes as a user runs them; where MindSpore loads before the error, in this process
(``script``: the import is paid once per test process)."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ENGINE_TEST_MODEL, PACKAGE

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize("override, needles", [
    ("train.epohcs=3", ("train.epohcs", "did you mean 'train.epochs'")),
    ("train.epochs=abc", ("train.epochs", "abc")),
    ("train.batch_size=-4", ("train.batch_size", "-4")),
    ("train.grad_accum_steps=0", ("train.grad_accum_steps",)),
    ("runtime.device=TPU", ("runtime.device", "TPU")),
    ("optim.name=adamax", ("optim.name",)),
    ("train.epochs=true", ("train.epochs", "valid integer")),  # no bool -> int
    ("train.jit=1", ("train.jit", "valid boolean")),
    ("optim.lr=.inf", ("optim.lr", "finite")),
    ("output.name=../../x", ("output.name", "plain folder name")),
    ("output.name=/etc", ("output.name", "plain folder name")),
    ("seed=-1", ("seed", "greater than or equal to 0")),
    ("seed=4294967296", ("seed", "less than 2147483648")),  # NumPy and MindSpore seeds are 32-bit
    ("output.loggers=[jsonl,wandb]", ("output.loggers", "wandb")),
])
def test_bad_config_values(tmp_path, override, needles):
    result = run("train.py", "--set", f"output.dir={tmp_path}", "--set", override)
    assert_one_line_error(result, *needles)
    assert not any(tmp_path.iterdir())  # failed before creating a run folder


def unusable_device() -> str:
    """An accelerator MindSpore cannot use on this host (one of the two, whatever the host has)."""
    usable = importlib.import_module(f"{PACKAGE}.engine.runtime").usable
    return next(device for device in ("Ascend", "GPU") if usable(device) is not None)


@pytest.mark.parametrize("overrides, needle", [
    (["train.amp_level=O2", "train.amp_dtype=bfloat16", "runtime.device=CPU"], "bfloat16"),
    (["runtime.device=UNUSABLE"], "not available"),
    (["data.path=no/such/data"], "data.path"),
    (["train.max_steps=99999999999999999999999"], "train.max_steps=99999999999999999999999: 99,999,999,999,999,"
                                                   "999,999,999 optimizer steps, more than the 10,000,000"),
    (["train.epochs=100000000000"], "train.epochs=100000000000 ("),  # the schedule would take terabytes
])
def test_refused_before_training(script, tmp_path, overrides, needle):
    overrides = [o.replace("UNUSABLE", unusable_device()) for o in overrides]
    result = script("train.py", "--set", f"output.dir={tmp_path}", *[arg for o in overrides for arg in ("--set", o)])
    assert_one_line_error(result, needle)
    assert not list(tmp_path.glob("*/*.ckpt"))


SCHEDULE = """from pathlib import Path

Path(__file__).with_name("imported").touch()  # a mark that this module was imported


def linear(step, total_steps):
    return 1 - step / total_steps


def broken(step, total_steps):
    return float("nan") if step == 3 else 1.0
"""


@pytest.mark.parametrize("overrides, needles", [
    (["optim.name=no_such_module:Opt"], ("optim.name=no_such_module:Opt", "cannot import 'no_such_module'")),
    (["optim.name=mindspore.nn:NoSuch"], ("optim.name=mindspore.nn:NoSuch", "has no 'NoSuch'")),
    (["optim.name=os.path:join"], ("optim.name=os.path:join", "not a subclass of mindspore.nn.Optimizer")),
    (["optim.name=mindspore.nn:RMSProp", "optim.kwargs={no_such: 1}"], ("optim.name", "RMSProp(", "no_such")),
    (["optim.name=adam", "optim.kwargs={beta1: 0.8}"], ("optim.kwargs is for your own optimizer",)),
    (["optim.schedule=os:sep"], ("optim.schedule=os:sep", "not a function")),
    (["optim.schedule=your_schedule:broken"], ("optim.schedule=your_schedule:broken", "nan at step 3")),
    (["train.monitor=no_such_metric"], ("train.monitor=no_such_metric", "reports")),
])
def test_your_code_named_wrong_is_one_line(script, tmp_path, monkeypatch, overrides, needles):
    """README "Make it yours": a name that is neither built in nor importable, or code of the wrong
    kind, is one line naming the key, before anything is written."""
    (tmp_path / "your_schedule.py").write_text(SCHEDULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "runs"
    result = script("train.py", "--set", f"output.dir={out}", *[arg for o in overrides for arg in ("--set", o)])
    assert_one_line_error(result, *needles)
    assert [p.name for p in out.glob("*")] in ([], [".cache"])  # no run folder (a task may cache its data)


@pytest.mark.slow
def test_a_checkpoint_never_decides_what_code_runs(script, tmp_path, monkeypatch):
    """A checkpoint trained with your code (here optim.schedule) names it in its saved config:
    eval.py, export.py and --resume import it only when your config or --set names it too."""
    (tmp_path / "your_schedule.py").write_text(SCHEDULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    out, mark, named = tmp_path / "runs", tmp_path / "imported", "optim.schedule=your_schedule:linear"
    trained = script("train.py", "--set", f"output.dir={out}", "--set", "train.max_steps=2", "--set", named,
                     *[arg for o in ENGINE_TEST_MODEL for arg in ("--set", o)])
    assert trained.returncode == 0, trained.stderr
    checkpoint = str(next(out.glob("*/last.ckpt")))
    commands = (["eval.py", "--checkpoint", checkpoint],
                ["export.py", "--checkpoint", checkpoint, "--out", str(tmp_path / "export")],
                ["train.py", "--resume", checkpoint, "--set", f"output.dir={out}"])
    for command in commands:
        mark.unlink(missing_ok=True)
        sys.modules.pop("your_schedule", None)
        assert_one_line_error(script(*command), named, "your config does not name")
        assert not mark.exists() and not (tmp_path / "export").exists()
    resumed = script("train.py", "--resume", checkpoint, "--set", f"output.dir={out}", "--set", named,
                     "--set", "train.max_steps=3")
    assert resumed.returncode == 0 and mark.exists(), resumed.stderr


def test_resume_from_missing_or_corrupt_checkpoint(tmp_path):
    assert_one_line_error(run("train.py", "--resume", str(tmp_path / "nope.ckpt")), "no such checkpoint")
    corrupt = tmp_path / "corrupt.ckpt"
    corrupt.write_bytes(b"\x00garbage")
    assert_one_line_error(run("train.py", "--set", f"output.dir={tmp_path}", "--resume", str(corrupt)), "corrupt")
    assert corrupt.read_bytes() == b"\x00garbage"


def test_scripts_without_checkpoint_and_no_run_say_train_first(tmp_path):
    runs, export = tmp_path / "runs", tmp_path / "export"
    assert_one_line_error(run("eval.py", "--set", f"output.dir={runs}"), "train first")
    assert_one_line_error(run("export.py", "--out", str(export), "--set", f"output.dir={runs}"), "train first")
    assert not any(tmp_path.iterdir())


def test_a_config_not_utf8_a_key_given_twice_or_a_value_not_yaml_is_one_line(script, tmp_path):
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("train:\n  epochs: 2  # \u00e9t\u00e9\n".encode("latin-1"))
    assert_one_line_error(script("train.py", "--config", str(latin)), f"{latin} is not UTF-8 text (line 2, byte 22)")
    twice = tmp_path / "twice.yaml"
    twice.write_text("train:\n  epochs: 2\n  batch_size: 8\n  epochs: 3\n")  # PyYAML alone keeps the 3
    assert_one_line_error(script("train.py", "--config", str(twice)),
                          f"{twice}: key 'epochs' is given twice (lines 2 and 4): keep one")
    assert_one_line_error(script("train.py", "--set", "train.epochs=["), "override 'train.epochs=[': '[' is not a YAML")
    assert not any(tmp_path.glob("*/"))


def test_config_file_errors(tmp_path):
    assert_one_line_error(run("train.py", "--config", str(tmp_path / "missing.yaml")), "cannot read config")
    broken = tmp_path / "broken.yaml"
    broken.write_text("train: [unclosed\n")
    assert_one_line_error(run("train.py", "--config", str(broken)), "not valid YAML")
    assert_one_line_error(run("train.py", "--set", "novalue"), "section.key=value")
    experiment = tmp_path / "experiment.yaml"
    experiment.write_text("train:\n  epochs: 2\n  epohcs: 3\n")
    assert_one_line_error(run("train.py", "--config", str(experiment)), str(experiment), "train.epohcs")


def test_a_default_training_prints_no_mindspore_deprecation_and_warns_of_a_gpu_it_cannot_use(tmp_path):
    # At MindSpore's warning level (the project's default, GLOG_v=2), with a stand-in nvidia-smi on
    # PATH: a GPU looks present, so device auto asks MindSpore and says in one line why it cannot.
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA-SMI stand-in'\n")
    (tools / "nvidia-smi").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "GLOG_v"}
    env["PATH"] = f"{tools}{os.pathsep}{env['PATH']}"
    result = subprocess.run([sys.executable, "train.py", "--set", f"output.dir={tmp_path / 'runs'}", "--set",
                             "runtime.device=auto", "--set", "train.max_steps=2", "--set", "train.log_every=1"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "deprecat" not in (result.stdout + result.stderr).lower(), result.stderr
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning: runtime.device=auto")]
    if importlib.import_module(f"{PACKAGE}.engine.runtime").usable("GPU") is None:
        assert not warned, result.stderr  # this host's MindSpore can use a GPU: it trains there
    else:
        assert len(warned) == 1 and "nvidia-smi on PATH" in warned[0] and "Training on CPU" in warned[0], \
            result.stderr
