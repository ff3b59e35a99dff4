"""Task registry: one sub-package per task, found by the ``task`` key of the config.

A task package exposes, in its ``__init__``, the pydantic sections ``DataConfig`` and
``ModelConfig`` (cheap to import) and ``load() -> engine.task.Task`` (imports MindSpore).
Adding a task means adding a package here; the engine never changes.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from ..engine.errors import ConfigError


def available() -> list[str]:
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if info.ispkg)


def _module(name: object) -> ModuleType:
    if name not in available():
        raise ConfigError(f"task={name!r}: choose one of {', '.join(available())}")
    return importlib.import_module(f"{__name__}.{name}")


def task_configs(name: object) -> tuple[type, type]:
    module = _module(name)
    return module.DataConfig, module.ModelConfig


def get_task(name: str):
    return _module(name).load()
