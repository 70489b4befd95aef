"""The `recx` entry point: the compute threads (recx.threads, before torch loads), keep
freed memory in the process (recx.memory), then the command line of recx.cli.

recx.cli is cheap to import: `--help` and shell completion answer without torch; a command that needs torch loads
it behind a spinner on a terminal (recx.cli._loading). `recx --version` alone answers before the command line is
even built (no Typer, no rich)."""
from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from recx import __version__

        print(f"recx {__version__}")
        return
    from recx.errors import RecxError
    from recx.threads import prepare_environment

    try:
        prepare_environment()
    except RecxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    from recx.memory import keep_freed_memory

    keep_freed_memory()
    from recx.cli import main as run

    run()
