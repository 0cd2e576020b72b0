"""Rows as columns: what the report computes on, so that a run of millions of rows is explained in
bounded memory (8 bytes a number, strings shared between rows) and at the speed of numpy.

A :class:`Table` keeps one :class:`Part` per label; a part keeps each field as a column: numbers
in an ``array`` (``q`` for ints, ``d`` for floats; None as NaN or :data:`NO_INT`), anything else in
a list (equal neighbours share one object). Fields a row did not have are remembered, so each row
reads back exactly as it was written (:meth:`Table.rows`), in the order the rows were added.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

NO_INT = -(2**63)
"""An int column's None."""

_ABSENT: Any = object()
"""A field the row did not have."""


class Column:
    """One field of one label's rows."""

    __slots__ = ("values", "kind", "first", "absent", "_last")

    def __init__(self, kind: str, absent_before: int) -> None:
        self.kind = kind  # "q", "d" or "o"
        self.values: Any = array(kind) if kind != "o" else []
        self.first = absent_before  # rows before the first that had this field
        self.absent: set[int] = set()  # later rows without it
        self._last: Any = _ABSENT
        if absent_before:
            pad = NO_INT if kind == "q" else math.nan if kind == "d" else _ABSENT
            self.values.extend([pad] * absent_before)

    def appender(self) -> Any:
        """The fast way to add a value of this column's kind (raises TypeError for another)."""
        if self.kind != "o":
            return self.values.append
        values = self.values

        def add(v: Any) -> None:
            last = self._last
            if v is not last and type(v) is type(last) and v == last:
                values.append(last)  # equal neighbours share one object
            else:
                self._last = v
                values.append(v)

        return add

    def add(self, value: Any) -> None:
        """Add any value, changing the column's kind where it must."""
        kind = self.kind
        if value is _ABSENT:
            self.absent.add(len(self.values))
            value = NO_INT if kind == "q" else math.nan if kind == "d" else _ABSENT
            self.values.append(value)
            return
        if kind == "q":
            if value is None:
                self.values.append(NO_INT)
                return
            if type(value) is int and NO_INT < value < 2**63:
                self.values.append(value)
                return
            self._widen("d" if type(value) is float else "o")
            kind = self.kind
        if kind == "d":
            if value is None:
                self.values.append(math.nan)
                return
            if type(value) in (int, float):
                self.values.append(value)
                return
            self._widen("o")
        self.appender()(value)

    def _widen(self, kind: str) -> None:
        """Ints to floats, or numbers to objects (a field that changed type between rows)."""
        old = self.get_all()
        self.kind = kind
        self.values = array("d", [math.nan if v is None or v is _ABSENT else v for v in old]) if kind == "d" else old

    def get(self, i: int) -> Any:
        """Row ``i``'s value (None for None; :data:`_ABSENT` for a field the row did not have)."""
        if i < self.first or i in self.absent:
            return _ABSENT
        v = self.values[i]
        if self.kind == "q":
            return None if v == NO_INT else v
        if self.kind == "d":
            return None if v != v else v
        return v

    def get_all(self) -> list[Any]:
        return [self.get(i) for i in range(len(self.values))]

    def numbers(self) -> np.ndarray:
        """The values as float64, NaN where a row has no number (None, absent, text, a bool)."""
        if self.kind == "d":
            return np.frombuffer(self.values, dtype=np.float64) if len(self.values) else np.empty(0)
        if self.kind == "q":
            ints = np.frombuffer(self.values, dtype=np.int64) if len(self.values) else np.empty(0, np.int64)
            out = ints.astype(np.float64)
            out[ints == NO_INT] = math.nan
            return out
        return np.array([v if type(v) in (int, float) else math.nan for v in self.values], dtype=np.float64)


class Part:
    """One label's rows as columns."""

    __slots__ = ("label", "n", "cols", "seq", "_keys", "_appenders")

    def __init__(self, label: str) -> None:
        self.label = label
        self.n = 0
        self.cols: dict[str, Column] = {}
        self.seq = array("q")  # each row's position among all rows of the table
        self._keys: tuple[str, ...] = ()
        self._appenders: list[Any] = []

    def add(self, row: Mapping[str, Any], seq: int) -> None:
        keys = tuple(row)
        if keys == self._keys:
            try:
                for add, v in zip(self._appenders, row.values(), strict=True):
                    add(v)
            except TypeError:  # a value of another kind (None in a number column): the careful way
                self._undo_partial()
                self._add_slow(row, keys)
        else:
            self._add_slow(row, keys)
        self.seq.append(seq)
        self.n += 1

    def _undo_partial(self) -> None:
        """Drop the values a failed fast add appended, so every column has ``n`` again."""
        n = self.n
        for col in self.cols.values():
            while len(col.values) > n:
                col.values.pop()

    def _add_slow(self, row: Mapping[str, Any], keys: tuple[str, ...]) -> None:
        cols = self.cols
        for key, value in row.items():
            col = cols.get(key)
            if col is None:
                kind = "q" if type(value) is int else "d" if type(value) is float else "o"
                col = cols[key] = Column(kind, self.n)
            col.add(value)
        if len(row) != len(cols):
            for key, col in cols.items():
                if key not in row:
                    col.add(_ABSENT)
        # the next row with these fields, in this order, takes the fast way (when they are all of them)
        self._keys = keys if len(keys) == len(cols) else ()
        self._appenders = [cols[k].appender() for k in keys] if self._keys else []

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` as it was written."""
        out = {}
        for key, col in self.cols.items():
            v = col.get(i)
            if v is not _ABSENT:
                out[key] = v
        return out

    def numbers(self, name: str) -> np.ndarray:
        """Field ``name`` as float64 (NaN where missing); all NaN for a field the label lacks."""
        col = self.cols.get(name)
        return col.numbers() if col is not None else np.full(self.n, math.nan)

    def objects(self, name: str) -> list[Any]:
        """Field ``name`` as Python values (None where missing)."""
        col = self.cols.get(name)
        if col is None:
            return [None] * self.n
        return [None if v is _ABSENT else v for v in col.get_all()]

    def time(self) -> np.ndarray:
        """Each row's time in seconds: ``device_s``, else ``wall_s``, else its window."""
        t = self.numbers("device_s")
        wall = self.numbers("wall_s")
        t = np.where(np.isnan(t), wall, t)
        window = (self.numbers("t_end_ns") - self.numbers("t_start_ns")) / 1e9
        return np.where(np.isnan(t), window, t)


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

    def __len__(self) -> int:
        return self.n

    def labels(self) -> list[str]:
        return list(self.parts)

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
        """The rows split by the value of field ``by`` (rows without it under None)."""
        out: dict[Any, Table] = {}
        for row in self.rows():
            value = row.get(by)
            table = out.get(value)
            if table is None:
                table = out[value] = Table()
            table.add(row)
        return out


def sorted_numbers(col: Column, keep: np.ndarray | None = None) -> list[Any]:
    """A column's numbers (ints stay ints; None, text and bools left out), sorted; with ``keep``
    (a bool per row), those of the rows it marks only."""
    if col.kind == "o":
        marks = keep if keep is not None else np.ones(len(col.values), dtype=bool)
        return sorted(v for v, k in zip(col.values, marks, strict=True) if k and type(v) in (int, float))
    if not len(col.values):
        return []
    if col.kind == "d":
        a = np.frombuffer(col.values, dtype=np.float64)
        mask = ~np.isnan(a) if keep is None else ~np.isnan(a) & keep
        values: list[Any] = np.sort(a[mask]).tolist()
        return values
    i = np.frombuffer(col.values, dtype=np.int64)
    ints: list[Any] = np.sort(i[(i != NO_INT) if keep is None else (i != NO_INT) & keep]).tolist()
    return ints


def returned(part: Part) -> np.ndarray | None:
    """A bool per row of ``part``: the calls that returned (no ``error``); None when all did, or
    when none did (then every row is all there is)."""
    col = part.cols.get("error")
    if col is None:
        return None
    ok = np.array([v is None or v is _ABSENT for v in col.get_all()], dtype=bool)
    return None if ok.all() or not ok.any() else ok


def as_table(rows: Table | Iterable[Mapping[str, Any]]) -> Table:
    return rows if isinstance(rows, Table) else Table(rows)
