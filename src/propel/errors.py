"""User-facing errors: one readable line that names the problem and the fix."""


class PropelError(Exception):
    """An error caused by the user's input or environment, shown without a stack trace by the CLI."""


class ModelNotFoundError(PropelError, FileNotFoundError):
    """A model id, path or alias that cannot be resolved offline."""


class ConfigError(PropelError, ValueError):
    """A config value that is missing, of the wrong type or out of range."""


class ConfigErrors(ConfigError):
    """Several config problems found in one pass, reported together: one line each, every line naming its key and
    the fix (a file's second typo shows at once, not after the first is fixed)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)
        """One line per problem."""
