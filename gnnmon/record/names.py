"""Your names beside gnnmon's on a row: a marker carried on rows (``run.mark``) and a field you set
on a row (``gnnmon.current_row().fields``, ``with memory_scope() as fields``) must not take the name
of one of gnnmon's own fields, which the row would then hold in its place (or lose to it): each is
refused at the call, with the clash named.

gnnmon's own fields are those :mod:`gnnmon.figures` declares (a figure, or a member of a declared
family: ``phase_<name>_s``, ``num_nodes__<type>``, ``<figure>_source``, ...), the names that start
a measured figure (``mem_``, ``rss_``, ``phase_``, ``gc_``: room for figures to come), and those
of the file's lines: the line's ``type``, a job's ``rank`` and ``same`` (:mod:`gnnmon.data.expand`).
Every other name is yours, and
the sinks keep it apart from their own series (see :mod:`gnnmon.integrations.metrics`)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, MutableMapping
from typing import Any

from gnnmon.data.format import SAME_FIELD
from gnnmon.fields import ROW_FIELD_PREFIXES
from gnnmon.figures import figure_of

LINE_FIELDS = ("type", "rank", SAME_FIELD)
"""Fields a run file's lines use besides the figures: the line's kind, a job's rank, and the set of
repeated fields a row line names (:mod:`gnnmon.data.expand`)."""


def clash(name: Any) -> str | None:
    """What of gnnmon's a row field named ``name`` would take the place of, in words; None when the
    name is free (yours)."""
    if not isinstance(name, str):
        return f"no field: a field's name is a string, not {type(name).__name__}"
    if name in LINE_FIELDS:
        return {"type": "the kind of line a run file records", "rank": "the rank a job gives each row"}.get(
            name, "the set of repeated fields a run file's row line names")
    figure = figure_of(name)
    if figure is not None:
        what = figure.meaning.split(" (")[0]
        return f"gnnmon's own field {figure.name!r} ({what})" if figure.name == name else \
            f"gnnmon's own fields {figure.name!r} ({what})"
    prefix = next((p for p in ROW_FIELD_PREFIXES if name.startswith(p)), None)
    if prefix is not None:
        return f"gnnmon's own fields: names starting {prefix!r} are its measured figures'"
    return None


def check_name(name: Any, what: str) -> None:
    """Refuse ``name`` for ``what`` (``"marker kind"``, ``"a row's field"``) if it is gnnmon's."""
    why = clash(name)
    if why is not None:
        raise ValueError(f"{what} {name!r} would shadow {why}; pick another name (docs/fields.md lists gnnmon's)")


class RowFields(MutableMapping[str, Any]):
    """A row's fields as you see them (``current_row().fields``, a scope's ``as fields``): every field
    is read as it is now; a field of yours is set or deleted as in a dict; one of gnnmon's is
    refused (:func:`check_name`), before the row holds anything of it."""

    __slots__ = ("_fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def __setitem__(self, key: str, value: Any) -> None:
        check_name(key, "a row's field")
        self._fields[key] = value

    def __delitem__(self, key: str) -> None:
        check_name(key, "a row's field")
        del self._fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def update(self, other: Any = (), /, **more: Any) -> None:
        """Set several fields: each name checked first, so a refused one sets none of them."""
        items = dict(other, **more)
        for key in items:
            check_name(key, "a row's field")
        self._fields.update(items)

    def __contains__(self, key: object) -> bool:
        return key in self._fields

    def get(self, key: str, default: Any = None) -> Any:
        return self._fields.get(key, default)

    def copy(self) -> dict[str, Any]:
        """The fields now, as a dict of their own."""
        return dict(self._fields)

    def __eq__(self, other: object) -> bool:
        return self._fields == (other._fields if isinstance(other, RowFields) else other)

    def __repr__(self) -> str:
        return repr(self._fields)


class RowView:
    """The row being filled, as :func:`gnnmon.current_row` gives it: its ``fields``
    (:class:`RowFields`), ``note(text)``, ``key``; anything else is the row's own."""

    __slots__ = ("_row", "fields")

    def __init__(self, row: Any, fields: RowFields) -> None:
        self._row, self.fields = row, fields

    def __getattr__(self, name: str) -> Any:
        return getattr(self._row, name)

    def __repr__(self) -> str:
        return f"<gnnmon row {self._row.key}>"


def warn_late_mark(state: str, kind: str, value: Any, path: Any) -> None:
    """A marker set on a stopped run: no row will carry it and its file is closed; say so."""
    if state in ("stopping", "stopped"):
        where = f" and {path} is closed" if path else ""
        warnings.warn(f"run.mark({kind!r}, {value!r}) on a stopped run: no row will carry it{where}; it is kept "
                      f"in run.markers only (mark before the rows it describes)", UserWarning, 3)
