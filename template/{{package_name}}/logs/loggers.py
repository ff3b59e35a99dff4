"""Metric loggers, chosen by ``output.loggers`` (rank 0 writes): ``jsonl`` (non-finite numbers as
``null``; a row a full disk cuts is taken back whole), the ``reports`` feature's ``csv`` (``reports.py``)
and the ``loggers`` feature's ``tensorboard`` and ``mlflow`` (``trackers.py``), imported when chosen."""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

from .callbacks import Callback, Logger

log = logging.getLogger(__name__)

def require(names: list[str]) -> None:
    """Refuse, naming the extra to install, a chosen logger whose package is missing (before any heavy work)."""
    if set(names) - {"jsonl", "csv"}:  # tensorboard, mlflow: the loggers feature's
        from .trackers import require

        require(names)


def build_loggers(names: list[str], run_dir: Path) -> list[Callback]:
    kinds: dict[str, type[Logger]] = {"jsonl": JsonlLogger}
    if "csv" in names:  # the reports feature's
        from .reports import CsvLogger

        kinds["csv"] = CsvLogger
    if set(names) - {"jsonl", "csv"}:  # the loggers feature's
        from .trackers import TRACKERS

        kinds |= TRACKERS
    return [kinds[name](run_dir) for name in dict.fromkeys(names)]


class JsonlLogger(Logger):
    failing = False  # the last write failed (said once until one succeeds again)

    def write(self, kind, row):
        finite = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}
        line = (json.dumps({"kind": kind, **finite}) + "\n").encode("utf-8")
        path = self.run_dir / "metrics.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            end = os.lseek(fd, 0, os.SEEK_END)
            try:
                rest = memoryview(line)
                while rest:
                    rest = rest[os.write(fd, rest):]
                self.failing = False
            except OSError as exc:  # a full disk, a quota: no half line is left behind
                os.ftruncate(fd, end)
                if not self.failing:
                    log.warning(f"warning: could not write {path} ({exc.strerror}): its rows are missing "
                                f"from step {row.get('step')} until there is space; training goes on")
                self.failing = True
        finally:
            os.close(fd)
