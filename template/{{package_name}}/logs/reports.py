"""The ``reports`` feature: ``curves.png`` (``output.plot``) and the ``csv`` logger's tables in the run folder."""

from __future__ import annotations

import csv
from pathlib import Path

from .callbacks import Callback, Logger


class CurvePlot(Callback):
    """``curves.png``: train loss and every eval metric against optimizer steps."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir

    def on_train_end(self, progress, summary):
        if not progress.is_main or not progress.history:
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        train = [row for row in progress.history if row["kind"] == "train"]
        evals = [row for row in progress.history if row["kind"] == "eval"]
        names = [k for k in (evals[0] if evals else {}) if k not in ("kind", "step", "epoch", "examples")]
        fig, axes = plt.subplots(1, 1 + len(names), figsize=(4 * (1 + len(names)), 3), squeeze=False)
        axes[0, 0].plot([r["step"] for r in train], [r["loss"] for r in train])
        axes[0, 0].set(title="train loss", xlabel="step")
        for ax, name in zip(axes[0, 1:], names):
            ax.plot([r["step"] for r in evals], [r[name] for r in evals], marker="o")
            ax.set(title=f"eval {name}", xlabel="step")
        fig.tight_layout()
        fig.savefig(self.run_dir / "curves.png", dpi=100)
        plt.close(fig)


class CsvLogger(Logger):
    """``metrics_train.csv`` and ``metrics_eval.csv``. A run resumed in its own folder first drops their rows
    past its checkpoint (work lost with the interruption), as ``metrics.jsonl``'s are."""

    def on_train_begin(self, progress):
        if not (progress.is_main and progress.resumed_from):
            return
        for table in self.run_dir.glob("metrics_*.csv"):
            with open(table, newline="", encoding="utf-8") as f:
                rows = list(csv.DictReader(f))
            if rows:
                with open(table, "w", newline="", encoding="utf-8") as f:
                    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
                    writer.writeheader()
                    writer.writerows(row for row in rows if int(row["step"]) <= progress.step)

    def write(self, kind, row):
        path = self.run_dir / f"metrics_{kind}.csv"
        new = not path.exists()
        with open(path, "a", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)
