"""The `recx` entry point: the compute threads and their wait policy (recx.threads, before torch loads), on a
terminal a spinner while torch and the registries load (seconds on a busy machine), then the command line of
recx.cli. The spinner is erased before the command shows anything."""
from __future__ import annotations

import sys


def main() -> None:
    from rich.console import Console

    from recx.errors import RecxError
    from recx.threads import prepare_environment

    try:
        prepare_environment()
    except RecxError as exc:
        Console(stderr=True).print(f"error: {exc}", highlight=False)
        sys.exit(1)

    from recx.memory import keep_freed_memory

    keep_freed_memory()
    console = Console(stderr=True)
    asks_help = any(arg in ("--help", "-h") for arg in sys.argv[1:]) or len(sys.argv) == 1
    if console.is_terminal and not asks_help:
        with console.status("starting recx (loading torch)", spinner="dots"):
            from recx.cli import main as run
    else:
        from recx.cli import main as run
    run()
