"""Rows made whole as a file is read (gnnmon/data/expand.py), from planted ``same`` lines: a row
naming a declared set gets the set's fields back, every key in the order recorded, its own values
in their places; each row gets lists of its own; aliases (chained too) read from their source
unless the row has its own value; a set no line declared, or one a damaged line re-declared,
expands to None; a later declaration replaces an earlier one. A real version 1 file read back
whole: tests/data/test_whole_lines.py."""

from __future__ import annotations

import pytest

from gnnmon.data.expand import Expander
from gnnmon.data.format import ROW, SAME, SAME_FIELD

DECLARED = {"type": SAME, "id": 3, "keys": ["label", "index", "device", "wall_s", "notes", "gc_pause_s", "backend"],
            "fields": {"device": "cpu", "notes": ["warm", "gc"], "gc_pause_s": 0.0, "backend": None}}


def expander(*lines: dict) -> Expander:
    out = Expander()
    for line in lines:
        out.declare(line)
    return out


def test_a_row_naming_a_declared_set_gets_its_fields_back_in_the_order_recorded():
    row = {"type": ROW, "label": "step", "index": 4, "wall_s": 0.5, SAME_FIELD: 3}
    whole = expander(DECLARED).expand(row)
    assert whole == {"type": ROW, "label": "step", "index": 4, "device": "cpu", "wall_s": 0.5,
                     "notes": ["warm", "gc"], "gc_pause_s": 0.0, "backend": None}
    assert list(whole) == ["type", *DECLARED["keys"]]
    assert type(whole["gc_pause_s"]) is float and SAME_FIELD not in row  # the row's own "same" taken off


def test_a_rows_own_value_keeps_its_place_and_a_field_of_its_own_comes_last():
    row = {"type": ROW, "label": "step", "index": 1, "wall_s": 0.5, "device": "cuda:1", "extra": 1, SAME_FIELD: 3}
    whole = expander(DECLARED).expand(row)
    assert whole["device"] == "cuda:1" and list(whole) == ["type", *DECLARED["keys"], "extra"]


def test_each_row_gets_lists_of_its_own():
    ex = expander(DECLARED)
    a = ex.expand({"type": ROW, "label": "s", "index": 0, "wall_s": 1.0, SAME_FIELD: 3})
    b = ex.expand({"type": ROW, "label": "s", "index": 1, "wall_s": 2.0, SAME_FIELD: 3})
    assert a["notes"] == b["notes"] == ["warm", "gc"] and a["notes"] is not b["notes"]
    a["notes"].append("mine")
    c = ex.expand({"type": ROW, "label": "s", "index": 2, "wall_s": 3.0, SAME_FIELD: 3})
    assert b["notes"] == c["notes"] == ["warm", "gc"]  # the set itself unchanged
    own = ["its", "own"]
    d = ex.expand({"type": ROW, "label": "s", "index": 3, "wall_s": 4.0, "notes": own, SAME_FIELD: 3})
    assert d["notes"] is own


ALIASED = {"type": SAME, "id": 0,
           "keys": ["label", "index", "rss_start_bytes", "rss_peak_bytes", "mem_peak_bytes", "wall_s", "device_s"],
           "alias": {"mem_peak_bytes": "rss_peak_bytes", "device_s": "wall_s", "rss_peak_bytes": "rss_start_bytes"},
           "fields": {}}
"""As the writer says them: ``mem_peak_bytes`` is ``rss_peak_bytes``, itself ``rss_start_bytes``."""


def test_aliases_read_from_their_source_chained_too():
    whole = expander(ALIASED).expand({"type": ROW, "label": "s", "index": 0, "rss_start_bytes": 100, "wall_s": 0.25,
                                      SAME_FIELD: 0})
    assert whole == {"type": ROW, "label": "s", "index": 0, "rss_start_bytes": 100, "rss_peak_bytes": 100,
                     "mem_peak_bytes": 100, "wall_s": 0.25, "device_s": 0.25}
    assert list(whole) == ["type", *ALIASED["keys"]]


def test_a_rows_own_value_wins_over_its_alias():
    whole = expander(ALIASED).expand({"type": ROW, "label": "s", "index": 0, "rss_start_bytes": 100,
                                      "rss_peak_bytes": 300, "wall_s": 0.25, "device_s": 0.5, SAME_FIELD: 0})
    assert (whole["rss_peak_bytes"], whole["mem_peak_bytes"], whole["device_s"]) == (300, 300, 0.5)


@pytest.mark.parametrize("ident", [4, "3", None, 3.0, True])
def test_a_row_naming_a_set_no_line_declared_expands_to_none(ident):
    row = {"type": ROW, "label": "s", "index": 0, SAME_FIELD: ident}
    assert expander(DECLARED).expand(row) is None
    assert row == {"type": ROW, "label": "s", "index": 0}  # read without it


@pytest.mark.parametrize("damage", [{"keys": "label"}, {"keys": ["label", 3]}, {"fields": ["cpu"]},
                                    {"alias": ["x"]}, {"keys": None}])
def test_a_damaged_declaration_declares_nothing_and_forgets_the_set_it_would_replace(damage):
    ex = expander(DECLARED, {**DECLARED, **damage})
    assert ex.expand({"type": ROW, "label": "s", "index": 0, SAME_FIELD: 3}) is None


@pytest.mark.parametrize("ident", ["3", None, 3.5])
def test_a_declaration_whose_id_is_no_int_declares_nothing_and_forgets_nothing(ident):
    ex = expander(DECLARED, {**DECLARED, "id": ident, "fields": {"device": "gpu"}})
    assert ex.expand({"type": ROW, "label": "s", "index": 0, SAME_FIELD: 3})["device"] == "cpu"


def test_a_later_declaration_of_an_id_replaces_the_earlier():
    later = {"type": SAME, "id": 3, "keys": ["label", "index", "device"], "fields": {"device": "cuda:0"}}
    ex = expander(DECLARED)
    before = ex.expand({"type": ROW, "label": "s", "index": 0, SAME_FIELD: 3})
    ex.declare(later)
    after = ex.expand({"type": ROW, "label": "s", "index": 1, SAME_FIELD: 3})
    assert before["device"] == "cpu" and after == {"type": ROW, "label": "s", "index": 1, "device": "cuda:0"}
