"""What repeats on every row, said once in a run file and read back onto every row.

A row's sources (``*_source``), notes, device, backend, its fields that are null, its figures
that are zero, and the figures that equal another of the same row (a CPU row's ``mem_*`` are its
``rss_*``; its ``device_s`` is its ``wall_s``) are the same on row after row. :class:`Compactor`
writes them as a ``same`` line when a set of them first appears (``{"type": "same", "id": 3,
"keys": [...], "alias": {"mem_start_bytes": "rss_start_bytes"}, "fields": {...}}``: the row's keys
in their order, the fields equal to another, the fields said once) and each row that has exactly
that set as ``"same": 3`` beside its own fields. :class:`~gnnmon.data.expand.Expander` puts them
back onto each row as the file is read, so that every reader (``gnnmon.load``, ``iter_rows``, the
CLI) sees the row as it was recorded; a file without ``same`` lines (any older one) reads as it
always did.

The compactor keeps at most :data:`MAX_SETS` sets (a run whose notes differ on every row writes
those rows whole): its memory is flat however long the run. A writer that loses lines (a full
disk) calls :meth:`Compactor.forget`, so that the sets are declared again before rows use them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gnnmon.data.format import ROW, SAME, SAME_FIELD, encode, typed_line
from gnnmon.figures import figure_of

MAX_SETS = 256
"""Distinct sets of repeated fields a writer declares; rows whose set would be one more are written whole."""

REPEATED = frozenset({"notes", "device", "backend", "device_source", "error"})
"""Fields said once when their value repeats (besides ``*_source``, nulls and zeros)."""

ALIASES = (("mem_start_bytes", "rss_start_bytes"), ("mem_peak_bytes", "rss_peak_bytes"),
           ("mem_end_bytes", "rss_end_bytes"), ("device_s", "wall_s"), ("rss_peak_bytes", "rss_start_bytes"),
           ("rss_end_bytes", "rss_start_bytes"))
"""(field, the field it often equals on the same row): written once, the other read back from it."""


KEPT = frozenset({"label", "index", "t_start_ns", "t_end_ns"})
"""Fields every row line keeps itself: what names the row and places it in time."""


ALWAYS, ZERO, OWN = 0, 1, 2
"""How a field is written: said once whatever its value; said once when null or zero (a figure of
gnnmon's); said once when null (a field of yours, a marker: its zero is a value)."""


def _kind(key: str) -> int:
    if key in KEPT:
        return -1  # never said once
    if key in REPEATED or key.endswith("_source"):
        return ALWAYS
    return ZERO if figure_of(key) is not None else OWN


_NUMBERS = (int, float)


class Compactor:
    """Turns rows into a run file's lines with what repeats said once (see the module doc)."""

    __slots__ = ("_ids", "_plans")

    def __init__(self) -> None:
        self._ids: dict[Any, int] = {}  # a set's key -> its id, for the sets declared in the file
        # a row's keys in order -> (those said once whatever their value, those said once when zero)
        self._plans: dict[tuple[str, ...], tuple[list[str], frozenset[str]]] = {}

    def _plan(self, keys: tuple[str, ...]) -> tuple[list[str], frozenset[str]]:
        plan = self._plans.get(keys)
        if plan is None:
            kinds = {key: _kind(key) for key in keys}
            plan = ([k for k in keys if kinds[k] == ALWAYS], frozenset(k for k in keys if kinds[k] == ZERO))
            if len(self._plans) < MAX_SETS:
                self._plans[keys] = plan
        return plan

    def lines(self, rows: Iterable[dict[str, Any]]) -> list[bytes]:
        """The lines of ``rows``, in order, each preceded by the ``same`` line of a set it is
        the first to use."""
        out: list[bytes] = []
        ids = self._ids
        for row in rows:
            keys = tuple(row)
            always, zero = self._plan(keys)
            own = row.copy()
            same = {k: own.pop(k) for k in always}
            for k in [k for k, v in own.items() if v is None or type(v) in _NUMBERS and v == 0]:
                if own[k] is None and k not in KEPT or k in zero:  # nulls, and zeros of gnnmon's figures
                    same[k] = own.pop(k)
            alias = {}
            for key, source in ALIASES:
                value = own.get(key)
                if value is not None and source in own and own[source] == value and type(own[source]) is type(value):
                    alias[key] = source
                    del own[key]
            said = encode(same)  # as the file says it: 0 and 0.0 apart, lists and all
            set_key = (keys, said, tuple(alias.items()))
            found = ids.get(set_key)
            if found is None:
                if len(ids) >= MAX_SETS or SAME_FIELD in row:
                    out.append(typed_line(ROW, encode(row)))
                    continue
                found = ids[set_key] = len(ids)
                head = {"type": SAME, "id": found, "keys": list(row)}
                if alias:
                    head["alias"] = alias
                out.append(encode(head)[:-1] + b',"fields":' + said + b"}")
            own[SAME_FIELD] = found
            out.append(typed_line(ROW, encode(own)))
        return out

    def forget(self) -> None:
        """Declare every set again before a row uses it (lines written may have been lost)."""
        self._ids.clear()
