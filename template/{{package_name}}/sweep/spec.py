"""A sweep file: which config keys to search, over what, and what to optimise.

    # config/sweeps/example.yaml
    trials: 8
    metric: accuracy          # default: the task's monitor (the metric that picks best.ckpt)
    direction: maximize       # default: the task's mode for its monitor; for another metric, its kind
                              # (a loss or perplexity: minimize; an accuracy, AUC, HR@k, R@k: maximize)
    seed: 0                   # the sampler's (TPE) seed
    pruner: {startup_trials: 3, warmup_steps: 0}  # MedianPruner; python sweep.py --no-prune: none
    config: []                # experiment files every trial layers over config/config.yaml
    set: {train.max_steps: 100, train.eval_every: 20}  # fixed for every trial
    enqueue: [{optim.lr: 0.003}]                        # trials to run first, with these values
    params:
      optim.lr: {low: 1.0e-4, high: 1.0e-1, log: true}  # float (a float bound) or int (int bounds)
      model.blocks_per_stage: {low: 1, high: 3}
      model.norm: {choices: [group, batch]}             # categorical

Every key, bound and choice is checked against the config schema before the first trial, so
a typo fails in a second with the key's name, not after a trial has trained. No Optuna here.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..engine.config import read_yaml
from ..engine.errors import ConfigError
from ..engine.schema import Config
from ..run.cli import DEFAULT_CONFIG
from ..tasks import load_config

Scalar = str | int | float | bool | None
RESERVED = ("task", "output.name", "train.callbacks")  # set by the sweep itself (output.dir: its parent)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class Param(_Strict):
    """One searched key: ``low``/``high`` (``log``, ``step``) or ``choices``."""

    type: Literal["float", "int", "categorical"] | None = None  # default: from the bounds or choices
    low: int | float | None = None
    high: int | float | None = None
    log: bool = False
    step: int | float | None = None
    choices: list[Scalar] | None = None

    @model_validator(mode="after")
    def _check(self) -> Param:
        if self.choices is not None:
            if self.type not in (None, "categorical") or self.low is not None or self.high is not None:
                raise ValueError("give either choices or low/high, not both")
            if not self.choices or len({json.dumps(c) for c in self.choices}) < len(self.choices):
                raise ValueError("choices must be a non-empty list without repeats")
            self.type = "categorical"
            return self
        if self.low is None or self.high is None:
            raise ValueError("needs low and high (a range) or choices (a list)")
        ints = type(self.low) is int and type(self.high) is int and (self.step is None or type(self.step) is int)
        self.type = self.type or ("int" if ints else "float")
        if self.type == "int" and not ints:
            raise ValueError("type int needs whole-number low, high and step")
        if self.type == "categorical":
            raise ValueError("type categorical needs choices")
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.log and self.low <= 0:
            raise ValueError(f"log needs low > 0, not {self.low}")
        if self.step is not None and (self.step <= 0 or self.log):
            raise ValueError("step must be > 0 and cannot be combined with log")
        return self

    def contains(self, value: Any) -> bool:
        if self.type == "categorical":
            return json.dumps(value) in {json.dumps(c) for c in self.choices}
        if self.type == "int" and type(value) is not int:
            return False
        return isinstance(value, (int, float)) and not isinstance(value, bool) and self.low <= value <= self.high

    def edges(self) -> list[Any]:
        """The values that reach the schema's checks: both bounds, or every choice."""
        if self.type == "categorical":
            return list(self.choices)
        return [self.low, self.high] if self.type == "int" else [float(self.low), float(self.high)]


class Pruner(_Strict):
    startup_trials: int = Field(3, ge=0)  # completed trials before any is pruned
    warmup_steps: int = Field(0, ge=0)  # optimizer steps of a trial before it may be pruned


class SweepFile(_Strict):
    trials: int = Field(8, gt=0)
    metric: str | None = None
    direction: Literal["maximize", "minimize"] | None = None
    seed: int = Field(0, ge=0)
    pruner: Pruner = Pruner()
    config: list[str] = []
    set: dict[str, Scalar | list[Scalar]] = {}
    enqueue: list[dict[str, Scalar]] = []
    params: dict[str, Param] = Field(min_length=1)


class Sweep:
    """A checked sweep file; ``resolve`` then settles its metric and direction with the task's."""

    def __init__(self, path: Path, spec: SweepFile, base: Config, fixed: list[str]):
        self.path, self.name, self.spec, self.base = path, path.stem, spec, base
        self.configs = [DEFAULT_CONFIG, *spec.config]
        self.fixed = fixed  # --set overrides of every trial
        self.metric, self.direction = spec.metric, spec.direction or "maximize"

    def resolve(self, metrics: tuple[str, ...], monitor: str, mode: str) -> Sweep:
        """The metric (default: the task's ``monitor``) must be one the task logs (``metrics``)."""
        self.metric = self.spec.metric or monitor
        if self.metric not in metrics:
            raise ConfigError(f"{self.path}: metric {self.metric!r} is not logged by the {self.base.task} task "
                              f"(it logs: {', '.join(metrics)})")
        self.direction = self.spec.direction or direction_of(self.metric, monitor, mode)
        if self.direction is None:
            raise ConfigError(f"{self.path}: metric {self.metric!r}: is a higher or a lower value better? "
                              "set direction: maximize or minimize")
        return self

    @property
    def params(self) -> dict[str, Param]:
        return self.spec.params

    def overrides(self, values: dict[str, Any]) -> list[str]:
        return [*self.fixed, *(f"{key}={text(value)}" for key, value in values.items())]


LOWER_IS_BETTER = re.compile(r"(loss|ppl|perplexity|error)$")
HIGHER_IS_BETTER = re.compile(r"(acc|accuracy|auc|hr\d+(_full)?|ndcg\d+|r\d+)$")


def direction_of(metric: str, monitor: str, mode: str) -> str | None:
    """A metric's default direction: the task's mode for its monitor, else from the metric's kind
    (a loss or perplexity falls, an accuracy, AUC or hit rate rises); None when its name says neither."""
    if metric == monitor:
        return "minimize" if mode == "min" else "maximize"
    if LOWER_IS_BETTER.search(metric):
        return "minimize"
    return "maximize" if HIGHER_IS_BETTER.search(metric) else None


def text(value: Any) -> str:
    """A value as ``--set`` reads it back (YAML; JSON scalars and lists are YAML)."""
    return json.dumps(value)


def read_sweep(path: Path) -> SweepFile:
    if not path.is_file():
        raise ConfigError(f"no sweep file {path} (see config/sweeps/example.yaml)")
    try:
        return SweepFile.model_validate(read_yaml(path))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "sweep file"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key (the keys are: " + ", ".join(SweepFile.model_fields) + ")"
        raise ConfigError(f"{path}: {where}: {message}") from None


def check_sweep(path: str | Path, extra: list[str] = ()) -> Sweep:
    """Read ``path`` and check every key and value against the config schema. ``extra``:
    ``sweep.py --set`` overrides, fixed for every trial after the file's own. Raises
    ``ConfigError`` naming the key."""
    path = Path(path)
    spec = read_sweep(path)
    fixed = [*(f"{key}={text(value)}" for key, value in spec.set.items()), *extra]
    for key in [item.partition("=")[0] for item in fixed] + list(spec.params):
        if key in RESERVED:
            raise ConfigError(f"{path}: {key}: set by the sweep itself "
                              "(trial N runs in <output.dir>/sweeps/<name>/trial-N)")
    configs = [DEFAULT_CONFIG, *spec.config]
    try:
        base = load_config(configs, fixed)
    except ConfigError as exc:
        raise ConfigError(f"{path}: set/config: {str(exc).removeprefix('--set: ')}") from None
    for key, param in spec.params.items():
        if key in spec.set:
            raise ConfigError(f"{path}: params.{key}: also fixed under set; keep one")
        for value in param.edges():
            try:
                load_config(configs, [*fixed, f"{key}={text(value)}"])
            except ConfigError as exc:
                raise ConfigError(f"{path}: params.{key}: {str(exc).removeprefix('--set: ')}") from None
    for i, trial in enumerate(spec.enqueue):
        for key, value in trial.items():
            if key not in spec.params:
                raise ConfigError(f"{path}: enqueue[{i}]: {key} is not one of the params")
            if not spec.params[key].contains(value):
                raise ConfigError(f"{path}: enqueue[{i}]: {key}={value!r} is outside its range or choices")
    return Sweep(path, spec, base, fixed)


def finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
