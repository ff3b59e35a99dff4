"""Typed run configuration: YAML file + ``--set a.b=c`` overrides, validated up front.

The engine owns the shared sections (runtime, train, optim, output); each task adds
its own ``data`` and ``model`` sections. Everything is checked before MindSpore does
any work, and every error names the key (and the closest valid key for a typo).
This module never imports MindSpore.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from .errors import ConfigError


class Section(BaseModel):
    """Base for every config section: unknown keys are errors, values are not coerced silently."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Runtime(Section):
    device: Literal["auto", "CPU", "GPU", "Ascend"] = "auto"
    # oneDNN's instruction-set cap (env ONEDNN_MAX_CPU_ISA), set before the first op.
    # "AVX2" makes small convolutions 10-20x faster on AVX-512 CPUs but slows matmul-heavy
    # models; null leaves oneDNN's default.
    onednn_max_isa: Literal["AVX2", "AVX512_CORE", "SSE41"] | None = None


class Train(Section):
    jit: bool = True  # false: run the same step in PyNative mode for debugging
    epochs: int = Field(10, gt=0)
    max_steps: int | None = Field(None, gt=0)  # optimizer steps; overrides epochs when set
    batch_size: int = Field(64, gt=0)  # per device and per micro-step
    grad_accum_steps: int = Field(1, gt=0)
    amp_level: Literal["O0", "O1", "O2", "O3"] = "O0"
    amp_dtype: Literal["float16", "bfloat16"] = "float16"
    loss_scale: float = Field(2.0**16, gt=0)  # initial dynamic loss scale (amp only)
    loss_scale_window: int = Field(1000, gt=0)  # finite steps before the scale grows
    grad_clip: float | None = Field(None, gt=0)  # max global gradient norm
    eval_every: int | None = Field(None, gt=0)  # optimizer steps; null = once per epoch
    log_every: int = Field(10, gt=0)
    early_stop_patience: int | None = Field(None, gt=0)  # evaluations without improvement
    callbacks: list[str] = []  # "module:Class" user callbacks, see engine/callbacks.py


class Optim(Section):
    name: Literal["sgd", "momentum", "adam", "adamw", "lazy_adam"] = "adam"  # lazy_adam: for sparse embeddings
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    schedule: Literal["constant", "step", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    min_lr_ratio: float = Field(0.0, ge=0, le=1)  # cosine floor, as a fraction of lr
    step_size: int = Field(1000, gt=0)  # "step" schedule: decay every N optimizer steps
    gamma: float = Field(0.1, gt=0, le=1)


class Output(Section):
    dir: str = "runs"
    name: str | None = None  # run folder name; null = timestamp
    metrics_format: Literal["jsonl", "csv"] = "jsonl"
    plot: bool = True


class Config(Section):
    task: str
    seed: int = 42  # the same seed on every rank: identical init, data order differs by shard
    runtime: Runtime = Runtime()
    train: Train = Train()
    optim: Optim = Optim()
    output: Output = Output()
    data: Section
    model: Section

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def digest(self) -> str:
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def load_config(path: str | Path, overrides: list[str] = ()) -> Config:
    """Read ``path``, apply ``key.path=value`` overrides and validate everything."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
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
    """Validate a plain dict (e.g. a checkpoint's saved config) against the task's schema."""
    from ..tasks import task_configs  # the task's own data/model sections

    data_cls, model_cls = task_configs(raw.get("task"))
    schema = create_model("Config", __base__=Config, data=(data_cls, data_cls()), model=(model_cls, model_cls()))
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
    node[leaf] = yaml.safe_load(text) if text else None


def _describe(error: dict[str, Any], schema: type[BaseModel]) -> str:
    loc = [str(part) for part in error["loc"]]
    key = ".".join(loc)
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
