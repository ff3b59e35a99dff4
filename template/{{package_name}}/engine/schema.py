"""The run configuration's schema: the shared sections (runtime, train, eval, optim, output).

Each task adds its own ``data`` and ``model`` sections by subclassing ``Config`` in its
``config.py``. Pure pydantic: this module imports neither MindSpore nor the tasks, so the
task configs can build on it and ``engine/config.py`` can load any of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from .seams import check_name, feature, is_spec


class Section(BaseModel):
    """Base for every config section: unknown keys are errors, and values are not coerced
    (``true`` is not an epoch count, ``1`` is not a boolean); floats must be finite."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False)


class DataSection(Section):
    """Base of a task's ``data`` section: what every task's data can be asked for."""

    # Parallel workers that decode and transform streamed examples (mindspore.dataset map);
    # auto = one per CPU core, at most 8. Data held in memory ignores it.
    workers: int | Literal["auto"] = "auto"

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, value: Any) -> Any:
        if value != "auto" and (type(value) is not int or not 1 <= value <= 64):
            raise ValueError(f"must be auto or a whole number from 1 to 64, not {value!r}")
        return value


class Runtime(Section):
    device: Literal["auto", "CPU", "GPU", "Ascend"] = "auto"
    # oneDNN's instruction-set cap (env ONEDNN_MAX_CPU_ISA), set before the first op.
    # "AVX2" makes small convolutions 10-20x faster on AVX-512 CPUs but slows matmul-heavy
    # models; null leaves oneDNN's default.
    onednn_max_isa: Literal["AVX2", "AVX512_CORE", "SSE41"] | None = None
    # ms.jit's jit_level for the train step, the two MindSpore 2.7-2.10 accept on every device: O0
    # (default; O1's operator fusion measured no gain on CPU, ResNet-18 404 vs 394 ms/step) | O1.
    # (O2 ran on the GE backend, deprecated from 2.9.0; 2.10's ms.jit rejects it.)
    jit_level: Literal["O0", "O1"] = "O0"
    # true: the same results run after run on one device and setup (ms.set_deterministic; on Ascend
    # also HCCL_DETERMINISTIC, a fixed all-reduce order); slower. Off, as MindSpore's default.
    deterministic: bool = False
    # GPU/Ascend memory pool cap as "<n>GB" (ms.runtime.set_memory max_size), e.g. 58GB on a 64 GB
    # 910B to leave the communication library room (mindformers' setting); null: the whole device.
    max_device_memory: str | None = Field(None, pattern=r"^\d+(\.\d+)?GB$")
    # float32 matmuls/convolutions: "high" lets GPU use TF32 and Ascend HF32 (10-bit mantissa inputs,
    # float32 sums; as torch.set_float32_matmul_precision("high")), "highest" keeps full float32.
    # CPU: no effect.
    matmul_precision: Literal["highest", "high"] = "high"
    # When the host reads each micro-step's loss and overflow flag: "step" at once (on CPU the faster:
    # compiled steps queued unread left the threads busy-waiting, 3-20x slower), "log" only when the loop needs
    # them (log rows, saves, evaluations, epoch ends), so an accelerator runs steps ahead of the host;
    # auto: step on CPU, log on GPU/Ascend. Both train, log and count skipped steps identically.
    host_sync: Literal["auto", "step", "log"] = "auto"


class Train(Section):
    jit: bool = True  # false: run the same step in PyNative mode for debugging
    epochs: int = Field(10, gt=0)
    max_steps: int | None = Field(None, gt=0)  # optimizer steps; overrides epochs when set
    batch_size: int = Field(64, gt=0)  # per device and per micro-step
    grad_accum_steps: int = Field(1, gt=0)
    # auto: O0 on CPU (fp16 is slower there), else O2 in bfloat16 where the device computes it, float16
    # (with the loss scaler) where not; O0 also for a configuration without mixed precision.
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
    # Decay of an exponential moving average of the weights, evaluated, saved as best.ckpt and
    # exported instead of them (engine/ema.py, the recipes feature); null = off. In (0, 1), e.g. 0.999.
    ema: float | None = Field(None, gt=0, lt=1)
    callbacks: list[str] = []  # "module:Class" user callbacks, see logs/callbacks.py
    # The eval metric that picks best.ckpt (and early stopping): null = the task's; any metric the
    # task or eval.metrics reports. monitor_mode: max | min (null = the task's, for its own monitor).
    monitor: str | None = None
    monitor_mode: Literal["max", "min"] | None = None
    # Your own loss as module:Class (engine/seams.py), built with loss_kwargs; null = the task's.
    # What it receives is the task's contract (its README, "Make it yours").
    loss: str | None = None
    loss_kwargs: dict[str, Any] = {}

    @field_validator("loss")
    @classmethod
    def _loss(cls, value: str | None) -> str | None:
        return value if value is None else check_name(value, ())

    @field_validator("ema")
    @classmethod
    def _ema_feature(cls, value: float | None) -> float | None:
        if value is not None:
            feature("engine.ema", "recipes")
        return value


class Eval(Section):
    # Evaluations during training use at most this many eval examples (the task's unit: images,
    # windows, users, rows, pairs): a fixed subset drawn with the seed, the same at every
    # evaluation and after a resume, so best.ckpt is picked on the same examples. null = all.
    # eval.py evaluates all of them unless given --set eval.max_examples=N.
    max_examples: int | None = Field(None, gt=0)
    # Your own metrics, module:function each, reported beside the task's under the function's name
    # (what a function receives is the task's contract: its README, "Make it yours").
    metrics: list[str] = []

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, value: list[str]) -> list[str]:
        return [check_name(spec, ()) for spec in value]


class Optim(Section):
    # Built in: sgd | momentum | adam | adamw (and a task's own, OPTIMIZERS); or any nn.Optimizer
    # subclass as module:Class, e.g. mindspore.nn:RMSProp, built with optim.kwargs (engine/optim.py).
    name: str = "adam"
    kwargs: dict[str, Any] = {}
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    nesterov: bool = False  # momentum optimizer: Nesterov's variant
    # constant | step | cosine, or your own factor of lr as module:function, fn(step, total_steps)
    # (after warmup, as the built-ins)
    schedule: str = "constant"
    warmup_steps: int = Field(0, ge=0)
    warmup_ratio: float | None = Field(None, ge=0, lt=1)  # warmup as a share of the run's steps (not both)
    min_lr_ratio: float = Field(0.0, ge=0, le=1)  # cosine floor, as a fraction of lr
    step_size: int = Field(1000, gt=0)  # "step" schedule: decay every N optimizer steps
    gamma: float = Field(0.1, gt=0, le=1)
    # Layer-wise lr decay for fine-tuning (BEiT, timm, mindcv): layer i of L (0 = stem/embeddings,
    # L = head) learns at lr * layer_decay^(L - i), e.g. 0.65-0.75. null = off (1.0 is the same
    # rates, in per-layer groups). Archs whose model gives a layer map only; in (0, 1]. The recipes
    # feature's (engine/layer_decay.py).
    layer_decay: float | None = Field(None, gt=0, le=1)

    OPTIMIZERS: ClassVar[tuple[str, ...]] = ("sgd", "momentum", "adam", "adamw")
    SCHEDULES: ClassVar[tuple[str, ...]] = ("constant", "step", "cosine")

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

    @field_validator("layer_decay")
    @classmethod
    def _layer_decay_feature(cls, value: float | None) -> float | None:
        if value is not None:
            feature("engine.layer_decay", "recipes")
        return value

    @field_validator("warmup_ratio")
    @classmethod
    def _one_warmup(cls, value, info):
        if value is not None and info.data.get("warmup_steps"):
            raise ValueError("set optim.warmup_ratio or optim.warmup_steps, not both")
        return value


class Output(Section):
    dir: str = "runs"  # ~ is expanded
    name: str | None = None  # run folder name inside dir (a plain name, not a path); null = timestamp
    # Where logged train rows and eval metrics go (logs/loggers.py); tensorboard and mlflow
    # are the loggers feature (logs/trackers.py) with extras: pip install -e ".[tensorboard]" / ".[mlflow]".
    loggers: list[Literal["jsonl", "csv", "tensorboard", "mlflow"]] = ["jsonl"]
    plot: bool = True

    @field_validator("loggers")
    @classmethod
    def _loggers_feature(cls, value: list[str]) -> list[str]:
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
    # Set by engine.config.load_config: {"files": [...], "overrides": [...]}, in the order applied.
    _origin: dict[str, list[str]] = PrivateAttr(default_factory=dict)

    @classmethod
    def complete(cls, raw: dict[str, Any], command_line: dict[str, Any]) -> dict[str, Any]:
        """The merged YAML + ``--set`` values before validation, with what they imply filled in
        (a task's override: e.g. the model of its ``model.pretrained`` checkpoint)."""
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
