"""User-facing errors: the CLI prints their message and exits non-zero, with no traceback."""


class RecxError(Exception):
    """Bad input from the user (path, file line, config key, name); the message says what was expected."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what was interrupted and what was kept on disk (the CLI prints it and exits 130)."""
