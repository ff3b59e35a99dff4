"""Seams: the config keys that take a built-in name or your own code, named ``module:attr``.

    model.arch: my_code:MyCNN            optim.name: mindspore.nn:RMSProp
    optim.schedule: my_code:linear       train.loss: my_code:SmoothCE
    eval.metrics: [my_code:macro_f1]     train.callbacks: [my_code:StopAtLoss]

``module`` is a file at the project root or an installed package. Importing runs it, so only your
config names code: ``untrusted`` refuses a checkpoint's config that names code yours does not."""

from __future__ import annotations

import importlib
import importlib.util
import re
from typing import Any

from .errors import ConfigError

SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
HOW = "your own code as module:attr (README, 'Make it yours')"


class MissingFeature(ConfigError, ValueError):
    """A config value needing an absent optional feature (a ValueError too, for schema validators)."""


def present(module: str) -> bool:
    """Is this package's optional ``module`` (e.g. ``run.manifest``, a feature's) in the project?"""
    return importlib.util.find_spec(f"{__package__.rpartition('.')[0]}.{module}") is not None


def feature(module: str, name: str, wanted: str = "") -> None:
    """Refuse ``wanted`` (``key=value``) when this package's ``module`` of feature ``name`` is absent."""
    if not present(module):
        raise MissingFeature(f"{wanted + ': ' if wanted else ''}needs the {name!r} feature, not in this project: "
                             f"`msscaffold add {name}` brings it")


def is_spec(value: Any) -> bool:
    return isinstance(value, str) and SPEC.fullmatch(value) is not None


def check_name(value: str, builtins: tuple[str, ...]) -> str:
    """For a schema's validator: a built-in name or a well-formed ``module:attr``."""
    if value in builtins or is_spec(value):
        return value
    raise ValueError(f"{value!r} is none of {', '.join(builtins)}, nor {HOW}")


def load(key: str, spec: str, base: type | None = None, function: bool = False) -> Any:
    """The subclass of ``base`` (or the ``function``) ``spec`` names; else one line naming ``key``."""
    module_name, _, attr = spec.partition(":")
    try:
        found = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{key}={spec}: cannot import {module_name!r} ({exc}); put {module_name.split('.')[0]}"
                          ".py at the project root or install its package") from None
    except SyntaxError as exc:
        raise ConfigError(f"{key}={spec}: {exc.filename}, line {exc.lineno}: {exc.msg}") from None
    for part in attr.split("."):
        if not hasattr(found, part):
            raise ConfigError(f"{key}={spec}: {module_name} has no {attr!r}")
        found = getattr(found, part)
    if base is not None and not (isinstance(found, type) and issubclass(found, base)):
        where = "mindspore.nn" if base.__module__.startswith("mindspore.nn") else base.__module__
        raise ConfigError(f"{key}={spec}: {attr} is {_kind(found)}, not a subclass of {where}.{base.__qualname__}")
    if function and (isinstance(found, type) or not callable(found)):
        raise ConfigError(f"{key}={spec}: {attr} is {_kind(found)}, not a function")
    return found


def build(key: str, spec: str, cls: type, **kwargs) -> Any:
    """``cls(**kwargs)``; a signature that does not fit is one line naming ``key``."""
    try:
        return cls(**kwargs)
    except TypeError as exc:
        called = ", ".join(f"{name}=..." for name in kwargs)
        raise ConfigError(f"{key}={spec}: {cls.__name__}({called}) failed: {exc}") from None


def your_metrics(cfg, *arrays: Any) -> dict[str, float]:
    """eval.metrics: each function on the task's eval arrays, reported under its name."""
    metrics = {}
    for spec in cfg.eval.metrics:
        value = load("eval.metrics", spec, function=True)(*arrays)
        try:
            metrics[metric_name(spec)] = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"eval.metrics: {spec} returned {type(value).__name__}, not a number") from None
    return metrics


def metric_name(spec: str) -> str:
    """``my_code:macro_f1`` -> ``macro_f1``: the name an eval.metrics function is reported under."""
    return spec.rpartition(":")[2].rpartition(".")[2]


def _kind(obj: Any) -> str:
    return f"the class {obj.__name__}" if isinstance(obj, type) else f"a {type(obj).__name__}"


# The config keys that may name code (train.callbacks: its own rule, engine/resume.py).
CODE_KEYS = ("model.arch", "optim.name", "optim.schedule", "train.loss", "eval.metrics", "data.path")


def named_code(flat: dict[str, Any]) -> dict[str, str]:
    """``key -> module:attr`` for every spec in a flattened config (lists: ``key[i]``)."""
    found = {}
    for key in CODE_KEYS:
        value = flat.get(key)
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            if is_spec(item):
                found[f"{key}[{i}]" if isinstance(value, list) else key] = item
    return found


def untrusted(saved: dict[str, Any], allowed: set[str], source: str) -> None:
    """Refuse a checkpoint's flattened config naming code outside ``allowed``: a checkpoint is data."""
    for key, spec in named_code(saved).items():
        if spec not in allowed:
            raise ConfigError(f"{source} was trained with {key.partition('[')[0]}={spec}, which your config does not "
                              f"name: code runs only when your config names it; name it in config/config.yaml or "
                              "an experiment file to use it")
