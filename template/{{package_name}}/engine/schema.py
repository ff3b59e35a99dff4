"""The run configuration's shared sections (runtime, train, eval, optim, output); each task's
``config.py`` adds ``data`` and ``model``. Pure pydantic: no MindSpore, no tasks imported."""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from .seams import check_name, feature, is_spec


class Section(BaseModel):
    """Unknown keys are errors; values are not coerced (``true`` is not an epoch count); floats are finite."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False)
    # key -> (module, feature): a value other than the key's default needs that optional feature's module
    FEATURES: ClassVar[dict[str, tuple[str, str]]] = {}

    @field_validator("*")
    @classmethod
    def _feature(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name in cls.FEATURES and value != cls.model_fields[info.field_name].default:
            feature(*cls.FEATURES[info.field_name])
        return value


class DataSection(Section):
    """Base of a task's ``data`` section."""

    workers: int | Literal["auto"] = "auto"  # decoding streamed examples; auto: one per core, at most 8

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, value: Any) -> Any:
        if value != "auto" and (type(value) is not int or not 1 <= value <= 64):
            raise ValueError(f"must be auto or a whole number from 1 to 64, not {value!r}")
        return value


class Runtime(Section):
    device: Literal["auto", "CPU", "GPU", "Ascend"] = "auto"
    # ONEDNN_MAX_CPU_ISA: AVX2 makes small convolutions 10-20x faster on AVX-512 CPUs, matmuls slower.
    onednn_max_isa: Literal["AVX2", "AVX512_CORE", "SSE41"] | None = None
    jit_level: Literal["O0", "O1"] = "O0"  # the train step's (O1 measured no gain on CPU; 2.10 rejects O2)
    deterministic: bool = False  # true: the same results run after run on one setup; slower
    # GPU/Ascend memory pool cap, "<n>GB" (e.g. 58GB on a 64 GB 910B leaves HCCL room); null: all.
    max_device_memory: str | None = Field(None, pattern=r"^\d+(\.\d+)?GB$")
    matmul_precision: Literal["highest", "high"] = "high"  # high: fp32 matmuls in TF32 (GPU) / HF32 (Ascend)
    # When the host reads step outputs: step (CPU: 3-20x faster), log (accelerators run ahead), auto.
    host_sync: Literal["auto", "step", "log"] = "auto"


class Train(Section):
    jit: bool = True  # false: run the same step in PyNative mode for debugging
    epochs: int = Field(10, gt=0)
    max_steps: int | None = Field(None, gt=0)  # optimizer steps; overrides epochs when set
    batch_size: int = Field(64, gt=0)  # per device and per micro-step
    grad_accum_steps: int = Field(1, gt=0)
    # auto: O0 on CPU, else O2 in bfloat16 where the device computes it, float16 (loss scaler) where not.
    amp_level: Literal["auto", "O0", "O1", "O2", "O3"] = "auto"
    amp_dtype: Literal["float16", "bfloat16"] = "float16"
    loss_scale: float = Field(2.0**16, gt=0)  # initial dynamic loss scale (amp only)
    loss_scale_window: int = Field(1000, gt=0)  # finite steps before the scale grows
    grad_clip: float | None = Field(None, gt=0)  # max global gradient norm
    eval_every: int | None = Field(None, gt=0)  # optimizer steps; null = once per epoch
    log_every: int = Field(10, gt=0)
    early_stop_patience: int | None = Field(None, gt=0)  # evaluations without improvement
    save_every: int | None = Field(None, gt=0)  # optimizer steps between last.ckpt saves; null = at evaluations
    keep_last: int = Field(0, ge=0)  # also keep the N newest step-<N>.ckpt files of save_every
    on_nonfinite: Literal["stop", "skip"] = "stop"  # fp32 NaN/inf: stop naming the step, or skip the update
    ema: float | None = Field(None, gt=0, lt=1)  # average of the weights (engine/ema.py: recipes); null = off
    callbacks: list[str] = []  # "module:Class" user callbacks, see logs/callbacks.py
    monitor: str | None = None  # the eval metric that picks best.ckpt and early-stops; null: the task's
    monitor_mode: Literal["max", "min"] | None = None
    loss: str | None = None  # your own as module:Class, built with loss_kwargs ("Make it yours")
    loss_kwargs: dict[str, Any] = {}

    FEATURES: ClassVar = {"ema": ("engine.ema", "recipes")}

    @field_validator("loss")
    @classmethod
    def _loss(cls, value: str | None) -> str | None:
        return value if value is None else check_name(value, ())


class Eval(Section):
    # Evaluations during training score at most this many examples, a fixed seeded subset (eval.py: all).
    max_examples: int | None = Field(None, gt=0)
    metrics: list[str] = []  # your own, module:function each, reported under its name ("Make it yours")

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, value: list[str]) -> list[str]:
        return [check_name(spec, ()) for spec in value]


class Optim(Section):
    name: str = "adam"  # OPTIMIZERS, a task's own, or an nn.Optimizer subclass as module:Class with kwargs
    kwargs: dict[str, Any] = {}
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    nesterov: bool = False  # momentum optimizer: Nesterov's variant
    schedule: str = "constant"  # SCHEDULES, or a module:function fn(step, total_steps) -> factor of lr
    warmup_steps: int = Field(0, ge=0)
    warmup_ratio: float | None = Field(None, ge=0, lt=1)  # warmup as a share of the run's steps (not both)
    min_lr_ratio: float = Field(0.0, ge=0, le=1)  # cosine floor, as a fraction of lr
    step_size: int = Field(1000, gt=0)  # "step" schedule: decay every N optimizer steps
    gamma: float = Field(0.1, gt=0, le=1)
    # layer i of L learns at lr * layer_decay^(L - i) (engine/layer_decay.py: recipes); null = off
    layer_decay: float | None = Field(None, gt=0, le=1)

    OPTIMIZERS: ClassVar[tuple[str, ...]] = ("sgd", "momentum", "adam", "adamw")
    SCHEDULES: ClassVar[tuple[str, ...]] = ("constant", "step", "cosine")
    FEATURES: ClassVar = {"layer_decay": ("engine.layer_decay", "recipes")}

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, cls.OPTIMIZERS)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        return check_name(value, cls.SCHEDULES)

    @model_validator(mode="after")
    def _kwargs_for_your_own(self):
        if self.kwargs and not is_spec(self.name):
            raise ValueError(f"optim.kwargs is for your own optimizer (optim.name: module:Class); {self.name} "
                             "takes optim.lr, weight_decay, momentum, nesterov")
        return self

    @field_validator("warmup_ratio")
    @classmethod
    def _one_warmup(cls, value, info):
        if value is not None and info.data.get("warmup_steps"):
            raise ValueError("set optim.warmup_ratio or optim.warmup_steps, not both")
        return value


class Output(Section):
    dir: str = "runs"  # ~ is expanded
    name: str | None = None  # run folder name inside dir (a plain name, not a path); null = timestamp
    # csv: the reports feature; tensorboard and mlflow: the loggers feature, each with its extra
    loggers: list[Literal["jsonl", "csv", "tensorboard", "mlflow"]] = ["jsonl"]
    plot: bool = False  # curves.png at the end of the run (logs/reports.py, the reports feature)

    FEATURES: ClassVar = {"plot": ("logs.reports", "reports")}

    @field_validator("loggers")
    @classmethod
    def _loggers_feature(cls, value: list[str]) -> list[str]:
        if "csv" in value:
            feature("logs.reports", "reports")
        if {"tensorboard", "mlflow"} & set(value):
            feature("logs.trackers", "loggers")
        return value

    @field_validator("dir")
    @classmethod
    def _expand_home(cls, value: str) -> str:
        return os.path.expanduser(value)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value):
            raise ValueError("must be a plain folder name (letters, digits, '.', '_', '-'), not a path")
        return value


class Config(Section):
    task: str
    seed: int = Field(42, ge=0, lt=2**31)  # the same seed on every rank: identical init, data order differs by shard
    runtime: Runtime = Runtime()
    train: Train = Train()
    eval: Eval = Eval()
    optim: Optim = Optim()
    output: Output = Output()
    data: Section
    model: Section
    _origin: dict[str, list[str]] = PrivateAttr(default_factory=dict)  # set by engine.config.load_config

    @classmethod
    def complete(cls, raw: dict[str, Any], command_line: dict[str, Any]) -> dict[str, Any]:
        """The merged values before validation, with what they imply filled in (a task's override)."""
        return raw

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @property
    def origin(self) -> dict[str, list[str]]:
        """The YAML files and ``--set`` overrides this config was built from (empty if built in code)."""
        return self._origin

    def digest(self) -> str:
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]
