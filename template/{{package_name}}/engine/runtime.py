"""Process setup: device, oneDNN ISA cap, seeds; once, before any op. No compile cache: in 2.10 on
CPU a cached graph read a garbage step counter."""

from __future__ import annotations

import functools
import glob
import logging
import logging.handlers
import os
import random
import shutil
import sys

import numpy as np

from .errors import ConfigError
from .schema import Config

# What each accelerator's driver leaves on a host, usable or not.
_VISIBLE = {"Ascend": ("npu-smi", "/dev/davinci*"), "GPU": ("nvidia-smi", "/dev/nvidia[0-9]*")}
# Why MindSpore usually cannot use a visible one (its plugins are built for these).
_LIKELY = {"Ascend": "the CANN toolkit and driver must match this MindSpore version and be sourced (set_env.sh)",
           "GPU": "MindSpore's GPU plugin needs CUDA 11.x, cuDNN 8 and a GPU of sm_60-sm_80 (sm_90: no kernels)"}


def setup(cfg: Config, device_id: int = 0) -> str:
    """Apply ``cfg.runtime`` and seeds; return the device. ``device_id``: the local rank under a launcher."""
    if cfg.runtime.onednn_max_isa:
        os.environ.setdefault("ONEDNN_MAX_CPU_ISA", cfg.runtime.onednn_max_isa)

    import mindspore as ms
    from mindspore import log as ms_log

    ms_log._get_logger().addFilter(_unused_kernel_notice)
    device = cfg.runtime.device
    if device == "auto":
        # Only a device whose hardware is visible is asked for: asking logs MindSpore's plugin error.
        device = next((d for d in ("Ascend", "GPU") if visible(d) and usable(d) is None), "CPU")
        for name in ("Ascend", "GPU"):
            if device == "CPU" and visible(name):
                print(f"warning: runtime.device=auto: {visible(name)} is visible but MindSpore {ms.__version__} "
                      f"cannot use it ({usable(name)}); {_LIKELY[name]}. Training on CPU.", file=sys.stderr)
    elif device != "CPU" and usable(device) is not None:
        raise ConfigError(f"runtime.device={device!r} is not available here ({usable(device)}); use auto or CPU")
    if device == "CPU" and cfg.train.amp_level not in ("O0", "auto") and cfg.train.amp_dtype == "bfloat16":
        raise ConfigError("train.amp_dtype='bfloat16' is not supported on CPU; use float16 or amp_level O0")
    if cfg.runtime.deterministic:
        os.environ.setdefault("HCCL_DETERMINISTIC", "true")  # Ascend's collectives, read when they start
    if device == "CPU":
        ms.set_device(device)
    else:
        ms.set_device(device, device_id)
        if cfg.runtime.max_device_memory:  # the pool of the device (on CPU: host memory, not capped here)
            ms.runtime.set_memory(max_size=cfg.runtime.max_device_memory)
        fast = cfg.runtime.matmul_precision == "high"
        if device == "GPU":
            ms.device_context.gpu.op_precision.matmul_allow_tf32(fast)
            ms.device_context.gpu.op_precision.conv_allow_tf32(fast)
        else:
            ms.device_context.ascend.op_precision.matmul_allow_hf32(fast)
            ms.device_context.ascend.op_precision.conv_allow_hf32(fast)
    if cfg.runtime.deterministic:
        _deterministic()
    seed_everything(cfg.seed)
    return device


def reads_every_step(cfg: Config, device: str) -> bool:
    """Read each step's outputs at once (``host_sync`` auto: on CPU, measured faster) or when needed."""
    return cfg.runtime.host_sync == "step" or (cfg.runtime.host_sync == "auto" and device == "CPU")


def seed_everything(seed: int) -> None:
    import mindspore as ms

    random.seed(seed)
    np.random.seed(seed)
    ms.set_seed(seed)


def seed_model(seed: int, rank: int) -> None:
    """Dropout differs by rank (MindSpore's seed + rank); initial weights do not (NumPy's seed)."""
    import mindspore as ms

    ms.set_seed(seed + rank)  # (it seeds NumPy's generator too: set again below)
    np.random.seed(seed)


def visible(device: str) -> str | None:
    """What shows ``device``'s hardware on this host (a tool on PATH or a device file), if anything."""
    tool, files = _VISIBLE[device]
    if shutil.which(tool):
        return f"{tool} on PATH"
    found = sorted(glob.glob(files))
    return found[0] if found else None


@functools.cache
def usable(device: str) -> str | None:
    """None when MindSpore can run on ``device``, else why not (the plugin's load error)."""
    import mindspore as ms
    from mindspore import log as ms_log

    logger = ms_log._get_logger()  # the plugin error it logs becomes this function's answer, not a log line
    collected = logging.handlers.BufferingHandler(capacity=10_000)
    kept, logger.handlers = logger.handlers, [collected]
    try:
        available = getattr(ms.device_context, device.lower()).is_available()
    finally:
        logger.handlers = kept
    if available:
        return None
    # The plugin error lists every plugin that failed, one per line: keep this device's, on one line.
    lines = [record.getMessage() for record in collected.buffer]
    errors = [part.strip() for line in lines if "Error message" in line
              for part in line.split("Error message: ", 1)[-1].splitlines() if device.lower() in part.lower()]
    return "; ".join(errors)[:300] or f"its {device} plugin did not load"


def _unused_kernel_notice(record: logging.LogRecord) -> bool:
    """Drop FusedSparseAdam's deprecation line: ``nn.Adam`` builds that kernel but never runs it here."""
    return "'FusedSparseAdam' is deprecated" not in record.getMessage()


@functools.cache
def _deterministic() -> None:
    """MindSpore takes this once per process (a second call raises): on for the rest of it."""
    import mindspore as ms

    ms.set_deterministic(True)


def resolve_amp(cfg: Config, device: str, supported: bool = True) -> Config:
    """``amp_level: auto`` resolved: O0 on CPU or unsupported, else O2 in bfloat16 if it runs, or fp16."""
    if cfg.train.amp_level != "auto":
        return cfg
    level, dtype = "O0", cfg.train.amp_dtype
    if device != "CPU" and supported:
        level, dtype = "O2", "bfloat16" if _bfloat16_runs() else "float16"
    return cfg.model_copy(update={"train": cfg.train.model_copy(update={"amp_level": level, "amp_dtype": dtype})})


def _bfloat16_runs() -> bool:
    import mindspore as ms

    try:
        x = ms.Tensor(np.ones((2, 2), np.float32)).astype(ms.bfloat16)
        return bool(np.isfinite((x @ x).astype(ms.float32).asnumpy()).all())
    except (RuntimeError, TypeError, ValueError):  # no bfloat16 kernel on this device (e.g. GPU before sm_80)
        return False


def resolve_workers(workers: int | str, ranks: int | None = None) -> int:
    """``data.workers``: a count, or ``auto``: this process's share of the cores, at most 8
    (more rarely pays off for image decoding and each worker holds its own prefetched rows).
    The cores are shared by the msrun ranks, assumed on this machine (on several machines, set
    a count)."""
    if workers != "auto":
        return int(workers)
    ranks = ranks or int(os.environ.get("MS_WORKER_NUM", "1") or 1)
    return max(1, min((os.cpu_count() or 1) // ranks, 8))
