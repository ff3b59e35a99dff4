"""Every available task, end to end: generate the project, run its own test suite (msrun
included), then its default training, and check the task's target metric."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jinja2
import pytest
from helpers import available_tasks, generate, task_facts


def beats(summary: dict, task: str) -> str | None:
    """None when the default training reached the target in the task's facts, else why not."""
    target = task_facts(task).target
    ok = jinja2.Environment().compile_expression(target)(**summary)
    return None if ok else f"{task} missed its target ({target}): {summary}"


@pytest.mark.parametrize("task", available_tasks())
def test_generated_code_is_lint_clean(tmp_path, task):
    """The generated project is read as an example: it passes its own ruff configuration."""
    project = generate(tmp_path, task, name=f"lint-{task}", git=False)
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout[-3000:]
    # The template's config.yaml has every key of the schema, and its data and model sections hold
    # exactly the schema's defaults: one source for each value (the project's copy is the user's).
    check = subprocess.run(
        [sys.executable, "-c", SAME_AS_SCHEMA], cwd=project, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr[-3000:]


SAME_AS_SCHEMA = """
from importlib import import_module
from pathlib import Path

import yaml


def keys(tree, prefix=""):  # kwargs mappings are a class's own arguments, not schema keys
    nested = {k for k, v in tree.items() if isinstance(v, dict) and not k.endswith("kwargs")}
    return {prefix + k for k in tree} | {key for k in nested for key in keys(tree[k], f"{prefix}{k}.")}


shipped = yaml.safe_load(Path("config/config.yaml").read_text(encoding="utf-8"))
package = next(Path(".").glob("*/tasks/__init__.py")).parent.parent.name
schema = import_module(package + ".tasks").config_schema(shipped["task"])
defaults = schema.model_validate({"task": shipped["task"]}).to_dict()
sections = {"task": shipped["task"], "data": shipped["data"], "model": shipped["model"]}
read = schema.model_validate(sections).to_dict()
for section in ("data", "model"):
    assert read[section] == defaults[section], section
assert keys(shipped) == keys(defaults), keys(shipped) ^ keys(defaults)
"""


# Tests of the layers every project shares (the sweep driver, the optional loggers, the config
# errors, the environment doctor, the launcher, the loss scaler and optimizers): the same code
# whatever the task. This repository runs each in one project, or in the two where what it
# checks differs (config errors and the doctor's screen: with the oneDNN cap (vision) and
# without), not in all four; a generated project's own CI runs them all. Every other test of
# every suite runs in every project (an entry with no task: a test this repository runs in none).
CAPPED_AND_NOT = ("vision", "nlp")
FAULTS = ENGINE_ONCE = ("recommender",)
SHARED_TESTS = {
    # the sweep driver: one project (vision); the direction each task's monitor gives the study is
    # test_a_sweeps_metric_sets_its_direction, in every project
    "tests/test_sweep.py::test_sweep_prunes_reports_and_its_best_trains": ("vision",),
    # the study's own resumption and sharing: the same whatever the direction (multimodal: quick trials)
    "tests/test_sweep.py::test_killed_sweep_continues_without_losing_or_repeating_a_trial": ("multimodal",),
    "tests/test_sweep.py::test_two_sweep_processes_share_one_study": ("multimodal",),
    "tests/test_sweep.py::test_sweep_cli_errors": ("vision",),
    "tests/test_sweep.py::test_sweep_without_optuna_names_the_extra": ("vision",),
    "tests/test_trackers.py::test_mlflow_run_in_mlruns_has_config_metrics_and_run_folder": ("recommender",),
    "tests/test_trackers.py::test_tensorboard_events_hold_train_values_and_eval_metrics": ("recommender",),
    "tests/test_trackers.py::test_chosen_logger_not_installed_names_the_extra": ("multimodal",),
    "tests/test_cli.py::test_bad_config_values": CAPPED_AND_NOT,  # the shared sections' schema
    "tests/test_doctor.py::test_doctor_screen": CAPPED_AND_NOT,
    "tests/test_doctor.py::test_doctor_fails_on_numpy_2": ("vision",),  # a failed check: cap or not alike
    "tests/test_doctor.py::test_doctor_fails_without_msrun_on_path": ("vision",),
    # the launcher and checkpoint writes under faults: shell and engine code, the same in every project
    "tests/test_distributed.py::test_a_dead_or_failing_rank_ends_the_job_in_one_line": FAULTS,
    "tests/test_distributed.py::test_a_node_that_never_joins_is_named_within_the_join_timeout": FAULTS,
    "tests/test_distributed.py::test_two_jobs_on_one_host_never_meet": FAULTS,
    "tests/test_reliability.py::test_a_kill_during_a_checkpoint_write_keeps_the_previous_one": FAULTS,
    "tests/test_run_integrity.py": FAULTS,  # the run folder's guarantees: engine code, alike in every project
    "tests/test_check.py": ENGINE_ONCE,  # python -m <package> check: engine and entry scripts, ~1 min
    # nlp runs its msrun pair on chat data (per-token loss: the token count is all-reduced too),
    # vision on a streamed image folder (test_vision_folders.py): the generic pair in the other two
    "tests/test_distributed.py::test_two_msrun_workers_match_one_process": ("recommender", "multimodal"),
    # the run folder, resume and the log stream: engine and CLI code that no task changes
    "tests/test_logging.py::test_piped_stdout_is_plain_lines_and_train_log_keeps_them": ENGINE_ONCE,
    "tests/test_reliability.py::test_resume_from_best_continues_in_a_new_folder": ENGINE_ONCE,
    "tests/test_reliability.py::test_resume_reads_as_one_run": ENGINE_ONCE,
    "tests/test_reliability.py::test_resume_continues_with_the_runs_own_config": ENGINE_ONCE,
    "tests/test_reliability.py::test_amp_run_whose_every_update_overflows_is_an_error": ENGINE_ONCE,
    "tests/test_cli.py::test_resume_from_missing_or_corrupt_checkpoint": ENGINE_ONCE,
    "tests/test_engine.py::test_new_run_never_clobbers_an_existing_run": ENGINE_ONCE,
    "tests/test_reports.py::test_csv_tables_hold_the_jsonl_rows_and_a_resume_rewinds_them": ENGINE_ONCE,
    # the loss scaler (a scale of 1e30 overflows whatever the network) and the optimizers and
    # clipping on an nn.Dense against PyTorch's algorithms: engine code
    "tests/test_precision.py::test_overflowed_fp16_step_is_skipped_and_scale_halves": ENGINE_ONCE,
    "tests/test_optimizers.py::test_every_optimizer_steps_as_torch_eager_and_compiled": ENGINE_ONCE,
    "tests/test_optimizers.py::test_gradient_clipping_is_torchs_clip_grad_norm": ENGINE_ONCE,
    "tests/test_optimizers.py::test_adamw_is_decoupled_decay_then_adam": ENGINE_ONCE,
    # the loop's deferred reads (runtime.host_sync) and the start-up copy from rank 0: engine code
    "tests/test_precision.py::test_reading_outputs_when_needed_equals_reading_every_step": ENGINE_ONCE,
    "tests/test_distributed.py::test_a_parameter_that_differs_on_a_rank_is_copied_from_rank_0": ENGINE_ONCE,
    # resnet34 is resnet18's BasicBlock code at another depth: this repository trains resnet18 and
    # resnet50 (Bottleneck) in both tasks and exports both as image towers, not resnet34 twice more
    "tests/test_vision.py::test_each_arch_learns_a_batch[resnet34]": (),
    "tests/test_multimodal_towers.py::test_each_tower_learns_a_batch_and_exports[resnet34-bag]": (),
    # the signal handling (resume equal to an uninterrupted run: test_engine, in every project)
    "tests/test_reliability.py::"
    "test_sigterm_saves_last_ckpt_and_resume_equals_an_uninterrupted_run": ENGINE_ONCE,
}


def elsewhere(project, task: str, lean: bool = False) -> list[str]:
    """``--deselect`` arguments for the shared tests another task's project runs (``lean``: the
    project has no optional feature, so a feature's test file may be absent)."""
    args = []
    for test, tasks in SHARED_TESTS.items():
        path, _, name = test.partition("::")
        file, function = project / path, name.partition("[")[0]
        others = [other for other in available_tasks() if other != task]
        if not file.is_file() and (lean or any(other in path for other in others)):
            continue  # another task's own test file, or an absent feature's
        found = file.is_file() and (not name or f"def {function}(" in file.read_text("utf-8"))
        assert found, f"stale entry: {test}"
        args += [] if task in tasks else ["--deselect", test]
    return args


def run_project_tests(project, marker: str, *extra: str) -> None:
    """The project's own pytest on its tests of ``marker`` (its CI runs both halves); -n 0: this
    repo's suite already runs in parallel processes, the halves of every task side by side."""
    # -k: train.py below runs the default config as a user would
    # MSSCAFFOLD_PROJECT_PYTHON: another interpreter for the project (.ci/run: MindSpore 2.7.2, the oldest)
    python = os.environ.get("MSSCAFFOLD_PROJECT_PYTHON", sys.executable)
    pytest_cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker, "-n", "0",
                  "-k", "not test_default_config", *extra]
    tests = subprocess.run(pytest_cmd, cwd=project, capture_output=True, text=True, timeout=1200)
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout.splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("task", available_tasks())
def test_generated_project_quick_tests(tmp_path, task):
    # MSSCAFFOLD_PROJECT_FEATURES: the features to render, as --features takes them (.ci/run, at the
    # oldest MindSpore: none, the lean starter, then all); unset: the defaults
    features = os.environ.get("MSSCAFFOLD_PROJECT_FEATURES")
    project = generate(tmp_path, task, name=f"quick-{task}", **({"features": features} if features else {}))
    run_project_tests(project, "not slow", *elsewhere(project, task, lean=features not in (None, "all")))


@pytest.mark.slow
@pytest.mark.parametrize("task", available_tasks())
def test_generated_project_slow_tests(tmp_path, task):
    project = generate(tmp_path, task, name=f"slow-{task}")
    run_project_tests(project, "slow", *elsewhere(project, task))


@pytest.mark.slow
@pytest.mark.parametrize("task", available_tasks())
def test_generated_project_default_training(tmp_path, task):
    # The project's test_default_config_* trains the default config in-process; this runs it as
    # a user would (train.py) and checks the same target (the task's facts), so it runs once.
    project = generate(tmp_path, task, name=f"demo-{task}")
    run = subprocess.run(
        [sys.executable, "train.py"], cwd=project, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout[run.stdout.index("{\n") :])
    assert beats(summary, task) is None
    run_dir = project / summary["run_dir"]
    outputs = {"best.ckpt", "last.ckpt", "manifest.json", "metrics.jsonl", "curves.png"}
    assert outputs <= {p.name for p in run_dir.iterdir()}
    # The generated .gitignore covers training outputs: the tree stays clean for `copier update`.
    status = subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True, text=True)
    assert status.stdout == "", status.stdout
