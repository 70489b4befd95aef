"""Name -> class registries: samplers, losses, models, formats, metrics and runners are looked up by the names
configs use.

A registry lives in its own module (e.g. recx/samplers/registry.py) and knows the packages its built-in members live
in: the first time it is read, it imports every module of those packages (a new built-in component is one file, found
there) and the plugins (recx.core.plugins). Members register with the registry's decorator; each name has one
owner (recx, or the plugin that registered it), and a second registration of a name is refused naming both owners.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from typing import Callable, Generic, TypeVar

from recx.core import plugins
from recx.core.errors import RecxError
from recx.core.names import NAME

T = TypeVar("T")


def did_you_mean(name: str, names) -> str:
    """` (did you mean 'x'?)` for the closest of `names`, else empty."""
    close = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _builtin(obj) -> bool:
    module = getattr(obj, "__module__", "")
    return module == "recx" or module.startswith("recx.")


def _owner_of(obj) -> str:
    """`recx (module)` for a built-in, `plugin <name> (module)` for a plugin's, else the defining module."""
    module = getattr(obj, "__module__", "?")
    if _builtin(obj):
        return f"recx ({module})"
    plugin = plugins.loading_now()
    return f"{plugin} ({module})" if plugin is not None else f"module {module}"


class Registry(Generic[T]):
    """A named registry; `get` names the valid choices (and the closest one) when a name is unknown."""

    def __init__(self, kind: str, *packages: str, check: Callable[[T], str | None] | None = None):
        """`check(obj)`: what is wrong with a member (its class and Args), refused when it registers; None: fine."""
        self.kind = kind
        self.packages = packages
        self.check = check
        self._entries: dict[str, T] = {}
        self._owners: dict[str, str] = {}
        self._default: str | None = None
        self._discovered = not packages

    def register(self, name: str, *, default: bool = False) -> Callable[[T], T]:
        """Decorator: register the object under `name` (`default`: the name a run config takes when it names none;
        built-ins only)."""

        def decorate(obj: T) -> T:
            owner = _owner_of(obj)
            if not isinstance(name, str) or not NAME.fullmatch(name) or name in (".", ".."):
                raise RecxError(
                    f"{owner} registers the {self.kind} name {name!r}: a name is letters, digits, '_', '-' and '.' "
                    "(one folder name, not '.' or '..'), as it names files and folders of runs and reports"
                )
            if not _builtin(obj):
                self._discover()  # a name from outside recx is checked against every built-in one
            if name in self._entries:
                raise RecxError(
                    f"{self.kind} {name!r} is registered twice: by {self._owners[name]} and by {owner}; "
                    "rename one of them"
                )
            problem = self.check(obj) if self.check is not None else None
            if problem:
                raise RecxError(f"{self.kind} {name!r} of {owner} is refused: {problem}")
            self._entries[name] = obj
            self._owners[name] = owner
            plugins.note_registered(self.kind, name)
            if default:
                self._default = name
            return obj

        return decorate

    def _discover(self) -> None:
        """Import every module of the packages (a subpackage: its `__init__` only): they register themselves."""
        if self._discovered:
            return
        self._discovered = True
        for name in self.packages:
            package = importlib.import_module(name)
            for module in pkgutil.iter_modules(package.__path__, f"{name}."):
                importlib.import_module(module.name)

    def _complete(self) -> None:
        self._discover()
        plugins.load()

    def get(self, name: str) -> T:
        self._complete()
        if name not in self._entries:
            raise RecxError(
                f"unknown {self.kind} {name!r}{did_you_mean(name, self._entries)}; valid: {', '.join(self.names())}"
            )
        return self._entries[name]

    def names(self) -> list[str]:
        self._complete()
        return sorted(self._entries)

    def builtins(self) -> list[str]:
        """The names recx itself registers (not a plugin's)."""
        return [name for name in self.names() if self._owners[name].startswith("recx (")]

    def owner(self, name: str) -> str:
        """Who registered `name`: `recx (module)` or `plugin <name> (module)`."""
        self.get(name)
        return self._owners[name]

    def code_hash(self, name: str) -> str | None:
        """None for a name recx registers; else the sha256 of the code its class comes from (plugins.code_hash), or
        "unhashed <module>" when that module has no source file."""
        obj = self.get(name)
        if _builtin(obj):
            return None
        module = getattr(obj, "__module__", "?")
        return plugins.code_hash(module) or f"unhashed {module}"

    @property
    def default(self) -> str:
        """The name a run config takes when it names none."""
        self._complete()
        if self._default is None:
            raise RuntimeError(f"no default {self.kind} is registered")
        return self._default

    def __contains__(self, name: str) -> bool:
        self._complete()
        return name in self._entries
