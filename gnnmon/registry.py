"""One kind of registry, for what users extend: things by name (the sinks a run writes to, the exports
a report writes), added by :meth:`Registry.register` as the module that holds them is imported; where
outside packages are a real use (sinks: ``gnnmon.sinks``), also found through their package's entry
point, imported only when asked for by name."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """``name -> T`` in the order registered; ``group``: the entry-point group packages declare theirs
    in (``name = "module:attribute"``: the module registers it as it is imported; the attribute is
    the thing itself, or its class or factory)."""

    def __init__(self, kind: str, group: str | None = None) -> None:
        self.kind, self.group = kind, group
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        """Add (or replace) ``item`` under ``name``; returns it."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {self.kind} is registered under a non-empty name; got {name!r}")
        self._items[name] = item
        return item

    def declared(self) -> dict[str, metadata.EntryPoint]:
        """What packages declare in :attr:`group`, by name ({} without a group, or where packages'
        metadata cannot be read: the registered ones still work)."""
        if self.group is None:
            return {}
        try:
            return {ep.name: ep for ep in metadata.entry_points(group=self.group)}
        except Exception:  # noqa: BLE001 - a broken package's metadata must not stop gnnmon's own
            return {}

    def names(self) -> list[str]:
        """Every name: those registered, then those only declared by a package."""
        return list(self._items) + sorted(set(self.declared()) - set(self._items))

    def find(self, name: str) -> Any:
        """The thing registered as ``name``, or what its package's entry point names (imported now)."""
        found = self._items.get(name)
        if found is not None:
            return found
        declared = self.declared()
        if name not in declared:
            raise ValueError(f"no {self.kind} named {name!r}; the {self.kind}s: {', '.join(self.names())}")
        try:
            loaded = declared[name].load()  # imports its module, which may register it
        except Exception as exc:
            raise ValueError(f"the {self.kind} {name!r} ({declared[name].value}) could not be loaded: {exc!r}") from exc
        return self._items.get(name, loaded)

    def keys(self) -> list[str]:
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())

    def clear(self) -> None:
        """Forget every registered one (a test that replaced some puts the others back)."""
        self._items.clear()

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __getitem__(self, name: str) -> T:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
