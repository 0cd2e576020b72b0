"""Rows of a version 1 run file made whole as it is read: the ``same`` lines its writer declared
(``{"type": "same", "id": 3, "keys": [...], "alias": {...}, "fields": {...}}``: what repeated on
rows, said once) put back onto every row that names one (``"same": 3``), its fields in the order
they were recorded; a damaged or missing declaration leaves its rows with their own fields.
Version 2 writes every row whole; its files have no ``same`` lines."""

from __future__ import annotations

from typing import Any

from gnnmon.data.format import ROW, SAME_FIELD


class Expander:
    """Reads ``same`` lines and puts their fields back onto the rows that name them, each row's
    fields in the order they were recorded."""

    __slots__ = ("_sets",)

    def __init__(self) -> None:
        # id -> (the row as a template: every key in order, the set's values; its lists; its aliases)
        self._sets: dict[Any, tuple[dict[str, Any], list[str], list[tuple[str, str]]]] = {}

    def declare(self, line: dict[str, Any]) -> None:
        """Take a ``same`` line (a later one with the same id replaces it; a damaged one declares
        nothing, so that the rows naming it say so)."""
        keys, fields, alias = line.get("keys"), line.get("fields"), line.get("alias", {})
        ident = line.get("id")
        if type(ident) is not int:
            return
        if not (type(keys) is list and all(type(k) is str for k in keys) and type(fields) is dict
                and type(alias) is dict):
            self._sets.pop(ident, None)
            return
        template: dict[str, Any] = {"type": ROW}
        for key in keys:
            template[key] = fields.get(key)
        lists = [k for k, v in template.items() if type(v) is list]
        pairs = [(k, v) for k, v in alias.items() if type(v) is str]
        self._sets[ident] = (template, lists, pairs[::-1])  # a source that is an alias itself comes back first

    def expand(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The row whole: the set it names, its own fields in their places; None when it names a
        set no line declared."""
        ident = row.pop(SAME_FIELD)
        found = self._sets.get(ident) if type(ident) is int else None
        if found is None:
            return None
        template, lists, alias = found
        whole = template.copy()
        whole.update(row)  # a key already in the template keeps its place
        for key in lists:
            if key not in row:  # a row's lists are its own
                whole[key] = list(whole[key])
        for key, source in alias:
            if key not in row and source in whole:
                whole[key] = whole[source]
        return whole
