"""The `recx` entry point: the compute threads (recx.core.threads, before torch loads), the plugins asked for with
`--plugin` (recx.core.plugins; both options are accepted anywhere on the command line), keep freed memory in the
process (recx.core.memory), then the command line of recx.cli.

recx.cli is cheap to import: `--help` and shell completion answer without torch; a command that needs torch loads it
behind a spinner on a terminal (recx.shell.terminal.loading). `recx --version` alone answers before the command line is even
built (no Typer, no rich)."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from recx.core.versions import RECX_VERSION

        print(f"recx {RECX_VERSION}")
        return
    from recx.core import plugins
    from recx.core.errors import RecxError
    from recx.core.threads import pop_threads_option, prepare_environment

    try:
        arguments, requested = plugins.pop_plugin_options(pop_threads_option(sys.argv[1:]))
        sys.argv[1:] = arguments
        plugins.request(*requested)
        prepare_environment()
    except RecxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    from recx.core.memory import keep_freed_memory

    keep_freed_memory()
    from recx.cli import main as run

    run()


if __name__ == "__main__":
    main()
