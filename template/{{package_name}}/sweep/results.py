"""The end of a sweep: a table of its trials, the best trial as a whole experiment file, a plot."""

from __future__ import annotations

from pathlib import Path

import yaml

from ..engine.config import apply_override, merge, read_yaml
from ..engine.errors import UserError
from .spec import Sweep
from .study import counts


def table(study, sweep: Sweep) -> str:
    keys = list(sweep.params)
    head = ["trial", "state", sweep.metric, *keys, "note"]
    rows = []
    for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        if t.user_attrs.get("requeued") == "surplus":
            continue
        value = t.value if t.value is not None else (list(t.intermediate_values.values()) or [None])[-1]
        note = (f"requeued: {t.user_attrs['requeued']}" if not counts(t) else t.user_attrs.get("error", ""))
        if t.state.name == "PRUNED":
            note = f"pruned at step {max(t.intermediate_values, default=0)}"
        if t.user_attrs.get("requeued_from") is not None:
            note = (note + f"; again, as trial {t.user_attrs['requeued_from']}").lstrip("; ")
        rows.append([str(t.number), t.state.name, "" if value is None else f"{value:.4g}",
                     *(_fmt(t.params.get(k)) for k in keys), note])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [head, *rows])


def write_best(study, sweep: Sweep, path: Path | None = None) -> Path:
    """``path`` (default ``config/experiments/<sweep>-best.yaml``): the best trial's whole experiment
    (the sweep's config layers, its fixed values, then the trial's values) for ``train.py --config``."""
    completed = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if not completed:
        raise UserError(f"sweep {sweep.name}: no trial completed, so no best parameters (see the table above)")
    best = study.best_trial
    path = path or Path("config/experiments") / f"{sweep.name}-best.yaml"
    experiment: dict = {}
    for layer in sweep.configs[1:]:  # layered over config/config.yaml as the trials were
        merge(experiment, read_yaml(Path(layer)))
    for item in sweep.overrides(best.params):
        apply_override(experiment, item)
    layers = ", ".join(sweep.configs[1:]) or "none"
    header = (f"# The best trial of sweep {sweep.name} ({sweep.path}): trial {best.number}, "
              f"{sweep.metric} {best.value:.6g} ({sweep.direction}), of {len(completed)} completed trials.\n"
              f"# The whole experiment: the sweep's config layers ({layers}), its fixed values and the trial's.\n"
              f"#   python train.py --config {path}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(experiment, sort_keys=False), encoding="utf-8")
    return path


def plot_history(study, sweep: Sweep, path: Path) -> Path:
    """Each finished trial's value by trial number, the best so far, and where pruned trials stopped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    done = [(t.number, t.value) for t in trials if t.state.name == "COMPLETE"]
    pruned = [(t.number, list(t.intermediate_values.values())[-1]) for t in trials
              if t.state.name == "PRUNED" and t.intermediate_values]
    better = max if sweep.direction == "maximize" else min
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if done:
        ax.plot(*zip(*done), "o", label=sweep.metric)
        best = [better(v for n, v in done if n <= number) for number, _ in done]
        last = trials[-1].number  # the line runs on to the last trial, pruned or not
        ax.step([n for n, _ in done] + [last], best + best[-1:], where="post", label="best so far")
    if pruned:
        ax.plot(*zip(*pruned), "x", color="grey", label="pruned (last report)")
    ax.set(title=f"sweep {sweep.name}", xlabel="trial", ylabel=sweep.metric)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _fmt(value) -> str:
    return "" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))
