"""Task registry: one sub-package per task (the config's ``task``), whose ``__init__`` exposes ``TaskConfig``
(cheap to import) and ``load() -> engine.task.Task`` (imports MindSpore). The engine never imports it."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from ..engine import config
from ..engine.errors import ConfigError
from ..engine.schema import Config


def available() -> list[str]:
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if info.ispkg)


def _module(name: object) -> ModuleType:
    if name not in available():
        raise ConfigError(f"task={name!r}: choose one of {', '.join(available())}")
    return importlib.import_module(f"{__name__}.{name}")


def config_schema(name: object) -> type:
    """The task's ``TaskConfig`` class (pydantic; MindSpore is not imported)."""
    return _module(name).TaskConfig


def get_task(name: str):
    """The task's ``engine.task.Task`` (imports MindSpore: call after the runtime is set up)."""
    return _module(name).load()


def load_config(paths, overrides=()) -> Config:
    return config.load_config(paths, overrides, config_schema)


def build_config(raw: dict, source: str = "config") -> Config:
    return config.build_config(raw, config_schema, source)
