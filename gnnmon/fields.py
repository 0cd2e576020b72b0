"""Names every stage shares about a row, and the helpers that fill and name rows (each figure's
name, unit and meaning are declared in :mod:`gnnmon.figures`). Imports nothing from gnnmon."""

from __future__ import annotations

from typing import Any

ROW_FIELD_PREFIXES = ("mem_", "rss_", "phase_", "gc_")
"""Prefixes of measured figures; a carried marker may not start with one (nor take the name of a
row's identity field: ``gnnmon.figures.IDENTITY_FIELDS``)."""

HOST_BACKEND = "cpu"
"""The backend whose device memory is the host process's RSS (every other backend's rows hold an
accelerator's memory); the device kinds themselves are in ``gnnmon.devices.registry``."""

J_PER_KWH = 3.6e6
"""Joules in one kilowatt-hour."""

_NOTES: dict[tuple[tuple[str, ...], str], tuple[str, ...]] = {}
"""Notes tuples made so far, shared between rows: a row whose fields hold only plain values and a
shared tuple of strings is not tracked by the garbage collector."""


def add_note(fields: dict[str, Any], text: str) -> None:
    """Add ``text`` to a row's ``notes`` (once): why a figure is missing or how it was made.
    ``notes`` is a tuple while the row is being filled (shared, untracked by the GC); it reads
    back from the file as a list."""
    notes = fields.get("notes") or ()
    if text in notes:
        return
    key = (tuple(notes), text)
    made = _NOTES.get(key)
    if made is None:
        made = key[0] + (text,)
        if len(_NOTES) < 1024:
            _NOTES[key] = made
    fields["notes"] = made


def is_number(value: Any) -> bool:
    """True for an int or float figure (not a bool, not None)."""
    return type(value) in (int, float) or (isinstance(value, (int, float)) and not isinstance(value, bool))


def row_key(row: Any) -> str:
    """``label#index``: how a row is named by its children's ``parent`` and by GC events."""
    return f"{row['label']}#{row['index']}"


SINK_PARTS = frozenset({"sampled", "gnnmon", "timeline"})
"""The first parts of the keys the sinks and exports name their own series by (``sampled/...``
in MLflow and W&B, ``gnnmon/rows`` in W&B's summary and ``gnnmon`` in its config, ``timeline/...``
in TensorBoard): a label (or config key) of yours never takes one (:func:`own_part`)."""


def own_part(name: str) -> str:
    """``name`` (a label, a config key) as the first part of a sink's key, kept apart from the
    sinks' own (:data:`SINK_PARTS`): one of those, or one followed by underscores, gets one more
    underscore (``sampled`` -> ``sampled_``, ``sampled_`` -> ``sampled__``), so that no name of
    yours is ever a sink's own and no two of yours share one; any other name stays as it is. Only
    the part before a ``/`` counts (``sampled/x`` -> ``sampled_/x``)."""
    head, sep, rest = name.partition("/")
    return head + "_" + sep + rest if head.rstrip("_") in SINK_PARTS else name
