"""What the report and its exports read: a run's plain data (a ``RunResult``, a ``Report``, or any
object with these attributes)."""

from __future__ import annotations

from typing import Any, Protocol


class Source(Protocol):
    """A run's plain data: its rows (dicts, in the order they finished), manifest, GC events,
    samples and markers."""

    @property
    def records(self) -> list[dict[str, Any]]: ...

    @property
    def manifest(self) -> Any: ...

    @property
    def gc_events(self) -> list[dict[str, Any]]: ...

    @property
    def samples(self) -> list[dict[str, Any]]: ...

    @property
    def markers(self) -> list[dict[str, Any]]: ...
