"""User-facing errors: one readable line that names the problem and the fix."""


class PropelError(Exception):
    """An error caused by the user's input or environment, shown without a stack trace by the CLI."""


class ModelNotFoundError(PropelError, FileNotFoundError):
    """A model id, path or alias that cannot be resolved offline."""


class ConfigError(PropelError, ValueError):
    """A config value that is missing, of the wrong type or out of range."""
