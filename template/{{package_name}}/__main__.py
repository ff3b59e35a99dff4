"""``python -m <package> doctor``: check Python, MindSpore and this machine (see doctor.py)."""

import sys
from pathlib import Path

from .doctor import main

if __name__ == "__main__":
    if sys.argv[1:2] != ["doctor"]:
        print(f"usage: python -m {__package__} doctor [--project DIR]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[2:], project=Path(__file__).resolve().parents[1]))
