"""Load a run configuration: YAML files merged key by key, then ``--set a.b=c`` overrides, validated
before MindSpore is imported; every error names the key (and the closest valid one for a typo)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .errors import ConfigError
from .schema import Config
from .seams import named_code

DEFAULT_CONFIG = "config/config.yaml"  # the project's config, relative to its root (where the scripts run)


class DuplicateKey(yaml.YAMLError):
    """A mapping that gives one key twice (PyYAML would keep the last silently)."""


class _Loader(yaml.SafeLoader):
    """YAML 1.2 floats (``3e-4`` is a number, not text) and a key given twice refused."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<: *base``: its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise DuplicateKey(f"key {key!r} is given twice (lines {seen[key]} and {line}): keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?[eE][-+]?\d+$"),
    list("-+0123456789."),
)


def parse(text: str):
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


Schemas = Callable[[object], type[Config]]  # the ``task:`` value -> that task's config class


def load_config(paths: str | Path | Sequence[str | Path], overrides: Sequence[str], schemas: Schemas) -> Config:
    """Layer the YAML files, then the overrides, and validate; errors name the file that set the key."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    layers = [(str(path), read_yaml(Path(path))) for path in paths]
    command_line: dict[str, Any] = {}
    for item in overrides:
        apply_override(command_line, item)
    layers.append(("--set", command_line))
    raw: dict[str, Any] = {}
    for _, layer in layers:
        merge(raw, layer)
    schema = schemas(raw.get("task"))
    cfg = build_config(schema.complete(raw, command_line), schema, source=lambda loc: _source(loc, layers))
    cfg._origin = {"files": [str(path) for path in paths], "overrides": list(overrides)}
    return cfg


MAX_STEPS = 10_000_000  # optimizer steps of one run (days at 10 ms a step); its rate schedule is 40 MB


def check_run_length(cfg: Config, total_steps: int, steps_per_epoch: int) -> int:
    """``total_steps``, refused past ``MAX_STEPS`` naming the key that asked for them."""
    if total_steps > MAX_STEPS:
        given = (f"train.max_steps={cfg.train.max_steps}" if cfg.train.max_steps else
                 f"train.epochs={cfg.train.epochs} ({steps_per_epoch:,} optimizer steps each)")
        raise ConfigError(f"{given}: {total_steps:,} optimizer steps, more than the {MAX_STEPS:,} a run may take; "
                          "lower it")
    return total_steps


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = parse(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path} is not UTF-8 text (line {line}, byte {exc.start}): save it as UTF-8") from None
    except DuplicateKey as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}".replace("\n", " ")) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a mapping of sections")
    return raw


def merge(base: dict[str, Any], layer: dict[str, Any]) -> None:
    """Merge ``layer`` into ``base`` key by key; other values, ``*kwargs`` mappings too, replace."""
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict) and not key.endswith("kwargs"):
            merge(base[key], value)
        else:
            base[key] = value


def build_config(raw: dict[str, Any], schemas: Schemas | type[Config],
                 source: str | Callable[[tuple], str] = "config") -> Config:
    """Validate a plain dict (e.g. a checkpoint's config); ``source``: its origin, or loc -> origin."""
    schema = schemas if isinstance(schemas, type) else schemas(raw.get("task"))
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = source(error["loc"]) if callable(source) else source
        raise ConfigError(f"{where}: {_describe(error, schema)}") from None


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
    try:
        node[leaf] = parse(text) if text else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {item!r}: {text!r} is not a YAML value ({getattr(exc, 'problem', None) or exc})"
                          .replace("\n", " ")) from None


def _source(loc: tuple, layers: list[tuple[str, dict[str, Any]]]) -> str:
    """The last layer that sets the key at ``loc`` (none does: all the files)."""
    for name, layer in reversed(layers if loc else []):
        if _sets(layer, loc):
            return name
    return " + ".join(name for name, _ in layers[:-1])


def _sets(layer: dict[str, Any], loc: tuple) -> bool:
    node: Any = layer
    for part in loc:
        if not isinstance(node, dict):
            return True  # inside a value this layer sets, e.g. an item of a list
        if part not in node:
            return False
        node = node[part]
    return True


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


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"train": {"epochs": 3}}`` -> ``{"train.epochs": 3}`` (a ``*kwargs`` mapping is one value)."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict) and not key.endswith("kwargs"):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def named_in_project(*configs: dict[str, Any]) -> set[str]:
    """The code named by the project's config files and by the flattened ``configs``."""
    found = set()
    for path in [Path(DEFAULT_CONFIG), *sorted(Path(DEFAULT_CONFIG).parent.glob("experiments/**/*.yaml"))]:
        try:
            tree = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # unreadable: it names nothing (loading it says why, where it matters)
        if isinstance(tree, dict):
            found |= set(named_code(flatten(tree)).values())
    for flat in configs:
        found |= set(named_code(flat).values())
    return found
