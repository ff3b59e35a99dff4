"""Errors meant for people: entry scripts print them as one line and exit non-zero."""


class UserError(Exception):
    """Something the user can fix (config, data, checkpoint, command line)."""


class ConfigError(UserError):
    pass


class DataError(UserError):
    pass


class CheckpointError(UserError):
    pass


class TrainingError(UserError):
    """Training went wrong in a way the user must act on (a NaN loss, every step overflowing)."""


class Interrupted(Exception):
    """SIGINT/SIGTERM stopped training after a checkpoint was written; ``code`` is the exit status."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.code = 128 + signum
