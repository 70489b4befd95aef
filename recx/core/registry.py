"""Name -> class registries: samplers, losses and models are looked up by the names configs use."""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

from recx.core.errors import RecxError

T = TypeVar("T")


class Registry(Generic[T]):
    """A small named registry; `get` names the valid choices when a name is unknown."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorate(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._entries[name] = obj
            return obj

        return decorate

    def get(self, name: str) -> T:
        if name not in self._entries:
            raise RecxError(f"unknown {self.kind} {name!r}; valid: {', '.join(self.names())}")
        return self._entries[name]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries
