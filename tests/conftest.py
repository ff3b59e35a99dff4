"""Isolation for every test and every subprocess it starts.

HOME and XDG_* point into a private temporary tree (so no user Copier settings, git config
or msscaffold data dir leaks in or out), and git gets an identity through the environment
(CI runs on a fresh clone with none configured). pip keeps using the real cache.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_real_pip_cache = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
_home = Path(tempfile.mkdtemp(prefix="msscaffold-tests-home-"))
os.environ.update(
    HOME=str(_home),
    XDG_CONFIG_HOME=str(_home / ".config"),
    XDG_DATA_HOME=str(_home / ".local" / "share"),
    XDG_CACHE_HOME=str(_home / ".cache"),
    XDG_STATE_HOME=str(_home / ".local" / "state"),
    GIT_AUTHOR_NAME="msscaffold tests",
    GIT_AUTHOR_EMAIL="tests@msscaffold.invalid",
    GIT_COMMITTER_NAME="msscaffold tests",
    GIT_COMMITTER_EMAIL="tests@msscaffold.invalid",
    GIT_CONFIG_NOSYSTEM="1",
    PIP_CACHE_DIR=_real_pip_cache,
    # OpenMP threads (PyTorch's, MindSpore's oneDNN) sleep when idle rather than spin: a spinning
    # PyTorch reference test made a MindSpore run beside it on 2 cores 4x slower (32 vs 8 s).
    OMP_WAIT_POLICY="PASSIVE",
    # MindSpore runs its host work on the calling thread, without the frontend/backend queue
    # threads that yield-spin while they wait: three trainings at once on 2 cores took 16 s
    # rather than 18.5 s (median of 6 pairs), the same alone. Numerics are unchanged.
    MS_DEV_HOST_BLOCKING_RUN="1",
)
for _var in ("COPIER_SETTINGS_PATH", "GIT_DIR", "GIT_WORK_TREE"):
    os.environ.pop(_var, None)


@pytest.fixture
def data_home(tmp_path, monkeypatch) -> Path:
    """A fresh XDG data dir: msscaffold's per-user template repo starts from nothing."""
    path = tmp_path / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(path))
    return path


# The longest tests first, so the parallel processes end together (``--dist load`` hands out
# one test at a time in this order): the generated projects' suites (minutes each; nlp's the
# longest), then the release round trips, weight imports and the wheel (10-40 s each).
LONGEST_FIRST = (
    "test_tasks.py::test_generated_project_slow_tests",
    "test_tasks.py::test_generated_project_quick",
    "test_tasks.py::test_generated_project_default_training",
    "test_update.py",
    "test_weights.py",
    "test_wheel.py",
)
LONGEST_TASKS = ("[nlp]", "[multimodal]", "[vision]")


def _first(names, matches) -> int:
    return next((i for i, name in enumerate(names) if matches(name)), len(names))


def pytest_collection_modifyitems(items):
    items.sort(  # stable: the order within a group and task stays as collected
        key=lambda item: (
            _first(LONGEST_FIRST, lambda prefix: prefix in item.nodeid),
            _first(LONGEST_TASKS, item.nodeid.endswith),
        )
    )


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one process more than cores (at most 4). With one per core, CI kept 1.7 of
    the 2 cores busy (the tests wait on subprocess and msrun start-ups, git, Copier). Fresh-clone
    pytest, 2 cores: 2 processes 17 min 50 s, 3 processes 15 min 51 s, 4 processes 15 min 35 s.
    With passive OpenMP and MindSpore's blocking host run (2026-12-06): 3 processes 15 min 54 s,
    2 processes 16 min 12 s (less CPU, 30.3 against 31.5 min, but fewer waits overlapped)."""
    return min((os.cpu_count() or 1) + 1, 4)
