"""The `recx` entry point: keep freed memory in the process (recx.memory), then the command line of recx.cli.

recx.cli is cheap to import: `--help`, `--version` and shell completion answer without torch; a command that needs
torch loads it behind a spinner on a terminal (recx.cli._loading)."""
from __future__ import annotations


def main() -> None:
    from recx.memory import keep_freed_memory

    keep_freed_memory()
    from recx.cli import main as run

    run()
