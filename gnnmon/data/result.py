"""A run's plain result: what reports and exports read. No threads, locks or open files: a
:class:`RunResult` is made by a live run (``run.result()``), read from a file (:meth:`RunResult.read`,
what ``gnnmon.load`` uses) or merged from a distributed job's ranks (:meth:`RunResult.merge`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from functools import partial
from itertools import compress
from operator import eq, methodcaller, not_
from pathlib import Path
from typing import Any

from gnnmon.data.format import END, GC, MANIFEST, MARKER, POINT, ROW, SAMPLE
from gnnmon.data.points import Counters
from gnnmon.data.read import bad_row, read_chunks, rows_of_lines, table_of_lines
from gnnmon.data.schema import KIND, Damage, line_damage
from gnnmon.data.schema import Damaged as _Damaged
from gnnmon.data.table import Table

_POP_TYPE = methodcaller("pop", "type", None)
_IS_ROW = partial(eq, ROW)  # False for a kind that is not text (str.__eq__ would give NotImplemented: true)
_LABEL = methodcaller("get", "label")
_INDEX = methodcaller("get", "index")

class _Lines:
    """A file's lines other than rows, as :meth:`RunResult.read` takes them: each checked
    (:mod:`gnnmon.data.schema`), kept by kind."""

    def __init__(self, path: str | os.PathLike[str], strict: bool) -> None:
        self.manifest: dict[str, Any] | None = None
        self.parts: dict[str, list[dict[str, Any]]] = {GC: [], SAMPLE: [], MARKER: [], POINT: []}
        self.end: dict[str, Any] | None = None
        self.damaged = _Damaged(path, strict)

    def take(self, n: int, obj: dict[str, Any], kind: Any) -> bool:
        """Line ``n`` (of ``kind``, not a row); False when damage stops the read (strict) there."""
        damage = line_damage(kind, obj) if type(kind) is str else [Damage("type", kind, KIND, True)]
        if damage and not self.damaged.line(n, kind, obj, damage):
            return not self.damaged.stop
        if kind == MANIFEST:
            if self.manifest is None:
                self.manifest = obj
        elif kind in self.parts:
            self.parts[kind].append(obj)
        elif kind == END:
            self.end = obj
        return True


class RunResult:
    """A run's manifest, rows, GC events, samples, counter points, markers and end line.

    ``records``: the rows (dicts), in the order they finished; ``complete``: whether the run
    ended cleanly (its end line was written); ``path``: the file it came from, if any.
    A distributed job's merged result also has ``ranks``: each rank's own result (its manifest,
    samples, points and end line; its rows are in the job's table, with ``rank``)."""

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
        ranks: dict[int, RunResult] | None = None,
    ) -> None:
        self._table: Table | None = records if isinstance(records, Table) else Table(records)
        self._lines: list[bytes] | None = None  # row lines not read yet (a live run's window)
        self._records: list[dict[str, Any]] | None = None
        self.manifest = manifest
        self.gc_events: list[dict[str, Any]] = list(gc_events)
        self.samples: list[dict[str, Any]] = list(samples)
        self.markers: list[dict[str, Any]] = list(markers)
        self._points: list[dict[str, Any]] = list(points)  # as written: with err_ns and step (and rank)
        self.end = dict(end or {})
        self.path = Path(path) if path is not None else None
        self.complete = complete
        self.ranks: dict[int, RunResult] = dict(ranks or {})

    @classmethod
    def of_lines(cls, lines: Iterable[bytes], **parts: Any) -> RunResult:
        """A result whose rows are row lines as the run file holds them (a live run's window: each
        line one encoded ``{"type":"row",...}``), read when first asked for: into the table as a
        file's chunks are (:func:`~gnnmon.data.read.table_of_lines`), or straight into
        :attr:`records` where those are asked for first. ``parts``: the other keywords of the
        constructor (manifest, samples, ...)."""
        made = cls((), **parts)
        made._table, made._lines = None, list(lines)
        return made

    @property
    def table(self) -> Table:
        """The rows as a columnar :class:`~gnnmon.data.table.Table`, per label."""
        lines = self._lines  # before the table: another thread sets the table first, then drops the lines
        if self._table is None:
            self._table = table_of_lines(lines or ())
            self._lines = None
        return self._table

    @property
    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts, in the order they finished (made once, when first read: for a long
        run, iterate ``table.rows()`` or read the report instead)."""
        if self._records is None:
            lines = self._lines  # before the table (see :attr:`table`)
            if lines is not None and self._table is None:  # straight into dicts, no table on the way
                self._records = [row for rows in rows_of_lines(lines) for row in rows]
            else:
                self._records = self.table.records()
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
        """The sampler's own cost, from the end line (a job's: each rank's, in ``ranks``)."""
        return dict(self.end.get("sampler") or {})

    @property
    def one_thread(self) -> bool:
        """Whether the run's steps ran torch on one intra-op thread (then a step's CPU time is its
        work): the count its end line read as the run closed, else its manifest's, read as it
        started (a script under ``gnnmon run`` sets it after that); a job's: every rank's."""
        if self.ranks:
            return all(part.one_thread for part in self.ranks.values())
        threads = self.end.get("torch_threads")
        if threads is None:
            threads = ((self.manifest or {}).get("devices") or {}).get("torch_threads")
        return threads == 1

    @property
    def children_forked(self) -> int:
        return int(self.end.get("children_forked") or 0)

    @property
    def counters(self) -> Counters:
        """The energy counters' points, for interpolation (a job's: each rank's, in ``ranks``)."""
        return Counters(p for p in self._points if "rank" not in p)

    @property
    def points(self) -> list[dict[str, Any]]:
        """The energy counters' points (``key``, ``t_ns``, ``value``), key by key, in time order;
        a job's carry ``rank``, rank by rank."""
        if self.ranks:
            return [{**p, "rank": rank} for rank, part in self.ranks.items() for p in part.points]
        return self.counters.points()

    @classmethod
    def read(cls, path: str | os.PathLike[str], *, strict: bool = True,
             progress: Callable[[int], Any] | None = None) -> RunResult:
        """One run file, a line at a time, its rows straight into a columnar table (a cut-off last
        line is skipped with a warning; see :func:`gnnmon.data.read.read_chunks`). Every line is
        checked against what its kind must hold (:mod:`gnnmon.data.schema`): a damaged value is
        refused (:class:`~gnnmon.errors.ReportFileError` naming its line and field), or with
        ``strict=False`` read as None (a line missing what it cannot do without: skipped), each
        with a warning."""
        rows = Table()
        lines = _Lines(path, strict)
        for n, objs in read_chunks(path, strict=strict, progress=progress):
            kinds = list(map(_POP_TYPE, objs))
            is_row = list(map(_IS_ROW, kinds))
            found = list(compress(objs, is_row))
            labels = list(map(_LABEL, found))
            if not (found and set(map(type, labels)) == {str} and set(map(type, map(_INDEX, found))) == {int}):
                for i, (obj, kind) in enumerate(zip(objs, kinds, strict=True)):  # no rows, or one to refuse
                    if kind == ROW:
                        if not bad_row(path, n + i, obj, strict):
                            rows.add(obj)
                    elif not lines.take(n + i, obj, kind):
                        break
            elif len(found) == len(objs):  # a chunk of good rows: at C speed
                rows.extend(found, labels)
            else:  # good rows at C speed, the chunk's other lines (few) one at a time
                for before, i in enumerate(compress(range(len(objs)), map(not_, is_row))):
                    if not lines.take(n + i, objs[i], kinds[i]):
                        del found[i - before:], labels[i - before:]  # no row after a line that stops the read
                        break
                if found:
                    rows.extend(found, labels)
            if lines.damaged.stop:
                break
        manifest, parts, end, damaged = lines.manifest, lines.parts, lines.end, lines.damaged
        damaged.rows(rows)
        return cls(rows, manifest=manifest, gc_events=parts[GC], samples=parts[SAMPLE],
                   markers=parts[MARKER], points=parts[POINT], end=end, path=path,
                   complete=end is not None)

    @classmethod
    def merge(cls, results: list[RunResult]) -> RunResult:
        """One result of a distributed job's ranks: rows, GC events, samples, markers and points
        each carry ``rank`` (from the result's manifest, else its position); the manifest is the
        lowest rank's, with ``ranks`` listing each rank's ``distributed`` entry, file and whether
        it ended cleanly; the end line counts the job's rows and lists each rank's end line.
        ``ranks`` keeps each rank's own result (without its rows, which are the job's)."""
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
        own = {rank: cls((), manifest=r.manifest, gc_events=r.gc_events, samples=r.samples, markers=r.markers,
                         points=r._points, end=r.end or None, path=r.path, complete=r.complete)
               for rank, r in ranked}
        end = {"type": END, "rows": len(rows), "ranks": [{**r.end, "rank": rank} for rank, r in ranked if r.end]}
        return cls(rows,
                   manifest=manifest,
                   gc_events=[e for rank, r in ranked for e in tagged(r.gc_events, rank)],
                   samples=[e for rank, r in ranked for e in tagged(r.samples, rank)],
                   markers=[e for rank, r in ranked for e in tagged(r.markers, rank)],
                   points=[p for rank, r in ranked for p in tagged(r._points, rank)],
                   end=end, path=first.path or Path("job"), complete=all(r.complete for _, r in ranked),
                   ranks=own)

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        return f"<gnnmon.RunResult {where} rows={len(self.table)}{'' if self.complete else ' incomplete'}>"
