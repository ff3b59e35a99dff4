"""Update round trip in a throwaway tagged clone of this repo: vN -> vN+1 keeps user edits."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
from helpers import REPO, git, msscaffold, read_answers

FILLER = "".join(f"filler {i}\n" for i in range(12))  # keeps the two edited lines far apart
NOTES_V1 = f"alpha\n{FILLER}omega\n"
NOTES_V2 = f"alpha, improved by the template\n{FILLER}omega\n"


@pytest.fixture
def template(tmp_path):
    """A clone of this repo's committed template with releases v1.0.0 and (later) v1.1.0."""
    clone = tmp_path / "template-src"
    git("clone", "-q", "--no-tags", str(REPO), str(clone), cwd=tmp_path)
    (clone / "template" / "NOTES.md").write_text(NOTES_V1)
    git("add", "-A", cwd=clone)
    git("commit", "-qm", "notes v1", cwd=clone)
    git("tag", "v1.0.0", cwd=clone)
    return clone


def release_v2(clone):
    (clone / "template" / "NOTES.md").write_text(NOTES_V2)
    (clone / "template" / "NEW.md").write_text("a file added by the template\n")
    git("add", "-A", cwd=clone)
    git("commit", "-qm", "notes v2", cwd=clone)
    git("tag", "v1.1.0", cwd=clone)


def generated(tmp_path, template, user_line_index):
    """A project at v1.0.0 with one committed user edit to NOTES.md (line 0 or the last)."""
    result = msscaffold("new", "proj", "--template", str(template), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    project = tmp_path / "proj"
    assert read_answers(project)["_commit"] == "v1.0.0"
    lines = (project / "NOTES.md").read_text().splitlines()
    lines[user_line_index] += ", edited by the user"
    (project / "NOTES.md").write_text("\n".join(lines) + "\n")
    git("commit", "-qam", "user edit", cwd=project)
    release_v2(template)
    return project


def test_update_merges_template_change_and_keeps_user_edit(tmp_path, template):
    project = generated(tmp_path, template, -1)
    result = msscaffold("update", str(project))
    assert result.returncode == 0, result.stderr
    notes = (project / "NOTES.md").read_text()
    assert "alpha, improved by the template" in notes and "omega, edited by the user" in notes
    assert (project / "NEW.md").is_file()
    assert read_answers(project)["_commit"] == "v1.1.0"


def test_update_conflict_exits_nonzero_naming_the_file(tmp_path, template):
    project = generated(tmp_path, template, 0)
    result = msscaffold("update", str(project))
    assert result.returncode != 0
    assert "NOTES.md" in result.stderr and "conflict" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "<<<<<<< " in (project / "NOTES.md").read_text()


def test_an_update_stopped_by_a_signal_leaves_the_project_as_it_was(tmp_path, template, monkeypatch):
    """SIGTERM after Copier rewrote the files: the project is back at its commit, the user's edit
    and the answers included (0.10.1: the process died with files rewritten and added)."""
    import signal

    from typer.testing import CliRunner

    from msscaffold import update
    from msscaffold.cli import app

    project = generated(tmp_path, template, -1)
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file() and ".git" not in p.parts}
    monkeypatch.setattr(update, "follow_moves", lambda *args: os.kill(os.getpid(), signal.SIGTERM))
    result = CliRunner().invoke(app, ["update", str(project)])
    assert result.exit_code == 130, result.output
    after = {p: p.read_bytes() for p in project.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before and git("status", "--porcelain", cwd=project) == ""
    assert read_answers(project)["_commit"] == "v1.0.0"


def test_plain_copier_update_works_too(tmp_path, template):
    project = generated(tmp_path, template, -1)
    cmd = [sys.executable, "-m", "copier", "update", "--defaults", "--skip-answered"]
    result = subprocess.run(cmd, cwd=project, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    notes = (project / "NOTES.md").read_text()
    assert "alpha, improved by the template" in notes and "omega, edited by the user" in notes
    assert read_answers(project)["_commit"] == "v1.1.0"


# --- Collaborators: a fresh clone of a project on another machine/account -------------------


def _hatch_build():
    spec = importlib.util.spec_from_file_location("hatch_build_for_update", REPO / "hatch_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def release(clone, version, note=None):
    """Commit VERSION (and a template file) in the template clone: the build tags it v<version>."""
    (clone / "src" / "msscaffold" / "VERSION").write_text(f"{version}\n")
    if note:
        (clone / "template" / "RELEASE.md").write_text(note)
    git("add", "-A", cwd=clone)
    git("commit", "-qm", f"release {version}", cwd=clone)


def install(tmp_path, clone, name):
    """msscaffold laid out as a pip install of ``clone``'s current release: no checkout around the
    package, the template bundle (built as the wheel build does) inside it."""
    site = tmp_path / name / "site-packages"
    shutil.copytree(
        REPO / "src" / "msscaffold",
        site / "msscaffold",
        ignore=shutil.ignore_patterns("__pycache__", "_bundle"),
    )
    shutil.copy(clone / "src" / "msscaffold" / "VERSION", site / "msscaffold" / "VERSION")
    _hatch_build().build_bundle(clone, site / "msscaffold" / "_bundle" / "template.bundle")
    return site


def user_env(site, home, data_home=None):
    """Another person: own HOME (and maybe own XDG data dir), msscaffold from ``site``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(home), PYTHONPATH=str(site))
    if data_home:
        env["XDG_DATA_HOME"] = str(data_home)
    home.mkdir(parents=True, exist_ok=True)
    return env


def run(cmd, cwd, env):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)


@pytest.fixture
def shared_project(tmp_path):
    """Alice generates a project with msscaffold 9.0.0 (installed), commits, and shares it."""
    clone = tmp_path / "template-src"
    git("clone", "-q", "--no-tags", str(REPO), str(clone), cwd=tmp_path)
    release(clone, "9.0.0")
    alice = user_env(install(tmp_path, clone, "alice-install"), tmp_path / "alice")
    result = run(
        [sys.executable, "-m", "msscaffold", "new", "proj", "--task", "vision"], tmp_path / "alice", alice
    )
    assert result.returncode == 0, result.stderr
    project = tmp_path / "alice" / "proj"
    answers = read_answers(project)
    assert answers["_src_path"] == "~/.local/share/msscaffold/template"  # per user, not Alice's path
    assert answers["_commit"] == "v9.0.0"
    release(clone, "9.0.1", "added in 9.0.1\n")
    return clone, project


@pytest.mark.parametrize("data_home", [None, "elsewhere/data"], ids=["default-data-dir", "own-data-dir"])
def test_collaborator_updates_a_fresh_clone(tmp_path, shared_project, data_home):
    clone, alices = shared_project
    bob_home = tmp_path / "bob"
    bob = user_env(install(tmp_path, clone, "bob-install"), bob_home, data_home and bob_home / data_home)
    project = bob_home / "proj"
    git("clone", "-q", str(alices), str(project), cwd=tmp_path)

    # Plain Copier cannot: the recorded template folder does not exist for Bob.
    plain = run([sys.executable, "-m", "copier", "update", "--defaults"], project, bob)
    assert plain.returncode != 0
    assert not (bob_home / ".local" / "share" / "msscaffold").exists()

    result = run([sys.executable, "-m", "msscaffold", "update"], project, bob)
    assert result.returncode == 0, result.stderr
    answers = read_answers(project)
    assert answers["_commit"] == "v9.0.1"
    assert answers["_src_path"] == "~/.local/share/msscaffold/template"  # unchanged: same for everyone
    assert (project / "RELEASE.md").read_text() == "added in 9.0.1\n"
    assert (bob_home / ".local" / "share" / "msscaffold" / "template" / ".git").is_dir()
    assert not (tmp_path / "alice" / "proj" / "RELEASE.md").exists()  # Alice's copy untouched

    # From then on plain `copier update` works for Bob too (nothing newer: a no-op that succeeds).
    git("add", "-A", cwd=project)
    git("commit", "-qm", "update to 9.0.1", cwd=project)
    again = run([sys.executable, "-m", "copier", "update", "--defaults", "--skip-answered"], project, bob)
    assert again.returncode == 0, again.stderr
    assert read_answers(project)["_commit"] == "v9.0.1"


def test_update_with_an_older_msscaffold_says_so(tmp_path, shared_project):
    """Carol's msscaffold (9.0.0) predates the project's template (9.0.1): one line, nothing changed."""
    clone, alices = shared_project
    bob = user_env(install(tmp_path, clone, "bob-install"), tmp_path / "bob")
    assert run([sys.executable, "-m", "msscaffold", "update"], alices, bob).returncode == 0
    git("add", "-A", cwd=alices)
    git("commit", "-qm", "update to 9.0.1", cwd=alices)

    old = tmp_path / "old-clone"
    git("clone", "-q", str(REPO), str(old), cwd=tmp_path)
    release(old, "9.0.0")
    carol = user_env(install(tmp_path, old, "carol-install"), tmp_path / "carol")
    project = tmp_path / "carol" / "proj"
    git("clone", "-q", str(alices), str(project), cwd=tmp_path)
    result = run([sys.executable, "-m", "msscaffold", "update"], project, carol)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "v9.0.1" in lines[0] and "pip install -U msscaffold" in lines[0], result.stderr
    assert git("status", "--porcelain", cwd=project) == ""


@pytest.mark.slow
@pytest.mark.parametrize("task", ["vision", "nlp"])
def test_a_project_of_every_earlier_release_updates_to_this_checkout(tmp_path, task):
    """Users' projects were generated by earlier releases: each updates cleanly to the current
    template (Copier applies the new template's excludes to the old version's render too)."""
    from msscaffold import generate as _generate
    from msscaffold import update as _update
    from msscaffold.source import TemplateSource

    clone = tmp_path / "clone"
    git("clone", "-q", "--no-tags", str(REPO), str(clone), cwd=tmp_path)
    tags = _hatch_build().release_tags(clone)
    for tag, commit in tags.items():
        git("tag", tag, commit, cwd=clone)
    head = git("rev-parse", "HEAD", cwd=clone).strip()
    for tag in [t for t, commit in tags.items() if commit != head and t != "v0.1.0"]:  # v0.1.0: no tasks yet
        dest = tmp_path / f"{task}-{tag}"
        source = TemplateSource(str(clone), tag, "custom")
        _generate.new_project(
            dest, source=source, data={"task": task, "project_name": "old-proj"}, init_git=True
        )
        assert _update.update_project(dest, vcs_ref=head) == []
        assert read_answers(dest)["_commit"] != tag
        assert (dest / "old_proj" / "engine" / "schema.py").is_file()
        assert git("status", "--porcelain", cwd=dest) != ""  # the update is left for the user to review


def vision_project_at_release(tmp_path, tag: str):
    """A clone of this checkout with release ``tag`` tagged, and a vision project ``proj``
    generated (with git) from that release: (clone, project)."""
    from msscaffold import generate as _generate
    from msscaffold.source import TemplateSource

    clone = tmp_path / "clone"
    git("clone", "-q", "--no-tags", str(REPO), str(clone), cwd=tmp_path)
    git("tag", tag, _hatch_build().release_tags(clone)[tag], cwd=clone)
    dest = tmp_path / "proj"
    source = TemplateSource(str(clone), tag, "custom")
    _generate.new_project(dest, source=source, data={"task": "vision", "project_name": "proj"}, init_git=True)
    return clone, dest


@pytest.mark.slow
def test_an_edit_of_a_module_the_template_moved_follows_it_or_is_named(tmp_path):
    """0.4.0's engine/console.py is logs/console.py now, and engine/trainer.py became
    engine/loop.py: a user's edit of either is merged into the new file or named as a conflict,
    never dropped with the old file (plain Copier deletes it, edit and all)."""
    from msscaffold import update as _update

    clone, dest = vision_project_at_release(tmp_path, "v0.4.0")
    engine = dest / "proj" / "engine"
    console = (engine / "console.py").read_text()
    line = """        return line + (f"  skipped {logs['skipped_steps']}" if logs["skipped_steps"] else "")"""
    assert console.count(line) == 1
    (engine / "console.py").write_text(console.replace(line, line + "  [user edit]"))
    trainer = (engine / "trainer.py").read_text()
    (engine / "trainer.py").write_text(
        trainer.replace('"""The training loop', '"""[user edit 2] The training loop')
    )
    git("commit", "-qam", "user edits", cwd=dest)

    conflicts = _update.update_project(dest, vcs_ref=git("rev-parse", "HEAD", cwd=clone).strip())
    assert not (engine / "console.py").exists()
    assert line + "  [user edit]" in (dest / "proj" / "logs" / "console.py").read_text()  # followed the file
    assert not any(c.startswith("proj/logs/console.py") for c in conflicts), conflicts
    loop = (engine / "loop.py").read_text()
    assert "[user edit 2]" in loop or any("engine/trainer.py" in c for c in conflicts), conflicts
    if "[user edit 2]" not in loop:  # kept for the user to move by hand, and said so
        assert "[user edit 2]" in (engine / "trainer.py").read_text()


@pytest.mark.slow
def test_an_edit_of_a_network_that_moved_into_models_follows_it(tmp_path):
    """0.5.0's tasks/vision/resnet.py is models/resnet.py now: the user's edit moves with it."""
    from msscaffold import update as _update

    clone, dest = vision_project_at_release(tmp_path, "v0.5.0")
    old = dest / "proj" / "tasks" / "vision" / "resnet.py"
    line = "        self.layer1, self.layer2, self.layer3, self.layer4 = stages\n"
    assert old.read_text().count(line) == 1
    old.write_text(old.read_text().replace(line, line.rstrip() + "  # [user edit]\n"))
    git("commit", "-qam", "user edit", cwd=dest)

    conflicts = _update.update_project(dest, vcs_ref=git("rev-parse", "HEAD", cwd=clone).strip())
    assert not old.exists()
    assert "= stages  # [user edit]" in (dest / "proj" / "models" / "resnet.py").read_text()
    assert not any("resnet.py" in c for c in conflicts), conflicts


# --- A project full of user edits across a template release ------------------------------

MINE = '''"""The user's own code, named in config/config.yaml."""

import numpy as np
from mindspore import nn


class MyCNN(nn.Cell):
    def __init__(self, num_classes, in_channels, image_size):
        super().__init__()
        self.head = nn.Dense(in_channels * image_size * image_size, num_classes)

    def construct(self, x):
        return self.head(x.reshape(x.shape[0], -1))


def macro_f1(logits, labels):
    return float(np.mean(logits.argmax(1) == labels))
'''
USER_SEAMS = {
    "arch: small_cnn": "arch: mine:MyCNN",
    "seed: 42": "seed: 7",
    "monitor: null": "monitor: macro_f1",
    "monitor_mode: null": "monitor_mode: max",
    "metrics: []": "metrics: [mine:macro_f1]",
    "name: adam": "name: mindspore.nn:RMSProp",
    "schedule: cosine": "schedule: custom.optim:linear",
}


def test_a_project_full_of_user_edits_updates_with_no_conflict(tmp_path, template):
    """The seams set in config/config.yaml, the user's module at the root, their own versions of
    custom/ and an experiment; then a release that changes the template's copies of all of them
    (the arch list, config.yaml's header, the engine, custom/'s examples, the experiment): `update`
    exits 0 with no conflict, every user edit is as it was, and the engine change arrives."""
    result = msscaffold("new", "proj", "--task", "vision", "--template", str(template), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    project, package = tmp_path / "proj", tmp_path / "proj" / "proj"
    config = project / "config" / "config.yaml"
    text = config.read_text()
    for old, new in USER_SEAMS.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    config.write_text(text)
    (project / "mine.py").write_text(MINE)
    (project / "custom" / "models.py").write_text('"""My models: none yet."""\n')
    (project / "config" / "experiments" / "quick.yaml").write_text("train:\n  epochs: 1\n")
    git("add", "-A", cwd=project)
    git("commit", "-qm", "make it mine", cwd=project)
    ours = {p: p.read_bytes() for p in (config, project / "mine.py", project / "custom" / "models.py",
                                         project / "config" / "experiments" / "quick.yaml")}

    def edit(rel: str, old: str, new: str) -> None:
        file = template / "template" / rel
        assert old in file.read_text(), (rel, old)
        file.write_text(file.read_text().replace(old, new, 1))

    header = "# Unknown keys and wrong types"
    edit("config/config.yaml.jinja", header, f"# A header line of the new release.\n{header}")
    edit("config/config.yaml.jinja", "seed: {{ seed }}", "seed: {{ seed }}  # (1.1)\n# below the seed")
    edit("{{package_name}}/tasks/vision/config.py", '"vit_b_16")', '"vit_b_16", "resnet101")')
    edit("{{package_name}}/engine/loop.py", '"""The training loop', '"""(1.1) The training loop')
    edit("_partials/vision/custom/models.py", '"""Your networks.', '"""Your networks (1.1).')
    edit("_partials/vision/config.jinja", "epochs: 2", "epochs: 3")
    release_v2(template)

    result = msscaffold("update", str(project))
    assert result.returncode == 0, result.stderr
    assert {p: p.read_bytes() for p in ours} == ours
    assert '"resnet101")' in (package / "tasks" / "vision" / "config.py").read_text()
    assert (package / "engine" / "loop.py").read_text().startswith('"""(1.1) The training loop')
    assert (project / "NEW.md").is_file() and read_answers(project)["_commit"] == "v1.1.0"
    status = git("status", "--porcelain", cwd=project)
    assert "config/" not in status and "custom/" not in status and "mine.py" not in status, status
    load = subprocess.run([sys.executable, "-c", "from proj.tasks import load_config; "
                           "print(load_config('config/config.yaml').model.arch)"],
                          cwd=project, capture_output=True, text=True)
    assert load.stdout.strip() == "mine:MyCNN", load.stderr
