"""What the command line shows: the spinner while torch loads, metric and version tables, notes, and how a command
ends (a user error in one line and exit 1; Ctrl-C says what was kept and exits 130; an internal error in one line
with where its traceback was saved, or the traceback with --debug).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import TypeVar

import typer

from recx.core import call_arguments as arguments
from recx.core.errors import RecxError, attached_log
from recx.shell import catalog

T = TypeVar("T")
COMMAND_NAMES = {"evaluate_run": "eval"}  # a command's function name -> its name on the command line


@functools.cache
def console():
    """The standard output's rich console, made when first used (an answer that prints nothing through it, such as
    --help, does not import rich). Piped output is not wrapped at 80 columns: tables stay one row per line."""
    from rich.console import Console

    return Console() if Console().is_terminal else Console(width=10_000)


def _stderr():
    from rich.console import Console

    return Console(stderr=True)


def _error_line(label: str, message: str) -> None:
    """`label: message` on standard error, the label in bold red."""
    from rich.markup import escape

    _stderr().print(f"[bold red]{label}:[/] {escape(message)}", highlight=False, soft_wrap=True)


def say(text: str) -> None:
    """One line of plain text (never wrapped, no markup)."""
    console().print(text, soft_wrap=True, highlight=False, markup=False)


def refuse_unless(condition: bool, message: str) -> None:
    """A user error of the command line's own (options that do not go together)."""
    if not condition:
        raise RecxError(message)


def required(value: T | None, message: str) -> T:
    """`value`, which the command needs; None is the user error `message`."""
    if value is None:
        raise RecxError(message)
    return value


def version_line() -> str:
    from recx.core.versions import RECX_VERSION

    return f"recx {RECX_VERSION}"


def request_plugins(specs: list[str]) -> None:
    from recx.core import plugins

    plugins.request(*specs)


def progress(quiet: bool):
    """The progress display of a training run (none when `quiet`)."""
    from recx.core.progress import make_progress

    return make_progress(quiet)


@contextlib.contextmanager
def loading():
    """On a terminal, a spinner while torch and the registries load (seconds on a busy machine); it is erased
    before the command shows anything."""
    shown = _stderr()
    if not shown.is_terminal or "torch" in sys.modules:
        yield
        return
    with shown.status("loading torch", spinner="dots"):
        yield


def handles_interrupts(command):
    """Ctrl-C inside a command: say what was interrupted and what was kept, exit 130."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt as interrupt:
            name = COMMAND_NAMES.get(command.__name__, command.__name__)
            what = str(interrupt) or (
                f"recx {name}; nothing half-written was kept (datasets and run folders are "
                "swapped in only when complete)"
            )
            _stderr().print(f"interrupted: {what}", highlight=False, soft_wrap=True, markup=False)
            raise typer.Exit(130) from None

    return run


def print_metrics(frame, title: str) -> None:
    """The title on its own line (never wrapped), then rows metric@k (metric alone for k = 0: AUC, OPAUC) and
    columns overall and per popularity stratum, from a results frame (metric, k, stratum, value)."""
    from rich.table import Table

    from recx.eval.strata import STRATA

    values = {(r.metric, r.k, r.stratum): r.value for r in frame.itertuples()}
    say(title)
    table = Table()
    table.add_column("metric")
    for column in ("all",) + STRATA:
        table.add_column(column, justify="right")
    facts = ("heldout_share",)  # the split's share of held-out interactions per stratum (the same at every k): once
    keys = sorted({(m, k) for m, k, _ in values}, key=lambda mk: (mk[0] in facts, mk[1], mk[0]))
    keys = [key for key in keys if key[0] not in facts or key[1] == min(k for m, k in keys if m == key[0])]
    for metric, k in keys:
        cells = [f"{values[(metric, k, s)]:.4f}" if (metric, k, s) in values else "" for s in ("all",) + STRATA]
        table.add_row(f"{metric}@{k}" if k and metric not in facts else metric, *cells)
    console().print(table)


def prepared_line(name: str, folder: Path) -> str:
    """What `recx prepare` made, from the dataset's card."""
    card = json.loads((folder / "card.json").read_text())
    counts = " / ".join(
        f"{part} {card['counts'][part]:,}" for part in ("train", "valid", "test") if part in card["counts"]
    )
    return (
        f"prepared {name} in {folder}: {card['n_users']:,} users, {card['n_items']:,} items, {counts} interactions; "
        f"repeated (user, item) pairs dropped: {card['rows']['removed_duplicates']:,}"
    )


def print_divergence(table, title: str) -> None:
    """`recx diagnose sampler`'s table: the mean KL and TV over users per (model, sampler)."""
    from rich.table import Table

    summary = (
        table.groupby(["model", "sampler"], sort=False)
        .agg(kl=("kl", "mean"), tv=("tv", "mean"), exact=("exact", "all"))
        .reset_index()
    )
    shown = Table(title=title)
    for column in ("model", "sampler", "KL(Q||P)", "TV", "Q"):
        shown.add_column(column)
    for row in summary.itertuples():
        shown.add_row(row.model, row.sampler, f"{row.kl:.4f}", f"{row.tv:.4f}", "exact" if row.exact else "draws")
    console().print(shown)


def print_entries(title: str, entries: list) -> None:
    """`recx list`'s table of one kind: name, module, arguments (defaults), summary."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in ("name", "module", "arguments (defaults)", "summary"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        table.add_row(entry.name, entry.module, entry.args, entry.summary)
    console().print(table)


def print_versions(title: str | None = None) -> None:
    from rich.table import Table

    from recx.core.versions import versions

    table = Table(title=title, title_justify="left", show_header=title is not None)
    for column in ("package", "version"):
        table.add_column(column, overflow="fold")
    for name, version in versions().items():
        table.add_row(name, version)
    console().print(table)


def _internal_error(error: Exception) -> None:
    from recx.core import plugins
    from recx.core.folders import write_text_atomic

    blamed = plugins.blame(error)
    log = attached_log(error)
    if log is None:
        log = Path(tempfile.gettempdir()) / f"recx-error-{os.getpid()}.log"
        try:
            write_text_atomic(log, "".join(traceback.format_exception(error)))
        except RecxError:
            log = None
    where = f"full traceback in {log}" if log else "the traceback could not be saved"
    if blamed is not None:  # a plugin's code raised it: name the plugin and its method, not recx
        _error_line("error", f"{blamed} ({where}; rerun with --debug to show it)")
        return
    message = f"{type(error).__name__}: {error} ({where}; rerun with --debug to show it)"
    _error_line("internal error", message)


def _remember_plugins() -> None:
    """At exit, after a command that loaded the registries and plugins: cache the plugins' names for --help."""
    from recx.core import plugins

    if "torch" in sys.modules and plugins.loaded():
        catalog.remember_plugins()


def command_help(app: typer.Typer, words: list[str]) -> bool:
    """`recx COMMAND [SUBCOMMAND] --help` and nothing else: print that command's help (the same text, from the same
    click command and its own --help option) and return True; False for any other command line, left to Typer.

    Typer's path to it parses the options of the commands above (recx's own: --threads, --plugin, ...) though none
    is given, and Typer builds a pydantic validator for each option it parses: importing pydantic for them was a
    third of `recx train --help` (docs/performance.md)."""
    if len(words) < 2 or words[-1] != "--help" or any(word.startswith("-") for word in words[:-1]):
        return False
    command = typer.main.get_command(app)
    context = typer.Context(command, info_name="recx")
    names = words[:-1]
    for depth, word in enumerate(names):
        found = command.get_command(context, word) if isinstance(command, typer.core.TyperGroup) else None
        if found is None:
            return False  # a mistyped command: Typer's own message
        if depth < len(names) - 1:
            command, context = found, typer.Context(found, info_name=word, parent=context)
            continue
        try:
            found.make_context(word, ["--help"], parent=context)  # click's --help prints the help and exits
        except typer.Exit:
            return True
    return False


def run(app: typer.Typer, complete_var: str) -> None:
    """Run the command line's app as `recx`, ending as the module docstring says."""
    from recx.core.user_folders import matplotlib_config

    matplotlib_config()
    atexit.register(_remember_plugins)
    debug = "--debug" in sys.argv[1:] or os.environ.get("RECX_DEBUG") == "1"
    sys.argv = [sys.argv[0]] + [arg for arg in sys.argv[1:] if arg != "--debug"]
    try:
        if complete_var not in os.environ and command_help(app, sys.argv[1:]):
            return
        with arguments.from_command_line():
            app(prog_name="recx", complete_var=complete_var)
    except RecxError as error:
        _error_line("error", str(error))
        sys.exit(1)
    except KeyboardInterrupt:
        _stderr().print("interrupted")
        sys.exit(130)
    except Exception as error:
        if debug:
            raise
        _internal_error(error)
        sys.exit(1)
