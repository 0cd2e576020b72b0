"""One field of one label's rows as a column: ints in an ``array('q')`` (None as :data:`NO_INT`),
floats in an ``array('d')`` (None as NaN), anything else in a list (equal texts, and equal lists
of texts, share one object). A batch of values is added at C speed where their types allow
(``array.extend``, one shared object per distinct text); a value of another type (a float among
ints, an int among floats, a text) makes the column one of objects, so that every value reads
back as it was written. A float NaN reads back as None: the run's file format has no NaN (it
writes null), so no row read from a file holds one.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from itertools import chain, groupby, repeat
from operator import is_
from typing import Any

import numpy as np

NO_INT = -(2**63)
"""An int column's None."""

ABSENT: Any = object()
"""A field the row did not have (how a column stores its absence)."""

MAX_SHARED = 4096
"""Distinct texts a column shares between rows; past it (a text unique to each row, such as a
``parent`` key) texts are kept as they come."""

_INT, _NONE, _STR = frozenset({int}), type(None), str
_NUMBERS = frozenset({int, float, bool})
_INT_NONE, _FLOAT_NONE, _STR_NONE = frozenset({int, _NONE}), frozenset({float, _NONE}), frozenset({_STR, _NONE})
_NONE_ONLY, _LIST_ONLY, _STR_ONLY = frozenset({_NONE}), frozenset({list}), frozenset({str})
_NO_INTS, _NANS = array("q", [NO_INT]), array("d", [math.nan])  # one None, to repeat


class Column:
    """One field of one label's rows."""

    __slots__ = ("values", "kind", "first", "absent", "numeric", "types", "_shared", "_last")

    def __init__(self, kind: str, absent_before: int) -> None:
        self.kind = kind  # "q", "d" or "o"
        self.values: Any = array(kind) if kind != "o" else []
        self.first = absent_before  # rows before the first that had this field
        self.absent: set[int] = set()  # later rows without it
        self.numeric = kind != "o"  # whether any value is a number (an "o" column's may be)
        self.types: set[type] = set()  # the type of every value added (what the file's check reads)
        self._shared: dict[str, str] | None = {}  # texts seen, to share one object between rows
        self._last: Any = ABSENT
        if absent_before:
            self.values.extend([self._pad()] * absent_before)

    def _pad(self) -> Any:
        return NO_INT if self.kind == "q" else math.nan if self.kind == "d" else ABSENT

    def skip(self, rows: int) -> None:
        """``rows`` rows without this field."""
        n = len(self.values)
        self.absent.update(range(n, n + rows))
        self.values.extend([self._pad()] * rows)

    def extend(self, values: Sequence[Any]) -> None:
        """Add a batch of values, at C speed where their types allow (see the module doc)."""
        kind, types = self.kind, set(map(type, values))
        self.types |= types
        if types == _NONE_ONLY and kind != "o":  # a field null on every row (an error, a parent)
            self.values.extend((_NO_INTS if kind == "q" else _NANS) * len(values))
            return
        if kind == "q" and types <= _INT_NONE and NO_INT not in values:
            try:  # numpy converts 3x faster than array.extend, and refuses an int beyond 64 bits before adding any
                ints = np.array(values if _NONE not in types else [NO_INT if v is None else v for v in values],
                                dtype=np.int64)
                self.values.frombytes(ints.data.cast("B"))
                return
            except OverflowError:  # an int beyond 64 bits: the careful way
                pass
        elif kind == "d" and types <= _FLOAT_NONE:
            self.values.fromlist(list(values) if _NONE not in types else [math.nan if v is None else v for v in values])
            return
        elif kind == "o":
            self._extend_objects(values, types)
            return
        for v in values:
            self.add(v)

    def _extend_objects(self, values: Sequence[Any], types: set[type]) -> None:
        """An object column's batch: texts shared through a dict while there are few distinct
        ones, lists of texts by runs of equal neighbours; anything else kept as it comes."""
        if types & _NUMBERS or any(issubclass(t, np.number) for t in types):
            self.numeric = True
        shared = self._shared
        if shared is not None and types <= _STR_NONE:
            if len(shared) < MAX_SHARED:
                if values and values.count(values[0]) == len(values):  # one text on every row (a device): hashed once
                    self.values.extend([shared.setdefault(values[0], values[0])] * len(values))
                else:
                    self.values.extend(map(shared.setdefault, values, values))
                self._last = self.values[-1]
                return
            self._shared = None
        if types <= {_STR, _NONE, list} and _all_texts(values, types):
            out, last = self.values, self._last
            for first, run in groupby(values):  # equal texts and lists of texts are equal exactly
                same = len(list(run))
                if type(first) is type(last) and first == last:
                    first = last
                out.extend([first] * same)
                last = first
            self._last = last
            return
        self.values.extend(values)
        self._last = ABSENT

    def add(self, value: Any) -> None:
        """Add any value, changing the column's kind where it must: an int column takes None as
        :data:`NO_INT` and a float column as NaN; a value of another type (a float among ints, an
        int among floats: each must read back as it was) makes the column one of objects."""
        kind = self.kind
        if value is ABSENT:
            self.skip(1)
            return
        self.types.add(type(value))
        if kind == "q":
            if value is None:
                self.values.append(NO_INT)
                return
            if type(value) is int and NO_INT < value < 2**63:
                self.values.append(value)
                return
            self._to_objects()
        elif kind == "d":
            if value is None:
                self.values.append(math.nan)
                return
            if type(value) is float:
                self.values.append(value)
                return
            self._to_objects()
        if type(value) in (int, float) or isinstance(value, np.number):
            self.numeric = True
        last = self._last
        if value is not last and _texts(value) and type(value) is type(last) and value == last:
            self.values.append(last)  # equal neighbours share one object
        else:
            self._last = value
            self.values.append(value)

    def null(self, i: int) -> None:
        """Row ``i``'s value becomes None (a damaged value read leniently)."""
        self.values[i] = NO_INT if self.kind == "q" else math.nan if self.kind == "d" else None

    def _to_objects(self) -> None:
        """Numbers to objects (a field that changed type between rows)."""
        old = self.get_all()
        self.kind = "o"
        self.numeric = True
        self._last = ABSENT
        self.values = old

    def get(self, i: int) -> Any:
        """Row ``i``'s value (None for None; :data:`ABSENT` for a field the row did not have)."""
        if i < self.first or i in self.absent:
            return ABSENT
        v = self.values[i]
        if self.kind == "q":
            return None if v == NO_INT else v
        if self.kind == "d":
            return None if v != v else v
        return v

    def get_all(self) -> list[Any]:
        """Every row's value, as :meth:`get` gives it."""
        kind, values = self.kind, self.values
        if kind == "o":
            out = list(values)
        elif not len(values):
            out = []
        else:  # None where the marker is, at numpy's speed (a column of None: a field null on every row)
            raw = np.frombuffer(values, dtype=np.int64 if kind == "q" else np.float64)
            missing = raw == NO_INT if kind == "q" else np.isnan(raw)
            if not missing.any():
                out = values.tolist()
            elif missing.all():
                out = [None] * len(values)
            else:
                held = raw.astype(object)  # Python ints or floats, as tolist gives them
                held[missing] = None
                out = held.tolist()
        for i in range(self.first):
            out[i] = ABSENT
        for i in self.absent:
            out[i] = ABSENT
        return out

    def nulls(self) -> np.ndarray:
        """A bool per row: whether its value is None or it lacks the field (what :meth:`get_all`
        gives as None or :data:`ABSENT`), at numpy's speed for numbers and C speed for objects."""
        kind, values = self.kind, self.values
        if kind == "o":
            out = np.fromiter(map(is_, values, repeat(None)), dtype=bool, count=len(values))
        elif not len(values):
            return np.zeros(0, dtype=bool)
        elif kind == "q":
            out = np.frombuffer(values, dtype=np.int64) == NO_INT
        else:
            out = np.isnan(np.frombuffer(values, dtype=np.float64))
        out[: self.first] = True
        if self.absent:
            out[np.fromiter(self.absent, dtype=np.int64, count=len(self.absent))] = True
        return out

    def numbers(self) -> np.ndarray:
        """The values as float64, NaN where a row has no number (None, absent, text, a bool)."""
        if self.kind == "d":
            return np.frombuffer(self.values, dtype=np.float64) if len(self.values) else np.empty(0)
        if self.kind == "q":
            ints = np.frombuffer(self.values, dtype=np.int64) if len(self.values) else np.empty(0, np.int64)
            out = ints.astype(np.float64)
            out[ints == NO_INT] = math.nan
            return out
        if not self.numeric:
            return np.full(len(self.values), math.nan)
        return np.array([v if type(v) in (int, float) or isinstance(v, np.number) else math.nan for v in self.values],
                        dtype=np.float64)  # a numpy scalar in a row made in memory is a number too


def _texts(value: Any) -> bool:
    """Whether ``value`` is a text, None, or a list of texts: what equality compares exactly
    (``1 == True == 1.0`` and ``0.0 == -0.0``: numbers are never shared as equal)."""
    kind = type(value)
    return kind is str or value is None or (kind is list and all(type(x) is str for x in value))


def _all_texts(values: Sequence[Any], types: set[type]) -> bool:
    """Whether every value is :func:`_texts`; a batch of lists only (a row's notes) checked by the
    types of their items, at C speed."""
    if types == _LIST_ONLY:
        return set(map(type, chain.from_iterable(values))) <= _STR_ONLY
    return all(map(_texts, values))


def column_kind(values: Sequence[Any]) -> str:
    """A new column's kind, from its first value that is not None: ``q`` for an int (or none but
    None: an int column reads None back as None), ``d`` for a float, else ``o``."""
    first = next((v for v in values if v is not None), None)
    return "q" if first is None or type(first) is int else "d" if type(first) is float else "o"


def sorted_numbers(col: Column, keep: np.ndarray | None = None) -> list[Any] | np.ndarray:
    """A column's numbers (None, text and bools left out), sorted: an int64 or float64 array for a
    column of numbers, a list (ints staying ints) for one of mixed values; with ``keep`` (a bool
    per row), those of the rows it marks only."""
    if col.kind == "o":
        if not col.numeric:
            return []
        marks = keep if keep is not None else np.ones(len(col.values), dtype=bool)
        return sorted(v for v, k in zip(col.values, marks, strict=True) if k and type(v) in (int, float))
    if not len(col.values):
        return []
    if col.kind == "d":
        a = np.frombuffer(col.values, dtype=np.float64)
        return np.sort(a[~np.isnan(a) if keep is None else ~np.isnan(a) & keep])
    i = np.frombuffer(col.values, dtype=np.int64)
    return np.sort(i[(i != NO_INT) if keep is None else (i != NO_INT) & keep])
