"""Process setup: device, oneDNN ISA cap, seeds. Call once, before any op.

MindSpore's compile cache (MS_COMPILER_CACHE_ENABLE) is deliberately not used: in 2.10 on
CPU a cached graph read a garbage optimizer step counter on the second run.
"""

from __future__ import annotations

import os
import random

import numpy as np

from .errors import ConfigError
from .schema import Config

_PREFERENCE = ("Ascend", "GPU", "CPU")


def setup(cfg: Config, device_id: int = 0) -> str:
    """Apply ``cfg.runtime`` and seeds; return the device in use. ``device_id``: this process's
    accelerator (its local rank under a launcher)."""
    if cfg.runtime.onednn_max_isa:
        os.environ.setdefault("ONEDNN_MAX_CPU_ISA", cfg.runtime.onednn_max_isa)

    import mindspore as ms
    from mindspore import hal

    device = cfg.runtime.device
    if device == "auto":
        device = next(d for d in _PREFERENCE if d == "CPU" or hal.is_available(d))
    elif device != "CPU" and not hal.is_available(device):
        raise ConfigError(f"runtime.device={device!r} is not available here; use auto or CPU")
    if device == "CPU" and cfg.train.amp_level != "O0" and cfg.train.amp_dtype == "bfloat16":
        raise ConfigError("train.amp_dtype='bfloat16' is not supported on CPU; use float16 or amp_level O0")
    if device == "CPU":
        ms.set_device(device)
    else:
        ms.set_device(device, device_id)
    seed_everything(cfg.seed)
    return device


def seed_everything(seed: int, mindspore_only: bool = False) -> None:
    """Python's, NumPy's and MindSpore's generators (only MindSpore's: initial weights and the
    seeds of dropout kernels, fixed when a network is built)."""
    import mindspore as ms

    if not mindspore_only:
        random.seed(seed)
        np.random.seed(seed)
    ms.set_seed(seed)
