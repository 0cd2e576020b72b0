"""The GC probe: the collections attributed to a row or its children (``gc_collections``,
``gc_pause_s``, ``gc_max_generation``), which the GC log's callback counts on the row as they
happen (:mod:`gnnmon.record.gc_log`); on every row."""

from __future__ import annotations

from typing import Any

_NO_GC = {"gc_collections": 0, "gc_pause_s": 0.0, "gc_max_generation": None}


class GcFigures:
    """Reads nothing as the row opens (the counts start at zero on the row); puts them as it closes."""

    top_level = False

    def open(self, row: Any) -> None:
        return None

    def close(self, row: Any, opened: Any, fields: dict[str, Any], error: BaseException | None) -> None:
        n = row.gc_n
        if not n:
            fields.update(_NO_GC)
            return
        fields["gc_collections"] = n
        fields["gc_pause_s"] = row.gc_ns / 1e9
        fields["gc_max_generation"] = row.gc_gen


def choose(run: Any) -> GcFigures:
    """On every run."""
    return GcFigures()
