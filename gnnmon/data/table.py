"""Rows as columns: what the report computes on, so that a run of millions of rows is explained in
bounded memory (8 bytes a number, strings shared between rows) and at the speed of numpy.

A :class:`Table` keeps one :class:`Part` per label; a part keeps each field as a column: numbers
in an ``array`` (``q`` for ints, ``d`` for floats; None as NaN or :data:`NO_INT`), anything else in
a list (equal texts share one object). Fields a row did not have are remembered, so each row reads
back exactly as it was written (:meth:`Table.rows`), in the order the rows were added.

Rows are columnised in batches of up to :data:`BATCH` rows with the same fields: the batch is
turned into columns at C speed (``zip`` over the rows' values) and each column takes its values in
one step (:meth:`~gnnmon.data.column.Column.extend`), which is what makes reading a long run file
cost little more than parsing it. A part columnises what it holds before anything reads it; a row added to a table
must not be changed afterwards (the table may hold it until its batch is columnised).
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

import numpy as np

from gnnmon.data.column import ABSENT, NO_INT, Column, column_kind
from gnnmon.data.format import encode

BATCH = 64
"""Rows a part gathers before it columnises them: few enough that the rows waiting die young. With
256, enough rows stay alive that the cyclic GC ran about 1,000 times over a 300,000-row file
(0.4 s), as much as the fewer batches saved; with 64, 19 times."""


class Part:
    """One label's rows as columns (see the module doc for how they are added)."""

    __slots__ = ("label", "_n", "_cols", "seq", "_pending")

    def __init__(self, label: str) -> None:
        self.label = label
        self._n = 0  # rows columnised
        self._cols: dict[str, Column] = {}
        self.seq = array("q")  # each row's position among all rows of the table
        self._pending: list[Mapping[str, Any]] = []  # rows added, not columnised yet

    def add(self, row: Mapping[str, Any], seq: int) -> None:
        pending = self._pending
        pending.append(row)
        self.seq.append(seq)
        if len(pending) >= BATCH:
            self._flush()

    def extend(self, rows: Sequence[Mapping[str, Any]], first_seq: int) -> None:
        """Add ``rows`` (all of this label), the first at position ``first_seq`` of the table and
        the others after it, in order."""
        pending = self._pending
        pending.extend(rows)
        self.seq.extend(range(first_seq, first_seq + len(rows)))
        if len(pending) >= BATCH:
            self._flush()

    def _flush(self) -> None:
        """Columnise the rows pending: in one batch when they all have the same fields in the same
        order (the usual case, checked at C speed), else in runs of rows with the same fields."""
        batch = self._pending
        if not batch:
            return
        self._pending = []
        keys = tuple(batch[0])
        if set(map(type, batch)) == {dict} and list(map(tuple, batch)).count(keys) == len(batch):
            # every row: these fields, in this order
            self._columnise(len(batch), keys, zip(*map(dict.values, batch), strict=True))  # type: ignore[arg-type]
            return
        start = 0
        for i in range(1, len(batch) + 1):
            if i == len(batch) or tuple(batch[i]) != keys:
                run = batch[start:i]
                self._columnise(len(run), keys, ([row[k] for row in run] for k in keys))
                if i < len(batch):
                    start, keys = i, tuple(batch[i])

    def _columnise(self, n: int, keys: tuple[str, ...], columns: Iterable[Sequence[Any]]) -> None:
        """Add ``n`` rows, whose fields are ``keys``, given as each field's values in turn."""
        n0, cols = self._n, self._cols
        for key, values in zip(keys, columns, strict=True):
            col = cols.get(key)
            if col is None:
                col = cols[key] = Column(column_kind(values), n0)
            col.extend(values)
        if len(cols) != len(keys):
            present = set(keys)
            for key, col in cols.items():
                if key not in present:
                    col.skip(n)
        self._n = n0 + n

    @property
    def n(self) -> int:
        """Rows of this label."""
        return self._n + len(self._pending)

    @property
    def cols(self) -> dict[str, Column]:
        """The columns, by field, in the order fields first appeared (every row columnised)."""
        if self._pending:
            self._flush()
        return self._cols

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` as it was written."""
        out = {}
        for key, col in self.cols.items():
            v = col.get(i)
            if v is not ABSENT:
                out[key] = v
        return out

    def all_rows(self) -> list[dict[str, Any]]:
        """Every row as it was written (:meth:`row` for each), column by column: a field a row
        lacks is left out of its dict."""
        cols = self.cols
        keys = list(cols)
        if not keys:
            return [{} for _ in range(self.n)]
        rows = [dict(zip(keys, vals, strict=True)) for vals in zip(*(c.get_all() for c in cols.values()), strict=True)]
        for key, col in cols.items():
            if col.first or col.absent:
                for i in (*range(col.first), *col.absent):
                    del rows[i][key]
        return rows

    def view(self, i: int) -> RowView:
        """Row ``i`` as a read-only mapping that reads each field when asked (cheaper than
        :meth:`row` where a few fields of many rows are read)."""
        return RowView(self.cols, i)

    def nulls(self, name: str) -> np.ndarray:
        """A bool per row: whether field ``name`` is None or missing (all True for a field the
        label lacks): :meth:`objects`' ``is None``, at numpy's speed."""
        col = self.cols.get(name)
        return col.nulls() if col is not None else np.ones(self.n, dtype=bool)

    def numbers(self, name: str) -> np.ndarray:
        """Field ``name`` as float64 (NaN where missing); all NaN for a field the label lacks."""
        col = self.cols.get(name)
        return col.numbers() if col is not None else np.full(self.n, math.nan)

    def objects(self, name: str) -> list[Any]:
        """Field ``name`` as Python values (None where missing)."""
        col = self.cols.get(name)
        if col is None:
            return [None] * self.n
        values = col.get_all()
        if col.first or col.absent:
            values = [None if v is ABSENT else v for v in values]
        return values

    def pick(self, name: str, at: Sequence[int]) -> list[Any]:
        """Field ``name`` of the rows at positions ``at``, as Python values (None where missing):
        :meth:`objects` for a few rows."""
        col = self.cols.get(name)
        if col is None:
            return [None] * len(at)
        if col.kind == "o":
            return [None if v is ABSENT else v for v in map(col.values.__getitem__, at)]
        raw = np.frombuffer(col.values,
                            dtype=np.int64 if col.kind == "q" else np.float64)[np.asarray(at, dtype=np.int64)]
        out: list[Any] = raw.tolist()
        for i in np.flatnonzero(raw == NO_INT if col.kind == "q" else np.isnan(raw)).tolist():
            out[i] = None
        return out

    def time(self) -> np.ndarray:
        """Each row's time in seconds: ``device_s``, else ``wall_s``, else its window."""
        t = self.numbers("device_s")
        wall = self.numbers("wall_s")
        t = np.where(np.isnan(t), wall, t)
        window = (self.numbers("t_end_ns") - self.numbers("t_start_ns")) / 1e9
        return np.where(np.isnan(t), window, t)


class RowView(Mapping[str, Any]):
    """One row of a part, read a field at a time (see :meth:`Part.view`)."""

    __slots__ = ("_cols", "_i")

    def __init__(self, cols: dict[str, Column], i: int) -> None:
        self._cols, self._i = cols, i

    def __getitem__(self, key: str) -> Any:
        col = self._cols.get(key)
        v = ABSENT if col is None else col.get(self._i)
        if v is ABSENT:
            raise KeyError(key)
        return v

    def get(self, key: str, default: Any = None) -> Any:
        col = self._cols.get(key)
        v = ABSENT if col is None else col.get(self._i)
        return default if v is ABSENT else v

    def __iter__(self) -> Iterator[str]:
        return (k for k, col in self._cols.items() if col.get(self._i) is not ABSENT)

    def __len__(self) -> int:
        return sum(1 for _ in self)


_first = itemgetter(0)


class Table:
    """A run's rows, per label, as columns; in the order they were added."""

    def __init__(self, rows: Iterable[Mapping[str, Any]] = ()) -> None:
        self.parts: dict[str, Part] = {}
        self.n = 0
        for row in rows:
            self.add(row)

    def add(self, row: Mapping[str, Any]) -> None:
        label = row["label"]
        part = self.parts.get(label)
        if part is None:
            part = self.parts[label] = Part(label)
        part.add(row, self.n)
        self.n += 1

    def extend(self, rows: list[dict[str, Any]], labels: Sequence[str] | None = None) -> None:
        """Add ``rows`` in order (``labels``: each row's label, if known): a run of rows of one
        label is columnised at once."""
        if labels is None:
            labels = [row["label"] for row in rows]
        if len(set(labels)) == 1:
            runs: Iterable[tuple[str, int]] = [(labels[0], len(rows))]
        else:  # each run of one label at once
            runs = [(label, len(list(run))) for label, run in groupby(labels)]
        start = 0
        for label, n in runs:
            part = self.parts.get(label)
            if part is None:
                part = self.parts[label] = Part(label)
            part.extend(rows[start:start + n] if n < len(rows) else rows, self.n)
            self.n += n
            start += n

    def __len__(self) -> int:
        return self.n

    def labels(self) -> list[str]:
        return list(self.parts)

    def records(self) -> list[dict[str, Any]]:
        """Every row as a dict, in the order added, all at once (:meth:`rows` column by column:
        several times faster where every row is wanted)."""
        parts = list(self.parts.values())
        if len(parts) == 1:
            return parts[0].all_rows()
        made = [part.all_rows() for part in parts]
        iters = [zip(part.seq, rows, strict=True) for part, rows in zip(parts, made, strict=True)]
        return [row for _, row in heapq.merge(*iters, key=_first)]

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row as a dict, in the order added (one at a time: bounded memory)."""
        parts = list(self.parts.values())
        iters = [zip(part.seq, range(part.n), [k] * part.n, strict=True) for k, part in enumerate(parts)]
        for _, i, k in heapq.merge(*iters):
            yield parts[k].row(i)

    def figures(self, skip: Iterable[str] = ()) -> list[str]:
        """Numeric field names, in the order they first carry a number (identity fields and
        ``skip`` left out)."""
        skipped = set(skip) | {"index", "t_start_ns", "t_end_ns"}
        first: dict[str, tuple[int, int]] = {}
        for part in self.parts.values():
            for j, (name, col) in enumerate(part.cols.items()):
                if name in skipped:
                    continue
                hit = np.flatnonzero(~np.isnan(col.numbers()))
                if hit.size:
                    at = (int(part.seq[int(hit[0])]), j)
                    if name not in first or at < first[name]:
                        first[name] = at
        return sorted(first, key=lambda k: first[k])

    def where(self, by: str) -> dict[Any, Table]:
        """The rows split by the value of field ``by`` (rows without it under None; a list or an
        object, which no dict can be keyed by, under its JSON text)."""
        out: dict[Any, Table] = {}
        for row in self.rows():
            value = row.get(by)
            if isinstance(value, (list, dict)):
                value = _json_text(value)
            table = out.get(value)
            if table is None:
                table = out[value] = Table()
            table.add(row)
        return out


def _json_text(value: Any) -> str:
    return encode({"v": value})[5:-1].decode("utf-8", "replace")


def returned(part: Part) -> np.ndarray | None:
    """A bool per row of ``part``: the calls that returned (no ``error``); None when all did, or
    when none did (then every row is all there is)."""
    col = part.cols.get("error")
    if col is None:
        return None
    ok = col.nulls()
    return None if ok.all() or not ok.any() else ok


def as_table(rows: Table | Iterable[Mapping[str, Any]]) -> Table:
    """``rows`` as a table (a table as it is)."""
    return rows if isinstance(rows, Table) else Table(rows)
