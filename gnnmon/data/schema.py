"""What each line of a run file must hold, checked once as the file is read (by
:meth:`gnnmon.data.result.RunResult.read`, what ``gnnmon.load`` and every command use), so that no
report, export or command meets a value of a type it cannot take.

Each kind of line names the fields gnnmon writes and what each must be (:data:`LINES`); a row's
fields are named by their declaration in :mod:`gnnmon.figures` (a text figure a string, a clock
an integer of nanoseconds, any other figure a number); a field not named may hold any JSON value
(a marker of yours, a field you set on a row), except a carried marker's value, which is a string,
a number, a bool or null, as ``run.mark`` takes it. A named field may be null unless it is
required (a row's ``label`` and ``index``, a GC event's time, ...). Numbers are finite and under
2**63 in size: what a file gnnmon wrote holds, and what no figure's sum or unit overflows.

A row's fields are checked by column (:func:`row_damage`), at the speed of the table's arrays:
reading a good file costs no per-value check.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from itertools import groupby
from typing import Any, NamedTuple

import numpy as np

from gnnmon.data.column import ABSENT, NO_INT, Column
from gnnmon.data.format import END, GC, MANIFEST, MARKER, POINT, ROW, SAME, SAMPLE
from gnnmon.data.read import SKIP_HINT, row_lines
from gnnmon.data.table import Table
from gnnmon.errors import ReportFileError
from gnnmon.figures import NANOSECONDS, TEXT, UNITS, figure_of

LIMIT = 2**63
"""Numbers are smaller than this in size (a clock is an integer from 0 up to it)."""


def _integer(v: Any) -> bool:
    return type(v) is int and -LIMIT <= v < LIMIT


def _clock(v: Any) -> bool:
    return type(v) is int and 0 <= v < LIMIT


def _number(v: Any) -> bool:
    return (type(v) is int or type(v) is float) and -LIMIT < v < LIMIT  # NaN is not


def _generation(v: Any) -> bool:
    return type(v) is int and 0 <= v <= 2


def _text(v: Any) -> bool:
    return type(v) is str


def _texts(v: Any) -> bool:
    return type(v) is list and all(type(x) is str for x in v)


def _object(v: Any) -> bool:
    return type(v) is dict


def _flag(v: Any) -> bool:
    return type(v) is bool


def _scalar(v: Any) -> bool:
    return type(v) in (str, bool) or _number(v)


class Expect(NamedTuple):
    """What a field must hold: in words, and as a test of a value (None aside)."""

    what: str
    test: Callable[[Any], bool]


INTEGER = Expect("an integer under 2**63 in size", _integer)
CLOCK = Expect("a time in nanoseconds (an integer from 0 to 2**63)", _clock)
NUMBER = Expect("a finite number under 2**63 in size", _number)
GENERATION = Expect("a GC generation: 0, 1 or 2", _generation)
STRING = Expect("a string", _text)
STRINGS = Expect("a list of strings", _texts)
OBJECT = Expect("an object", _object)
FLAG = Expect("true or false", _flag)
SCALAR = Expect("a string, a number, true or false", _scalar)
UNCARRIED = Expect("false (its value is no string, number or bool a row can carry)", _flag)
KIND = Expect("a string naming the kind of line", _text)


class Field(NamedTuple):
    expect: Expect
    required: bool = False
    """Required: present and not null (a line without it is damaged as a whole)."""


F = Field
LINES: dict[str, dict[str, Field]] = {
    MANIFEST: {"format_version": F(INTEGER), "gnnmon": F(STRING), "torch": F(STRING), "torch_geometric": F(STRING),
               "python": F(STRING), "platform": F(STRING), "host": F(STRING), "pid": F(INTEGER),
               "start_time": F(STRING), "start_ns": F(CLOCK), "devices": F(OBJECT), "gc_frozen": F(INTEGER),
               "gc_tracked": F(INTEGER),
               "options": F(OBJECT), "config": F(OBJECT), "distributed": F(OBJECT), "file": F(STRING),
               "host_memory": F(OBJECT), "sampled": F(OBJECT)},
    GC: {"generation": F(GENERATION, True), "t_start_ns": F(CLOCK, True), "duration_s": F(NUMBER, True),
         "collected": F(INTEGER), "uncollectable": F(INTEGER), "requested": F(FLAG), "reason": F(STRING),
         "row": F(STRING), "phase": F(STRING), "thread": F(STRING)},
    SAMPLE: {"t_ns": F(CLOCK, True), "children": F(INTEGER)},
    POINT: {"key": F(STRING, True), "t_ns": F(CLOCK, True), "value": F(NUMBER, True), "err_ns": F(NUMBER),
            "step": F(FLAG)},
    MARKER: {"kind": F(STRING, True), "t_ns": F(CLOCK, True), "carry": F(FLAG)},
    END: {"rows": F(INTEGER), "end_ns": F(CLOCK), "ended": F(STRING), "sampler": F(OBJECT),
          "children_forked": F(INTEGER), "signal": F(STRING), "steps": F(OBJECT),
          "host_memory": F(OBJECT), "torch_threads": F(INTEGER)},
    SAME: {"id": F(INTEGER, True), "keys": F(STRINGS, True), "fields": F(OBJECT, True), "alias": F(OBJECT)},
}
"""Each kind of line's named fields (a sample's fields named with a unit's suffix are numbers too)."""

DISTRIBUTED: dict[str, Field] = {"rank": F(INTEGER, True), "world_size": F(INTEGER), "local_rank": F(INTEGER),
                                 "backend": F(STRING), "source": F(STRING), "host": F(STRING),
                                 "job_path": F(STRING), "clock_offset_ns": F(INTEGER)}
"""The manifest's ``distributed`` entry (a rank of a job)."""

_SUFFIXES = tuple(unit.suffix for unit in UNITS)


class Damage(NamedTuple):
    """A value a line must not hold: where (``field``: ``distributed.rank`` inside the manifest's
    entry), what it holds and what it must hold (``required``: the line cannot be read without it)."""

    field: str
    value: Any
    expect: Expect
    required: bool

    def words(self) -> str:
        held = "missing" if self.value is ABSENT else f"{_describe(self.value)}, not {self.expect.what}"
        return f"field {self.field!r} is {held}"


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    kind = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{kind} ({text[:40]}{'…' if len(text) > 40 else ''})" if type(value) is not bool else str(value).lower()


def line_damage(kind: str, obj: Mapping[str, Any]) -> list[Damage]:
    """What a line of ``kind`` (not a row: :func:`row_damage`) holds that it must not."""
    fields = LINES.get(kind)
    if fields is None:
        return []
    out = _damage(obj, fields, "")
    if kind == SAMPLE:
        out += [Damage(k, v, NUMBER, False) for k, v in obj.items()
                if v is not None and k.endswith(_SUFFIXES) and not _number(v)]
    elif kind == MARKER and obj.get("carry", True) is not False and not (obj.get("value") is None
                                                                          or _scalar(obj.get("value"))):
        if obj.get("carry") is None:  # carried by default: a value rows cannot carry says it is not
            out.append(Damage("carry", obj.get("carry", ABSENT), UNCARRIED, False))
        else:
            out.append(Damage("value", obj.get("value"), SCALAR, False))
    elif kind == MANIFEST and type(obj.get("distributed")) is dict:
        out += _damage(obj["distributed"], DISTRIBUTED, "distributed.")
    return out


def _damage(obj: Mapping[str, Any], fields: Mapping[str, Field], prefix: str) -> list[Damage]:
    out = []
    for name, (expect, required) in fields.items():
        value = obj.get(name, ABSENT)
        if value is ABSENT or value is None:
            if required:
                out.append(Damage(prefix + name, value, expect, True))
        elif not expect.test(value):
            out.append(Damage(prefix + name, value, expect, required))
    return out


def repair(obj: dict[str, Any], damage: list[Damage]) -> bool:
    """Null ``obj``'s damaged fields (an entry whose required field is damaged: the entry); False
    when a field the line requires is damaged (the line cannot be kept)."""
    for d in damage:
        head, _, rest = d.field.partition(".")
        if not rest and d.required:
            return False
        if rest and not d.required:
            obj[head] = {**obj[head], rest: None}
        else:
            obj[head] = False if d.expect is UNCARRIED else None
    return True


WHOSE = {ROW: "a row's", GC: "a GC event's", SAMPLE: "a sample's", POINT: "an energy counter's point's",
         MARKER: "a marker's", END: "the end line's", MANIFEST: "the manifest's",
         SAME: "a set of repeated fields'"}

def _whose(kind: Any) -> str:
    return WHOSE.get(kind, "a line's") if isinstance(kind, str) else "a line's"


MAX_WARNINGS = 10
"""Damaged values a lenient read names one by one; the rest are counted in one warning."""


class Damaged:
    """What one read of a file does with the damage it meets: strict, refuses the file at the
    first damaged line (:class:`~gnnmon.errors.ReportFileError`, one line naming the line and
    the field); lenient, nulls the value (skips a line missing what it requires) and warns."""

    def __init__(self, path: str | os.PathLike[str], strict: bool) -> None:
        self.path, self.strict = path, strict
        self.first: tuple[int, Any, Damage] | None = None
        self.stop = False  # strict, and damage found: read no further
        self.warned = 0
        self.unnamed = 0

    def line(self, n: int, kind: Any, obj: dict[str, Any], damage: list[Damage]) -> bool:
        """Line ``n`` (not a row) holds ``damage``: whether it is kept (repaired)."""
        if self.strict:
            self.first, self.stop = (n, kind, damage[0]), True
            return False
        kept = repair(obj, damage)
        for d in damage:
            self._warn(n, kind, d, "read as null" if kept else "skipped the line")
        return kept

    def rows(self, table: Table) -> None:
        """Check the rows read (by column): refuse the first damaged one, or null each damaged value."""
        damage = row_damage(table)
        if self.strict:
            if damage:
                seq, d = damage[0]
                self._refuse(row_lines(self.path, {seq}).get(seq, "?"), ROW, d)
            if self.first is not None:
                self._refuse(*self.first)
            return
        if damage:
            named = {seq for seq, _ in damage[: MAX_WARNINGS - self.warned]} if self.warned < MAX_WARNINGS else set()
            lines = row_lines(self.path, named) if named else {}
            for seq, d in damage:
                self._warn(lines.get(seq, "?"), ROW, d, "read as null")
            null_damage(table, damage)
        if self.unnamed:
            warnings.warn(f"{self.path}: and {self.unnamed} more damaged value(s) read as null or line(s) skipped",
                          RuntimeWarning, 4)

    def _refuse(self, n: Any, kind: Any, d: Damage) -> None:
        raise ReportFileError(f"{self.path}:{n}: {_whose(kind)} {d.words()}; read past damaged "
                              f"values with {SKIP_HINT}")

    def _warn(self, n: Any, kind: Any, d: Damage, what: str) -> None:
        if self.warned >= MAX_WARNINGS:
            self.unnamed += 1
            return
        self.warned += 1
        warnings.warn(f"{self.path}:{n}: {_whose(kind)} {d.words()}: {what}", RuntimeWarning, 5)


# -- rows, by column ---------------------------------------------------------------------------

_ROW_FIELDS: dict[str, Expect | None] = {"label": STRING, "index": INTEGER, "notes": STRINGS, "rank": INTEGER}


def row_expect(field: str) -> Expect | None:
    """What a row's ``field`` must hold (by its declaration in :mod:`gnnmon.figures`); None for a
    field gnnmon does not declare."""
    known = _ROW_FIELDS.get(field, ABSENT)
    if known is ABSENT:
        figure = figure_of(field)
        unit = None if figure is None else figure.unit
        known = None if unit is None else STRING if unit is TEXT else CLOCK if unit is NANOSECONDS else NUMBER
        if len(_ROW_FIELDS) < 4096:
            _ROW_FIELDS[field] = known
    return known


def row_damage(table: Table) -> list[tuple[int, Damage]]:
    """Every damaged value of the table's rows: ``(the row's position in the table, the damage)``,
    in the order of the rows. A column whose kind says its values are right is not read value by
    value (see the module doc)."""
    out: list[tuple[int, Damage]] = []
    for part in table.parts.values():
        for name, col in part.cols.items():
            expect = row_expect(name)
            if expect is None:
                continue
            for i in _bad(col, expect):
                out.append((int(part.seq[i]), Damage(name, col.get(i), expect, False)))
    out.sort(key=lambda t: t[0])
    return out


def null_damage(table: Table, damage: list[tuple[int, Damage]]) -> None:
    """Set each damaged value of the table's rows to None."""
    by_seq = {}
    for part in table.parts.values():
        if damage:
            by_seq.update({int(s): (part, i) for i, s in enumerate(part.seq)})
    for seq, d in damage:
        part, i = by_seq[seq]
        part.cols[d.field].null(i)


_TEXTY: dict[Expect, set[type]] = {STRING: {str}, STRINGS: {list}}


def _bad(col: Column, expect: Expect) -> list[int]:
    """Positions of ``col`` whose value fails ``expect`` (None and absent rows pass)."""
    kind, values = col.kind, col.values
    if kind == "q":
        if not len(values):
            return []
        ints = np.frombuffer(values, dtype=np.int64)
        if expect in (STRING, STRINGS, FLAG, OBJECT):
            return np.flatnonzero(ints != NO_INT).tolist()
        if expect is CLOCK:
            return np.flatnonzero((ints < 0) & (ints != NO_INT)).tolist()
        return []  # an integer, a number: each is one
    if kind == "d":
        if not len(values):
            return []
        floats = np.frombuffer(values, dtype=np.float64)
        if expect is NUMBER:
            return np.flatnonzero(np.abs(floats) >= LIMIT).tolist()  # NaN (None) compares false
        return np.flatnonzero(~np.isnan(floats)).tolist()
    allowed = _TEXTY.get(expect)
    types = col.types - {type(None), type(ABSENT)}
    if allowed is not None and types <= allowed and (expect is STRING or all(
            _texts(v) for v, _ in groupby(values) if type(v) is list)):  # equal neighbours: one list checked
        return []
    if expect is NUMBER and types <= {int, float}:
        numbers = col.numbers()
        return np.flatnonzero(np.abs(numbers) >= LIMIT).tolist()
    test = expect.test
    return [i for i, v in enumerate(values) if v is not None and v is not ABSENT and not test(v)]
