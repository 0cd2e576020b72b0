"""A run's plain result: what reports and exports read. No threads, locks or open files: a
:class:`RunResult` is made by a live run (``run.result()``), read from a file (:meth:`RunResult.read`,
what ``gnnmon.load`` uses) or merged from a distributed job's ranks (:meth:`RunResult.merge`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gnnmon.record.storage import read_lines
from gnnmon.report import Report
from gnnmon.report.table import Table
from gnnmon.timeline.join import Counters, energy_balance


class RunResult:
    """A run's manifest, rows, GC events, samples, counter points, markers and end line.

    ``records``: the rows (dicts), in the order they finished; ``complete``: whether the run
    ended cleanly (its end line was written); ``path``: the file it came from, if any."""

    def __init__(
        self,
        records: Iterable[dict[str, Any]] | Table,
        *,
        manifest: dict[str, Any] | None = None,
        gc_events: Iterable[dict[str, Any]] = (),
        samples: Iterable[dict[str, Any]] = (),
        markers: Iterable[dict[str, Any]] = (),
        points: Iterable[dict[str, Any]] = (),
        end: dict[str, Any] | None = None,
        path: str | os.PathLike[str] | None = None,
        complete: bool | None = None,
    ) -> None:
        self.table = records if isinstance(records, Table) else Table(records)
        self._records: list[dict[str, Any]] | None = None
        self.manifest = manifest
        self.gc_events: list[dict[str, Any]] = list(gc_events)
        self.samples: list[dict[str, Any]] = list(samples)
        self.markers: list[dict[str, Any]] = list(markers)
        self._points: list[dict[str, Any]] = list(points)  # as written: with err_ns and step
        self.end = dict(end or {})
        self.path = Path(path) if path is not None else None
        self.complete = complete

    @property
    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts, in the order they finished (made once, when first read: for a long
        run, iterate ``table.rows()`` or read the report instead)."""
        if self._records is None:
            self._records = list(self.table.rows())
        return self._records

    @property
    def config(self) -> dict[str, Any]:
        """The user's settings from the manifest."""
        return dict((self.manifest or {}).get("config") or {})

    @property
    def rows_written(self) -> int:
        return len(self.table)

    @property
    def sampler_stats(self) -> dict[str, Any]:
        """The sampler's own cost, from the end line."""
        return dict(self.end.get("sampler") or {})

    @property
    def children_forked(self) -> int:
        return int(self.end.get("children_forked") or 0)

    @property
    def counters(self) -> Counters:
        """The energy counters' points, for interpolation."""
        return Counters(self._points)

    @property
    def points(self) -> list[dict[str, Any]]:
        """The energy counters' points (``key``, ``t_ns``, ``value``), key by key, in time order."""
        return self.counters.points()

    def energy_balance(self) -> dict[str, dict[str, Any]]:
        """Per energy counter: rows + gaps + before/after against the counter's own delta (see
        :func:`gnnmon.timeline.join.energy_balance`); {} without counters."""
        counters = self.counters
        return energy_balance(self.table.rows(), counters) if counters.keys() else {}

    def report(self) -> Report:
        """A :class:`gnnmon.report.Report` over this result."""
        return Report(self)

    @classmethod
    def read(cls, path: str | os.PathLike[str], *, strict: bool = True,
             progress: Callable[[int], Any] | None = None) -> RunResult:
        """One run file, a line at a time, its rows straight into a columnar table (a cut-off last
        line is skipped with a warning; see :func:`gnnmon.record.storage.read_lines`)."""
        manifest: dict[str, Any] | None = None
        rows = Table()
        parts: dict[str, list[dict[str, Any]]] = {"gc": [], "sample": [], "marker": [], "point": []}
        end: dict[str, Any] | None = None
        add = rows.add
        for obj in read_lines(path, strict=strict, progress=progress):
            kind = obj.pop("type", None)
            if kind == "row":
                add(obj)
            elif kind == "manifest":
                if manifest is None:
                    manifest = obj
            elif kind in parts:
                parts[kind].append(obj)
            elif kind == "end":
                end = obj
        return cls(rows, manifest=manifest, gc_events=parts["gc"], samples=parts["sample"],
                   markers=parts["marker"], points=parts["point"], end=end, path=path,
                   complete=end is not None)

    @classmethod
    def merge(cls, results: list[RunResult]) -> RunResult:
        """One result of a distributed job's ranks: rows, GC events, samples and markers each
        carry ``rank`` (from the result's manifest, else its position); the manifest is the
        lowest rank's, with ``ranks`` listing each rank's ``distributed`` entry, file and whether
        it ended cleanly."""
        ranked = []
        for i, result in enumerate(results):
            dist = (result.manifest or {}).get("distributed") or {}
            ranked.append((int(dist.get("rank", i)), result))
        ranked.sort(key=lambda t: t[0])

        def tagged(items: Iterable[dict[str, Any]], rank: int) -> list[dict[str, Any]]:
            return [{**item, "rank": rank} for item in items]

        rows = Table()
        for rank, r in ranked:
            for row in r.table.rows():
                row["rank"] = rank
                rows.add(row)

        first = ranked[0][1]
        manifest = dict(first.manifest or {})
        manifest["ranks"] = [{**((r.manifest or {}).get("distributed") or {"rank": rank}),
                              "file": str(r.path) if r.path else None, "complete": r.complete}
                             for rank, r in ranked]
        return cls(rows,
                   manifest=manifest,
                   gc_events=[e for rank, r in ranked for e in tagged(r.gc_events, rank)],
                   samples=[e for rank, r in ranked for e in tagged(r.samples, rank)],
                   markers=[e for rank, r in ranked for e in tagged(r.markers, rank)],
                   path=first.path or Path("job"), complete=all(r.complete for _, r in ranked))

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        return f"<gnnmon.RunResult {where} rows={len(self.table)}{'' if self.complete else ' incomplete'}>"
