"""Load a run configuration: YAML file + ``--set a.b=c`` overrides, validated up front.

The schema lives in ``engine/schema.py`` (shared sections) and in each task's
``config.py`` (its ``data`` and ``model`` sections and cross-section checks); the task
registry says which schema a config's ``task:`` key selects. Everything is checked before
MindSpore does any work, and every error names the key (and the closest valid key for a
typo). This module never imports MindSpore.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..tasks import config_schema
from .errors import ConfigError
from .schema import Config


class _Loader(yaml.SafeLoader):
    """YAML with YAML 1.2 floats: ``3e-4`` is a number (PyYAML's 1.1 rules read it as text)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?[eE][-+]?\d+$"),
    list("-+0123456789."),
)


def parse(text: str):
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def load_config(path: str | Path, overrides: list[str] = ()) -> Config:
    """Read ``path``, apply ``key.path=value`` overrides and validate everything."""
    path = Path(path)
    try:
        raw = parse(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}".replace("\n", " ")) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a mapping of sections")
    for item in overrides:
        apply_override(raw, item)
    return build_config(raw, source=str(path))


def build_config(raw: dict[str, Any], source: str = "config") -> Config:
    """Validate a plain dict (e.g. a checkpoint's saved config) against its task's schema."""
    schema = config_schema(raw.get("task"))
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc.errors()[0], schema)}") from None


def apply_override(raw: dict[str, Any], item: str) -> None:
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {item!r} must look like section.key=value")
    *parents, leaf = key.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {item!r}: {part!r} is not a section")
    node[leaf] = parse(text) if text else None


def _describe(error: dict[str, Any], schema: type[BaseModel]) -> str:
    loc = [str(part) for part in error["loc"]]
    key = ".".join(loc)
    if error["type"] == "value_error":
        message = error["msg"].removeprefix("Value error, ")
        # A field's check says what is wrong with its value; a section's check names its keys.
        return message if isinstance(error.get("input"), dict) else f"{key}={error.get('input')!r}: {message}"
    if error["type"] == "extra_forbidden":
        hint = _closest(loc, schema)
        return f"unknown key {key!r}" + (f" (did you mean {hint!r}?)" if hint else "")
    if error["type"] == "missing":
        return f"missing key {key!r}"
    return f"{key}={error.get('input')!r}: {error['msg']}"


def _closest(loc: list[str], schema: type[BaseModel]) -> str | None:
    """The valid key nearest to the typo at ``loc``, spelled as a full dotted path."""
    model: Any = schema
    for part in loc[:-1]:
        field = model.model_fields.get(part)
        if field is None or not isinstance(field.annotation, type):
            return None
        model = field.annotation
    match = difflib.get_close_matches(loc[-1], list(model.model_fields), n=1)
    return ".".join([*loc[:-1], match[0]]) if match else None
