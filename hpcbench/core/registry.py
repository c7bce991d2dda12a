"""Classes found by their `name`, as ReFrame registers its back ends: a testbed kind,
a launcher, a scheduler. Adding one is a class with a name and the decorator; nothing
else lists it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from hpcbench.core.errors import UsageError

C = TypeVar("C", bound=type)
V = TypeVar("V")


class Registry(Generic[V]):
    """`what` (the word an error names them by) by name; `make` turns a registered
    class into what is kept (the class itself, or one instance of it)."""

    def __init__(self, what: str, make: Callable[[type], V]) -> None:
        self.what = what
        self._make = make
        self._by_name: dict[str, V] = {}

    def register(self, cls: C) -> C:
        """The class decorator that makes `cls` found by its name."""
        name = getattr(cls, "name", "")
        if not name or name in self._by_name:
            raise ValueError(f"{self.what} {name!r}: no name, or registered twice")
        self._by_name[name] = self._make(cls)
        return cls

    def unregister(self, name: str) -> None:
        """No longer found (a test's own, once the test is done)."""
        self._by_name.pop(name, None)

    def get(self, name: str) -> V | None:
        return self._by_name.get(name)

    def named(self, name: str, also: tuple[str, ...] = ()) -> V:
        """The one of that name, else one UsageError line listing them (and `also`:
        words the caller takes besides, such as `auto`)."""
        if name not in self._by_name:
            known = ", ".join((*also, *self._by_name))
            raise UsageError(f"unknown {self.what} {name!r}: choose one of {known}")
        return self._by_name[name]

    def names(self) -> list[str]:
        return list(self._by_name)

    def items(self) -> Iterator[tuple[str, V]]:
        return iter(list(self._by_name.items()))

    def __contains__(self, name: object) -> bool:
        return name in self._by_name
