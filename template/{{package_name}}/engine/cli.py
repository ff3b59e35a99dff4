"""Command-line entry points shared by every task: argument parsing and the error boundary.

User errors (config, data, checkpoint) print one line and exit with status 2; bugs keep
their traceback. MindSpore is imported only after the config has been validated.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import NoReturn

from .errors import Interrupted, UserError

DEFAULT_CONFIG = "config/config.yaml"


def parser(description: str, checkpoint: bool = False) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    if checkpoint:
        p.add_argument("--checkpoint", required=True, help="a .ckpt written by train.py (its config is reused)")
    else:
        p.add_argument("--config", default=DEFAULT_CONFIG, help="YAML config (default: %(default)s)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set train.epochs=3 (repeatable)")
    return p


def guarded(main: Callable[[], object]) -> NoReturn:
    """Run ``main`` and exit: 0 on success, 2 with a one-line message on a user error."""
    try:
        main()
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Interrupted as exc:  # the trainer saved last.ckpt and said how to resume
        sys.exit(exc.code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(0)


def train_main() -> NoReturn:
    p = parser("Train the model described by the config.")
    p.add_argument("--resume", metavar="auto|PATH", help="continue from a checkpoint ('auto': the newest last.ckpt)")
    args = p.parse_args()

    def main():
        from .config import load_config
        from .resume import find_resume, resume_config

        cfg = load_config(args.config, args.overrides)
        resume = find_resume(cfg.output.dir, args.resume)
        if resume is not None:  # the run goes on with its own saved config (see engine/resume.py)
            from . import checkpoint

            cfg = resume_config(checkpoint.read(resume)[1]["config"], args.overrides, str(resume))
        from .trainer import train

        summary = train(cfg, resume=resume and str(resume))
        print(json.dumps(summary, indent=2))

    guarded(main)


def eval_main() -> NoReturn:
    args = parser("Evaluate a checkpoint on the eval split.", checkpoint=True).parse_args()

    def main():
        from .inference import evaluate_checkpoint

        print(json.dumps(evaluate_checkpoint(args.checkpoint, args.overrides), indent=2))

    guarded(main)


def export_main() -> NoReturn:
    p = parser("Export a checkpoint to MINDIR and check the exported graph against the network.",
               checkpoint=True)
    p.add_argument("--out", default="export", help="output folder (default: %(default)s)")
    args = p.parse_args()

    def main():
        from .export import export_checkpoint

        for name, path in export_checkpoint(args.checkpoint, args.out, args.overrides).items():
            print(f"{name}: {path}")

    guarded(main)
