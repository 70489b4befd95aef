"""User-facing errors: the CLI prints their message and exits non-zero, with no traceback."""

from __future__ import annotations

from pathlib import Path


class RecxError(Exception):
    """Bad input from the user (path, file line, config key, name); the message says what was expected."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what was interrupted and what was kept on disk (the CLI prints it and exits 130)."""


LOG_ATTRIBUTE = "recx_log"


def attach_log(error: BaseException, log: Path | None) -> None:
    """Record on an unexpected error where its traceback was saved (the run folder's error.log), for the CLI."""
    setattr(error, LOG_ATTRIBUTE, log)


def attached_log(error: BaseException) -> Path | None:
    """The traceback file `attach_log` recorded on `error`, if any."""
    return getattr(error, LOG_ATTRIBUTE, None)
