"""msscaffold: generate MindSpore deep-learning projects from a Copier template.

The version lives in the committed file ``VERSION`` next to this module; the build
tags every commit where it changed as ``v<version>`` (see ``hatch_build.py``).
"""

from pathlib import Path

__version__ = (Path(__file__).with_name("VERSION")).read_text(encoding="utf-8").strip()
