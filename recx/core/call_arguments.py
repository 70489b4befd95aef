"""The arguments of recx's front door (recx.api) and of its command line, checked by one implementation.

Every public function of recx.api checks its arguments with these functions before any work, and the command line
hands its options to those functions (parsing only what a shell gives as text, with these same functions), so a bad
value gets the same one-line RecxError from both (`recx.train(42)`, `recx.evaluate(run, 'test', '10')`,
`batch_size='big'` or `ks=[0]` are refused before any work, never a TypeError deep inside). The error names the
argument as the caller wrote it: the parameter from Python (`batch_size 'big': expected an integer >= 1`), the
option on the command line (`--batch-size 0: ...`), which `from_command_line` selects for the duration of a command.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from recx.core.errors import RecxError

_COMMAND_LINE: contextvars.ContextVar[bool] = contextvars.ContextVar("recx_command_line", default=False)
DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


@contextlib.contextmanager
def from_command_line() -> Iterator[None]:
    """Within: errors name the command line's options (`--batch-size`) instead of Python's parameters."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)


def label(name: str, option: str | None = None) -> str:
    """The argument as the caller wrote it: `option` (default `--name-with-dashes`) on the command line, else `name`."""
    if _COMMAND_LINE.get():
        return option or "--" + name.replace("_", "-")
    return name


def _shown(value: Any) -> str:
    """A number as written, anything else as its repr (the type shows: '10' is text, 10 a number)."""
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)


def refuse(name: str, value: Any, expected: str, option: str | None = None) -> RecxError:
    return RecxError(f"{label(name, option)} {_shown(value)}: {expected}")


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def path(value: Any, name: str, option: str | None = None) -> Path:
    """A file or folder path: a non-empty str or an os.PathLike."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise refuse(name, value, "expected a path (a str or pathlib.Path)", option)
    return Path(value)


def optional_path(value: Any, name: str, option: str | None = None) -> Path | None:
    return None if value is None else path(value, name, option)


def text(value: Any, name: str, option: str | None = None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise refuse(name, value, "expected a non-empty str", option)
    return value


def optional_text(value: Any, name: str, option: str | None = None) -> str | None:
    return None if value is None else text(value, name, option)


def choice(value: Any, name: str, choices: Sequence[str], option: str | None = None) -> str:
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(choices[:-1]) + f" or {choices[-1]}" if len(choices) > 1 else choices[0]
        raise refuse(name, value, f"expected {listed}", option)
    return value


def split(value: Any, name: str = "split", option: str | None = None) -> str:
    return choice(value, name, ("valid", "test"), option)


def device(value: Any, name: str = "device", option: str | None = None) -> str:
    if not isinstance(value, str) or not DEVICE.fullmatch(value):
        raise refuse(name, value, "expected auto, cpu, cuda or cuda:N", option)
    return value


def flag(value: Any, name: str, option: str | None = None) -> bool:
    if not isinstance(value, bool):
        raise refuse(name, value, "expected True or False", option)
    return value


def integer(value: Any, name: str, option: str | None = None, *, minimum: int | None = None, note: str = "") -> int:
    """An int (not a bool) of at least `minimum`; `note` follows the expectation (e.g. "(0: never)")."""
    if not _is_integer(value) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise refuse(name, value, f"expected an integer{bound}{f' {note}' if note else ''}", option)
    return value


def optional_integer(value: Any, name: str, option: str | None = None, **bounds: Any) -> int | None:
    return None if value is None else integer(value, name, option, **bounds)


def fraction(value: Any, name: str, option: str | None = None, *, closed: bool = True) -> float:
    """A number in (0, 1] (`closed`), else in (0, 1)."""
    inside = _is_number(value) and 0 < value <= 1 and (closed or value < 1)
    if not inside:
        raise refuse(name, value, f"expected a fraction in (0, 1{']' if closed else ')'}", option)
    return float(value)


def _parts(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def cutoffs(value: Any, name: str = "ks", option: str | None = None) -> list[int]:
    """Cut-offs K: positive integers, sorted and without repeats; a list, a single int, or the command line's text
    "10,20,50"."""
    if isinstance(value, str):
        try:
            found = [int(part) for part in _parts(value)]
        except ValueError:
            raise refuse(name, value, "expected a comma-separated list of integers such as 10,20,50", option) from None
    elif _is_integer(value):
        found = [value]
    elif isinstance(value, Sequence) and all(_is_integer(k) for k in value):
        found = list(value)
    else:
        raise refuse(name, value, "expected a list of integers such as [10, 20, 50]", option)
    ks = sorted(set(found))
    if not ks or ks[0] < 1:
        raise refuse(name, value, "cut-offs must be positive integers", option)
    return ks


def integers(value: Any, name: str, option: str | None = None, *, example: str = "0,1,2") -> list[int]:
    """Integers (seeds): a non-empty list, or the command line's text "0,1,2"."""
    if isinstance(value, str):
        try:
            found = [int(part) for part in _parts(value)]
        except ValueError:
            found = []
    elif isinstance(value, Sequence) and all(_is_integer(item) for item in value):
        found = list(value)
    else:
        found = []
    if not found:
        raise refuse(name, value, f"expected comma-separated integers such as {example}", option)
    return found


def texts(value: Any, name: str, option: str | None = None, *, empty: bool = False) -> list[str]:
    """Names (methods, datasets, metrics): a list of non-empty str, or the command line's text "a,b"; `empty`: an
    empty list is allowed."""
    if isinstance(value, str):
        found = _parts(value)
    elif isinstance(value, Sequence) and all(isinstance(item, str) and item.strip() for item in value):
        found = [item.strip() for item in value]
    else:
        raise refuse(name, value, "expected a list of names (str)", option)
    if not found and not empty:
        raise refuse(name, value, "expected at least one name", option)
    return found


def optional_texts(value: Any, name: str, option: str | None = None, **rules: Any) -> list[str] | None:
    return None if value is None else texts(value, name, option, **rules)


def mapping(value: Any, name: str, option: str | None = None) -> dict:
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise refuse(name, value, "expected a mapping of config keys (a dict with str keys)", option)
    return dict(value)


def optional_mapping(value: Any, name: str, option: str | None = None) -> dict | None:
    return None if value is None else mapping(value, name, option)
