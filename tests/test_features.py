"""Optional features: chosen at ``new`` (files that exist or not), added later with ``msscaffold add``
through Copier's update (the user's edits kept), and never removed from a project of an earlier
release by an update."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO, available_tasks, copier_yml, generate, git, msscaffold, read_answers

from msscaffold.tasks import features

# A file of each feature, rendered (package folder "demo") only when the feature is chosen.
MARKERS = {
    "onnx": "demo/deploy/onnx.py",
    "sweeps": "sweep.py",
    "doctor": "demo/doctor.py",
    "check": "demo/check.py",
    "docker": "Dockerfile",
    "loggers": "demo/logs/trackers.py",
    "reports": "demo/logs/reports.py",
    "weights": "convert_weights.py",
    "archs": "demo/models/resnet.py",
    "recipes": "demo/engine/ema.py",
    "folders": "demo/tasks/vision/folders.py",
    "finetune": "demo/tasks/vision/finetune.py",
}


def offered(task: str) -> list[str]:
    return [f.name for f in features(copier_yml(), task)]


def test_every_feature_has_a_marker_and_weights_is_not_everywhere():
    names = {f.name for task in available_tasks() for f in features(copier_yml(), task)}
    assert names == set(MARKERS)
    assert "weights" in offered("vision") and "weights" not in offered("recommender")
    assert all({"check", "recipes"} <= set(offered(task)) for task in available_tasks())


def dangling_imports(project: Path, package: str = "demo") -> list[str]:
    """Imports of the package's own modules (relative ones in it, ``package.x`` ones in the tests
    and entry scripts) whose module is not a file of the render."""
    missing = []
    for file in project.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = file.parent
                for _ in range(node.level - 1):
                    base = base.parent
                parts = node.module.split(".") if node.module else []
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == package:
                base, parts = project, node.module.split(".")
            else:
                continue
            target = base.joinpath(*parts)
            if not (target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()):
                missing.append(f"{file.relative_to(project)}: {ast.unparse(node)}")
    return missing


@pytest.mark.parametrize("task", available_tasks())
def test_lean_render_has_no_optional_file_no_dangling_import_and_lints(tmp_path, task):
    project = generate(tmp_path, task, git=False, features="none")
    assert read_answers(project)["features"] == []
    for name in offered(task):
        assert not (project / MARKERS[name]).exists(), name
    # The only imports of a feature's modules in the core: each behind a check that says, in one
    # line, how to add the feature (export.py --format onnx: the slow test below).
    guarded = {
        # the config refuses train.ema, optim.layer_decay (and vision's model.drop_path) without recipes
        "demo/engine/loop.py: from .ema import EMA",
        "demo/engine/optim.py: from .layer_decay import layer_scales",
        "demo/models/small_cnn.py: from .drop_path import drop_paths",
        "demo/deploy/export.py: from .onnx import runtime",
        "demo/deploy/export.py: from .onnx import export_onnx",
        # the config refuses output.loggers tensorboard/mlflow without the loggers feature (test_logging.py)
        "demo/logs/loggers.py: from .trackers import require",
        "demo/logs/loggers.py: from .trackers import TRACKERS",
        # the config refuses output.plot and the csv logger without reports; manifest.py: used when present
        "demo/run/train.py: from ..logs.reports import CurvePlot",
        "demo/run/train.py: from .manifest import Manifest",
        "demo/logs/loggers.py: from .reports import CsvLogger",
        # vision: the config refuses an arch, fast_conv or recipe value whose module is absent
        "demo/models/backbones.py: from .fast_conv import conv_class",
        "demo/models/backbones.py: from .resnet import BACKBONES as RESNETS",  # when the files are there
        "demo/models/backbones.py: from .vit import BACKBONES as VITS",
        "demo/tasks/vision/config.py: from ...models.vit_layout import check_fits",
        # vision: the config refuses a crop of arrays and every augmentation or mixing value without recipes
        "demo/tasks/vision/task.py: from .recipes import recipe_loss",
        "demo/tasks/vision/data.py: from .augment import AugmentedArrays",
        "demo/tasks/vision/data.py: from .recipes import recipe_of",
        # vision: the config refuses a folder as data.path without the folders feature
        "demo/tasks/vision/data.py: from .folders import check_not_the_digits_settings, measure, train_files",
        "demo/tasks/vision/data.py: from .folders import labels_by_name",
        "demo/tasks/vision/data.py: from .folders import list_folder",
        "demo/tasks/vision/task.py: from .folders import folder_logits",
        # vision: the config refuses model.pretrained and model.freeze_backbone without finetune
        "demo/tasks/vision/task.py: from .finetune import freeze_backbone",
        "demo/tasks/vision/task.py: from .finetune import warm_start as copy_backbone",
        "demo/tasks/vision/data.py: from .finetune import pretrained_normalisation",
        # ... and only a folder's files reach the engine as an ExampleSource, streamed by pipeline.py
        "demo/engine/data.py: from .pipeline import batches",
    }
    assert set(dangling_imports(project)) <= guarded
    for command, feature in (("doctor", "doctor"), ("check", "check"), ("predict", "onnx")):
        run = subprocess.run([sys.executable, "-m", "demo", command], cwd=project, capture_output=True,
                             text=True)
        assert run.returncode == 1 and run.stderr.strip().splitlines() == [
            f"{command}: not in this project (the {feature} feature): add it with `msscaffold add {feature}`"]
    pyproject = (project / "pyproject.toml").read_text("utf-8")
    assert "onnx =" not in pyproject and "sweep =" not in pyproject
    readme = (project / "README.md").read_text("utf-8")
    assert "msscaffold add onnx" in readme and "## Docker" not in readme and "sweep.py" not in readme
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=project,
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout[-3000:]


def test_defaults_choose_every_feature_and_a_list_chooses_those(tmp_path):
    full = generate(tmp_path, "vision", name="full", git=False)
    assert read_answers(full)["features"] == offered("vision")
    some = generate(tmp_path, "vision", name="demo", git=False, features="sweeps,onnx")
    assert read_answers(some)["features"] == ["onnx", "sweeps", "folders"]  # predict serves the folders' view
    assert {n for n, rel in MARKERS.items() if (some / rel).exists()} == {"onnx", "sweeps", "folders"}
    readme = (some / "README.md").read_text("utf-8")
    assert "## Hyper-parameter sweeps" in readme and "predict --onnx" in readme and "## Docker" not in readme


def test_weights_brings_the_archs_it_imports_into_and_the_folders_it_fine_tunes_on(tmp_path):
    project = generate(tmp_path, "vision", git=False, features="weights")
    assert read_answers(project)["features"] == ["weights", "archs", "folders", "finetune"]
    assert (project / MARKERS["finetune"]).is_file() and (project / "tests/test_finetune.py").is_file()
    assert (project / MARKERS["archs"]).is_file() and not (project / MARKERS["recipes"]).exists()
    assert (project / "demo/models/drop_path.py").is_file()  # the archs' blocks use it
    assert not (project / "demo/tasks/vision/recipes.py").exists()
    assert (project / MARKERS["folders"]).is_file() and (project / "tests/test_vision_folders.py").is_file()
    readme = (project / "README.md").read_text("utf-8")
    assert "`recipes` (" in readme and "`archs` (" not in readme  # the note's "Not here" list
    assert "`finetune` (" not in readme and "msscaffold add finetune" not in readme


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "vision", "--features", "onnx,bogus"], "feature 'bogus' is unknown"),
        (["--task", "nlp", "--features", "weights"], "feature 'weights' is not one of the nlp task's"),
        (["--task", "recommender", "-d", "features=weights"], "not one of the recommender task's"),
        (["--task", "multimodal", "--features", "finetune"], "'finetune' is not one of the multimodal"),
    ],
)
def test_new_refuses_a_feature_in_one_line_and_writes_nothing(tmp_path, args, message):
    result = msscaffold("new", str(tmp_path / "proj"), *args)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "features are onnx, sweeps" in lines[0], result.stderr
    assert not (tmp_path / "proj").exists()


def test_tasks_lists_each_tasks_features_one_line_each():
    result = msscaffold("tasks")
    assert result.returncode == 0, result.stderr
    listed, task = {}, None
    for line in result.stdout.splitlines():
        if not line.startswith(" "):
            task = line.split()[0]
        elif line.split()[0] == "feature":
            listed.setdefault(task, []).append(line.split()[1])
    assert listed == {task: offered(task) for task in available_tasks()}


def test_new_help_names_every_feature():
    result = msscaffold("new", "--help", env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0 and "--features" in result.stdout
    assert all(name in result.stdout for task in available_tasks() for name in offered(task))


@pytest.fixture
def tagged_clone(tmp_path):
    """A clone of this repo's committed template, tagged v1.0.0 (add re-answers at that version)."""
    clone = tmp_path / "template-src"
    git("clone", "-q", "--no-tags", str(REPO), str(clone), cwd=tmp_path)
    git("tag", "v1.0.0", cwd=clone)
    return clone


def lean_project_with_an_edit(tmp_path, clone) -> Path:
    result = msscaffold("new", "proj", "--template", str(clone), "--task", "vision", "--features", "none",
                        cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    project = tmp_path / "proj"
    export = project / "proj" / "deploy" / "export.py"
    export.write_text(export.read_text("utf-8").replace('"""MINDIR export', '"""Mine. MINDIR export', 1))
    readme = project / "README.md"
    readme.write_text(readme.read_text("utf-8") + "\nMy own notes.\n")
    git("commit", "-qam", "user edits", cwd=project)
    return project


def test_add_brings_a_feature_keeps_the_edits_and_refuses_bad_input(tmp_path, tagged_clone):
    project = lean_project_with_an_edit(tmp_path, tagged_clone)
    assert not (project / "proj" / "deploy" / "onnx.py").exists()

    refusals = [(["bogus"], "feature 'bogus' is unknown"), (["weights", "nope"], "'nope' is unknown")]
    for args, message in refusals:
        bad = msscaffold("add", *args, cwd=project)
        assert bad.returncode == 1 and message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    (project / "scratch.txt").write_text("uncommitted\n")
    dirty = msscaffold("add", "onnx", cwd=project)
    assert dirty.returncode == 1 and "uncommitted changes" in dirty.stderr
    (project / "scratch.txt").unlink()
    assert git("status", "--porcelain", cwd=project) == ""
    elsewhere = msscaffold("add", "onnx", "--path", str(tmp_path))
    assert elsewhere.returncode == 1 and len(elsewhere.stderr.strip().splitlines()) == 1

    result = msscaffold("add", "onnx", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "Added onnx" in result.stdout
    for rel in ("proj/deploy/onnx.py", "proj/deploy/onnx_ops.py", "proj/deploy/predict.py",
                "tests/test_onnx.py", "proj/tasks/vision/folders.py"):  # predict serves folders' eval view
        assert (project / rel).is_file(), rel
    assert read_answers(project)["features"] == ["onnx", "folders"]
    assert read_answers(project)["_commit"] == "v1.0.0"  # re-answered at the same version
    assert '"""Mine. MINDIR export' in (project / "proj" / "deploy" / "export.py").read_text("utf-8")
    readme = (project / "README.md").read_text("utf-8")
    assert readme.endswith("\nMy own notes.\n") and "predict --onnx" in readme
    assert 'onnx = ["onnx' in (project / "pyproject.toml").read_text("utf-8")
    status = git("status", "--porcelain", cwd=project)
    assert "<<<<<<<" not in "".join(p.read_text("utf-8") for p in project.rglob("*.py"))
    assert ".rej" not in status and "sweep.py" not in status

    git("add", "-A", cwd=project)
    git("commit", "-qm", "add onnx", cwd=project)
    again = msscaffold("add", "onnx", cwd=project)
    assert again.returncode == 0 and "Already" in again.stdout
    assert git("status", "--porcelain", cwd=project) == ""

    # A later release: the update keeps the project's choice (no feature it did not ask for).
    (tagged_clone / "template" / "NEW.md").write_text("a file added by the template\n")
    git("add", "-A", cwd=tagged_clone)
    git("commit", "-qm", "release 1.1.0", cwd=tagged_clone)
    git("tag", "v1.1.0", cwd=tagged_clone)
    update = msscaffold("update", cwd=project)
    assert update.returncode == 0, update.stderr
    assert (project / "NEW.md").is_file() and not (project / "sweep.py").exists()
    assert read_answers(project)["features"] == ["onnx", "folders"]
    assert read_answers(project)["_commit"] == "v1.1.0"


@pytest.mark.slow
def test_onnx_added_to_a_lean_project_exports_and_predicts(tmp_path, tagged_clone):
    """The acceptance journey: lean project, committed edit, `msscaffold add onnx`, then
    export.py --format onnx works (before the add it says how to get it, in one line)."""
    project = lean_project_with_an_edit(tmp_path, tagged_clone)
    train = subprocess.run([sys.executable, "train.py", "--set", "train.epochs=1"], cwd=project,
                           capture_output=True, text=True, timeout=600)
    assert train.returncode == 0, train.stderr[-3000:]
    before = subprocess.run([sys.executable, "export.py", "--format", "onnx", "--out", "export"], cwd=project,
                            capture_output=True, text=True, timeout=600)
    assert before.returncode == 1 and "msscaffold add onnx" in before.stderr, before.stderr[-2000:]
    assert len(before.stderr.strip().splitlines()) <= 2  # the checkpoint it picked, then the line
    predict = subprocess.run([sys.executable, "-m", "proj", "predict"], cwd=project, capture_output=True,
                             text=True)
    assert predict.returncode == 1 and "msscaffold add onnx" in predict.stderr

    assert git("status", "--porcelain", cwd=project) == ""  # runs/ is ignored: add needs a clean tree
    result = msscaffold("add", "onnx", cwd=project)
    assert result.returncode == 0, result.stderr
    export = subprocess.run([sys.executable, "export.py", "--format", "onnx", "--out", "export"], cwd=project,
                            capture_output=True, text=True, timeout=600)
    assert export.returncode == 0, export.stderr[-3000:]
    spec = yaml.safe_load((project / "export" / "classifier.json").read_text("utf-8"))
    assert spec["onnx"]["max_abs_diff"] < 1e-4
    assert '"""Mine. MINDIR export' in (project / "proj" / "deploy" / "export.py").read_text("utf-8")


@pytest.mark.slow
def test_a_0_13_0_project_updates_with_every_file_it_had(tmp_path):
    """A project of the release before features existed has no `features` answer: the update
    gives it every feature, so no file it had is removed."""
    from test_update import vision_project_at_release

    from msscaffold import update as _update

    clone, project = vision_project_at_release(tmp_path, "v0.13.0")
    had = set(git("ls-files", cwd=project).split())
    assert "features" not in read_answers(project)
    head = git("rev-parse", "HEAD", cwd=clone).strip()
    assert _update.update_project(project, vcs_ref=head) == []
    now = {str(p.relative_to(project)) for p in project.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert had - now == set(), sorted(had - now)[:10]
    assert read_answers(project)["features"] == offered("vision")


@pytest.mark.slow
def test_a_0_14_0_project_keeps_what_later_became_features(tmp_path):
    """0.14.0 had ResNet/ViT and RandAugment/mixup in every vision project; a 0.14.0 project answered
    `features: [onnx]` updates with every file it had: archs, recipes and folders join its answer (and
    check, its python -m <package> check; finetune, its warm start)."""
    from test_update import _hatch_build

    from msscaffold import generate as _generate
    from msscaffold import update as _update
    from msscaffold.source import TemplateSource

    clone, project = tmp_path / "clone", tmp_path / "proj"
    git("clone", "-q", "--no-tags", str(REPO), str(clone), cwd=tmp_path)
    git("tag", "v0.14.0", _hatch_build().release_tags(clone)["v0.14.0"], cwd=clone)
    answers = {"task": "vision", "project_name": "proj", "features": ["onnx"]}
    _generate.new_project(project, source=TemplateSource(str(clone), "v0.14.0", "custom"), data=answers,
                          init_git=True)
    had = set(git("ls-files", cwd=project).split())
    assert {"proj/models/resnet.py", "proj/tasks/vision/mixing.py", "proj/logs/loggers.py"} <= had
    head = git("rev-parse", "HEAD", cwd=clone).strip()
    assert _update.update_project(project, vcs_ref=head) == []
    now = {str(p.relative_to(project)) for p in project.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert had - now == set(), sorted(had - now)[:10]
    joined = ["check", "loggers", "reports", "archs", "recipes", "folders", "finetune"]
    assert read_answers(project)["features"] == ["onnx", *joined]


# The landed commit of 0.14.0's features work: EMA (engine/ema.py) and `python -m <pkg> check`
# were core there, `recipes` (vision's augment and mixing) already a feature.
EMA_CORE = "efc3d1f"


@pytest.mark.slow
def test_a_feature_since_widened_joins_when_the_project_has_its_files(tmp_path):
    """A lean vision project of a commit where engine/ema.py was core (and `recipes` already a
    feature, which the project did not choose) updates with every file it had: `recipes`, which
    holds ema.py now, joins its answer because the project has the file; `check`, `folders` and
    `finetune`, new names, join as features its release did not offer."""
    from msscaffold import generate as _generate
    from msscaffold import update as _update
    from msscaffold.source import TemplateSource

    clone, project = tmp_path / "clone", tmp_path / "proj"
    git("clone", "-q", "--no-tags", str(REPO), str(clone), cwd=tmp_path)
    commit = git("rev-parse", EMA_CORE, cwd=clone).strip()
    _generate.new_project(project, source=TemplateSource(str(clone), commit, "custom"),
                          data={"task": "vision", "project_name": "proj", "features": []}, init_git=True)
    had = set(git("ls-files", cwd=project).split())
    assert {"proj/engine/ema.py", "proj/check.py", "proj/images/files.py"} <= had
    assert "proj/tasks/vision/recipes.py" not in had
    head = git("rev-parse", "HEAD", cwd=clone).strip()
    assert _update.update_project(project, vcs_ref=head) == []
    now = {str(p.relative_to(project)) for p in project.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert had - now == set(), sorted(had - now)[:10]
    assert {"recipes", "check", "folders", "finetune"} <= set(read_answers(project)["features"])
    assert (project / "proj/tasks/vision/finetune.py").is_file()  # its warm start was core there
