"""``curves.png`` in the run folder (``output.plot``, the plots feature): the run's curves, drawn at its end."""

from __future__ import annotations

from pathlib import Path

from .callbacks import Callback


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
