"""``manifest.json`` in each run folder (the reports feature): enough to know later exactly what produced it."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np

from ..engine.checkpoint import template_version
from ..engine.schema import Config
from ..logs.callbacks import Callback


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def write(run_dir: Path, cfg: Config, device: str, world_size: int, resumed_from: Path | None = None,
          step: int = 0) -> dict[str, Any]:
    """Describe the run; a resume appends itself to ``resumes`` (the run's history stays)."""
    path = run_dir / "manifest.json"
    earlier = json.loads(path.read_text(encoding="utf-8")) if resumed_from and path.is_file() else {}
    manifest = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "mindspore": ms.__version__,
        "numpy": np.__version__,
        "device": device,
        "world_size": world_size,
        "seed": cfg.seed,
        "config_hash": cfg.digest(),
        "config_files": cfg.origin.get("files", []),  # base config first, then each --config layer
        "overrides": cfg.origin.get("overrides", []),  # --set, applied last
        "git_commit": git_commit(),
        "template_commit": template_version(),
        "config": cfg.to_dict(),
        "resumes": earlier.get("resumes", []),
    }
    if resumed_from:
        manifest["resumes"].append({"from": str(resumed_from), "step": step, "config_hash": cfg.digest(),
                                    "at": datetime.now().isoformat(timespec="seconds")})
    path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest


class Manifest(Callback):
    """``manifest.json`` at the start; at the first evaluation, ``eval_examples``."""

    def on_train_begin(self, progress):
        self.recorded = False
        if progress.is_main:
            write(progress.run_dir, progress.cfg, progress.device, progress.world_size,
                  resumed_from=progress.resumed_from, step=progress.step)

    def on_eval_end(self, progress, metrics):
        if self.recorded or "examples" not in metrics:
            return
        self.recorded = True
        if progress.is_main:  # known only once training runs
            path = progress.run_dir / "manifest.json"
            manifest = json.loads(path.read_text(encoding="utf-8"))
            path.write_text(json.dumps({**manifest, "eval_examples": int(metrics["examples"])}, indent=2),
                            encoding="utf-8")
