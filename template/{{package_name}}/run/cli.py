"""Command-line entry points: argument parsing and the error boundary (a user error is one line and
exit 1, a bug keeps its traceback). MindSpore is imported only after the config is valid."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ..engine.config import DEFAULT_CONFIG
from ..engine.errors import Interrupted, UserError

# How a launcher announces itself (engine/distributed.py): then each rank finds its run folder later.
LAUNCHERS = ("MS_ROLE", "OMPI_COMM_WORLD_SIZE", "RANK_TABLE_FILE")


def parser(description: str, checkpoint: bool = False) -> argparse.ArgumentParser:
    """``--set`` for every script; ``--checkpoint`` for those that use a trained model, else ``--config``."""
    p = argparse.ArgumentParser(description=description)
    if checkpoint:
        p.add_argument("--checkpoint", help="a .ckpt written by train.py (its config is reused); "
                                            "default: the newest best.ckpt under output.dir")
    else:
        p.add_argument("--config", dest="configs", action="append", default=[], metavar="YAML",
                       help=f"an experiment layered over {DEFAULT_CONFIG}, e.g. config/experiments/quick.yaml "
                            "(repeatable: later files win, --set wins over all)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set train.epochs=3 (repeatable)")
    return p


def checkpoint_path(args: argparse.Namespace) -> str:
    """``--checkpoint``, or else the newest ``best.ckpt`` under ``output.dir`` (named on stderr)."""
    if args.checkpoint:
        return args.checkpoint
    from ..tasks import load_config

    runs = Path(load_config(DEFAULT_CONFIG, args.overrides).output.dir)
    found = sorted(runs.glob("*/best.ckpt"), key=lambda path: path.stat().st_mtime)
    if not found:
        raise UserError(f"no --checkpoint given and no run under {runs}/ has a best.ckpt: "
                        "train first (python train.py)")
    print(f"checkpoint: {found[-1]} (the newest best.ckpt under {runs}/)", file=sys.stderr)
    return str(found[-1])


def guarded(main: Callable[[], object]) -> NoReturn:
    """Run ``main`` and exit: 0, or 1 with one line on a user or file system error (usage errors: 2)."""
    try:
        main()
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except OSError as exc:  # the machine's, not the code's: a read-only or full folder, a missing file
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        sys.exit(1)
    except Interrupted as exc:  # the loop saved last.ckpt and said how to resume
        sys.exit(exc.code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(0)


def train_main() -> NoReturn:
    p = parser("Train the model described by the config.")
    p.add_argument("--resume", metavar="auto|PATH",
                   help="continue from a checkpoint ('auto': the newest run started, if unfinished)")
    args = p.parse_args()

    def main():
        from ..engine.resume import find_resume, reserve_run_dir, unreserve_run_dir
        from ..tasks import load_config

        cfg = load_config([DEFAULT_CONFIG, *args.configs], args.overrides)
        resume = find_resume(cfg.output.dir, args.resume)  # a --resume that is not a checkpoint: said at once
        existed = Path(cfg.output.dir).exists()
        reserved = resume is None and not any(var in os.environ for var in LAUNCHERS)
        if reserved:
            cfg = reserve_run_dir(cfg)  # the new run's folder exists from now: --resume auto sees it
        from .train import train  # imports MindSpore: after the config and --resume are known to be valid

        try:
            summary = train(cfg, resume=str(resume) if resume else None)
        except (UserError, OSError):
            if reserved:  # a run refused before it trained leaves no folder behind
                unreserve_run_dir(cfg, output_dir_too=not existed)
            raise
        print(json.dumps(summary, indent=2))

    guarded(main)


def eval_main() -> NoReturn:
    args = parser("Evaluate a checkpoint on the eval split.", checkpoint=True).parse_args()

    def main():
        checkpoint = checkpoint_path(args)
        from ..deploy.inference import evaluate_checkpoint  # imports MindSpore: once there is a checkpoint

        print(json.dumps(evaluate_checkpoint(checkpoint, args.overrides), indent=2))

    guarded(main)


def export_main(folder_formats: dict[str, str] | None = None) -> NoReturn:
    """``folder_formats``: the task's formats that are a folder of their own (nlp: hf, peft) -> what they are."""
    p = parser("Export a checkpoint to MINDIR and/or ONNX; each exported graph is checked against the network.",
               checkpoint=True)
    p.add_argument("--out", default="export", help="output folder (default: %(default)s)")
    folders = "".join(f" | {name} ({what})" for name, what in (folder_formats or {}).items())
    p.add_argument("--format", default="mindir", help=f"mindir | onnx | mindir,onnx{folders} (default: %(default)s)")
    p.add_argument("--batch", type=int, default=None,
                   help="a fixed batch size for the ONNX graph (default: any, where the network allows it)")
    if folder_formats:
        p.add_argument("--dtype", default="fp32",
                       help=f"{', '.join(folder_formats)}: the weights' fp32 | fp16 | bf16 (default: %(default)s)")
    args = p.parse_args()

    def main():
        checkpoint = checkpoint_path(args)
        from ..deploy.export import export_checkpoint  # imports MindSpore: once there is a checkpoint

        formats = tuple(f.strip() for f in args.format.split(",") if f.strip())
        written = export_checkpoint(checkpoint, args.out, args.overrides, formats, args.batch,
                                    getattr(args, "dtype", "fp32"))
        for name, path in written.items():  # a graph file has its spec beside it
            spec = f" (+ {path.with_suffix('.json').name})" if path.suffix in (".mindir", ".onnx") else ""
            print(f"{name}: {path}{spec}")

    guarded(main)
