"""The generated project's tooling: LICENSE, pre-commit, CI workflow, Dockerfile."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml
from helpers import available_tasks, generate, git, read_answers
from packaging.specifiers import SpecifierSet
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: hatchling (test extra) brings tomli
    import tomli as tomllib

MIT_BODY = """Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""
# sha256 of the Apache Software Foundation's LICENSE-2.0.txt, byte for byte.
APACHE_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
APACHE_PLACEHOLDER = "   Copyright [yyyy] [name of copyright owner]\n"

# Hook ids each pinned repository really provides (read from their .pre-commit-hooks.yaml at
# these tags); `pre-commit run` itself needs the network, so CI of the generated project runs it.
PRE_COMMIT_HOOKS = {
    "https://github.com/astral-sh/ruff-pre-commit": {"ruff-check", "ruff-format", "ruff"},
    "https://github.com/pre-commit/pre-commit-hooks": {
        "check-merge-conflict",
        "end-of-file-fixer",
        "trailing-whitespace",
        "check-yaml",
        "check-toml",
        "check-added-large-files",
    },
}
EXPECTED_HOOKS = {"ruff-check", "check-merge-conflict", "end-of-file-fixer", "trailing-whitespace"}


def pyproject(project: Path) -> dict:
    return tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("license", ["MIT", "Apache-2.0", "none"])
def test_license_file_and_pyproject_agree(tmp_path, license):
    project = generate(tmp_path, "vision", git=False, license=license, author_name="Grace Hopper")
    meta = pyproject(project)["project"]
    file = project / "LICENSE"
    if license == "none":
        assert not file.exists()
        assert "license" not in meta and "license-files" not in meta
        assert "copyright_year" not in read_answers(project)
        assert "No license has been chosen" in (project / "README.md").read_text()
        return
    year = read_answers(project)["copyright_year"]
    assert 1970 <= year <= 9999
    assert (meta["license"], meta["license-files"]) == (license, ["LICENSE"])
    text = file.read_text(encoding="utf-8")
    if license == "MIT":
        assert text == f"MIT License\n\nCopyright (c) {year} Grace Hopper\n\n{MIT_BODY}"
    else:
        line = f"   Copyright {year} Grace Hopper\n"
        assert text.count(line) == 1
        canonical = text.replace(line, APACHE_PLACEHOLDER)
        assert hashlib.sha256(canonical.encode()).hexdigest() == APACHE_SHA256


def test_license_year_is_recorded_and_can_be_given(tmp_path):
    project = generate(tmp_path, "vision", git=False, copyright_year=2031)
    assert read_answers(project)["copyright_year"] == 2031
    assert "Copyright (c) 2031 Your Name" in (project / "LICENSE").read_text()


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("tooling"), "vision", name="Tool-Box", package_name="vis")


def test_pre_commit_config_lists_real_hooks(project):
    config = yaml.safe_load((project / ".pre-commit-config.yaml").read_text())
    hooks = set()
    for repo in config["repos"]:
        assert re.fullmatch(r"v\d+\.\d+\.\d+", repo["rev"]), repo  # a release tag, not a branch
        ids = {hook["id"] for hook in repo["hooks"]}
        assert ids <= PRE_COMMIT_HOOKS[repo["repo"]], repo
        hooks |= ids
    assert hooks == EXPECTED_HOOKS


def test_ruff_format_hook_only_when_the_project_is_format_clean(project):
    """ruff-format in pre-commit would fail the generated CI unless the template is formatted."""
    config = yaml.safe_load((project / ".pre-commit-config.yaml").read_text())
    listed = any(hook["id"] == "ruff-format" for repo in config["repos"] for hook in repo["hooks"])
    check = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert listed == (check.returncode == 0), check.stdout[-2000:]


# Files of the template that pre-commit's file hooks would still rewrite (the engine's, not
# this test's, to fix): end-of-file-fixer wants exactly one final newline.
KNOWN_UNTIDY: set[str] = set()


@pytest.mark.parametrize("task", available_tasks())
def test_generated_files_pass_the_pre_commit_file_hooks(tmp_path, task):
    """What end-of-file-fixer, trailing-whitespace and check-merge-conflict check, over every file."""
    project = generate(tmp_path, task, package_name="vis")
    untidy = set()
    for rel in git("ls-files", "-z", cwd=project).split("\0"):
        data = (project / rel).read_bytes() if rel else b""
        if not data or b"\0" in data:  # binary: the hooks skip it
            continue
        lines = data.decode("utf-8").split("\n")
        if not data.endswith(b"\n") or data.endswith(b"\n\n"):
            untidy.add(rel)
        if any(line != line.rstrip() for line in lines):
            untidy.add(rel)
        if any(line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "=======" for line in lines):
            untidy.add(rel)
    assert untidy <= {path.format(package="vis") for path in KNOWN_UNTIDY}


def test_ci_workflow(project):
    text = (project / ".github" / "workflows" / "ci.yml").read_text()
    workflow = yaml.safe_load(text)
    jobs = workflow["jobs"]
    assert all(isinstance(job.get("timeout-minutes"), int) for job in jobs.values())
    matrix = jobs["test"]["strategy"]["matrix"]["python-version"]
    assert matrix == ["3.10", "3.11", "3.12"]
    requires = SpecifierSet(pyproject(project)["project"]["requires-python"])
    assert all(Version(v) in requires for v in matrix) and Version("3.13") not in requires
    setup = next(s for s in jobs["test"]["steps"] if s.get("uses", "").startswith("actions/setup-python"))
    assert (
        setup["with"]["cache"] == "pip" and setup["with"]["python-version"] == "${{ matrix.python-version }}"
    )
    runs = " ".join(step.get("run", "") for job in jobs.values() for step in job["steps"])
    assert "pre-commit run --all-files" in runs and "python -m pytest" in runs
    assert "pre-commit" in str(pyproject(project)["project"]["optional-dependencies"]["dev"])


def dockerfile(project: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (project / "Dockerfile").read_text())
    pairs = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            pairs.append((word.upper(), rest.strip()))
    return pairs


def test_dockerfile(project, tmp_path):
    steps = dockerfile(project)
    assert steps[0] == ("FROM", "python:3.11-slim")
    assert Version("3.11") in SpecifierSet(pyproject(project)["project"]["requires-python"])
    assert steps[-1] == ("CMD", '["python", "train.py"]')
    users = [arg for word, arg in steps if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    args = dict(arg.split("=", 1) for word, arg in steps if word == "ARG")
    assert args["MINDSPORE_VERSION"] == "2.10.0"
    mindspore = next(d for d in pyproject(project)["project"]["dependencies"] if d.startswith("mindspore"))
    assert Version(args["MINDSPORE_VERSION"]) in SpecifierSet(mindspore.removeprefix("mindspore"))

    # The dependency layer: run its own Python snippet on the generated pyproject.
    install = next(arg for word, arg in steps if word == "RUN" and "tomllib" in arg)
    assert '"mindspore==${MINDSPORE_VERSION}"' in install
    snippet = re.search(r'python -c "(.*?)" >', install).group(1)  # as sh hands it to Python
    listed = subprocess.run(
        [sys.executable, "-c", snippet], cwd=project, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert listed == pyproject(project)["project"]["dependencies"]

    # Everything COPY takes exists and is not dropped by .dockerignore.
    ignored = [p.strip() for p in (project / ".dockerignore").read_text().splitlines()]
    ignored = [p.rstrip("/") for p in ignored if p and not p.startswith("#")]
    for word, arg in steps:
        if word == "COPY":
            sources = [a for a in arg.split() if not a.startswith("--")][:-1]
            for src in sources:
                assert src == "." or (project / src).exists(), src
    for rel in git("ls-files", cwd=project).split():
        if rel.startswith(("vis/", "config/", "data/")) or rel in ("train.py", "pyproject.toml"):
            assert not any(fnmatch(rel, p) or rel.startswith(p + "/") for p in ignored), rel

    readme = (project / "README.md").read_text()
    assert "docker build -t tool-box ." in readme and "docker run --rm" in readme


def test_ci_preinstalls_the_torch_release_the_test_extra_pins():
    """.ci/run puts torch in with pip before uv installs the rest (uv would fetch another build):
    the release it names is the one the test extra pins."""
    repo = Path(__file__).resolve().parents[1]
    extra = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pinned = [r for r in extra["optional-dependencies"]["test"] if re.match(r"torch\b", r)]
    ci = (repo / ".ci" / "run").read_text(encoding="utf-8")
    assert len(pinned) == 1 and f'"{pinned[0]}"' in ci, (pinned, ci)
