"""Allow ``python -m msscaffold``."""

from msscaffold.cli import app

app(prog_name="msscaffold")
