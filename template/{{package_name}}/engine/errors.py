"""Errors meant for people: entry scripts print them as one line and exit non-zero."""


class UserError(Exception):
    """Something the user can fix (config, data, checkpoint, command line)."""


class ConfigError(UserError):
    pass


class DataError(UserError):
    pass


class CheckpointError(UserError):
    pass
