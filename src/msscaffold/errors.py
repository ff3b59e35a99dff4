"""The one exception type the CLI turns into a one-line message."""


class MsscaffoldError(Exception):
    """A user-facing failure: the message says what was wrong and what to do."""
