"""What each line of a run file must hold (gnnmon/data/schema.py), checked on planted lines: a good
line of each kind has no damage; each damaged field is named with what it holds and what it must
hold (required or not), a missing required field as missing, numbers bounded by 2**63, bools no
numbers; a sample's unit-suffixed fields, a marker's value and carry, the manifest's
``distributed`` entry; :func:`repair` nulls what it can and refuses a line missing what it
requires; a row's fields by their declared unit (:func:`row_expect`), checked by column over a
planted table (:func:`row_damage`) and nulled (:func:`null_damage`); :class:`Damaged` refuses the
first damage strictly naming its line and field, or leniently nulls, skips and warns (ten, then a
count)."""

from __future__ import annotations

import warnings

import pytest

from gnnmon.data.column import ABSENT
from gnnmon.data.format import END, GC, MANIFEST, MARKER, POINT, ROW, SAME, SAMPLE, encode
from gnnmon.data.read import SKIP_HINT
from gnnmon.data.schema import (
    CLOCK,
    FLAG,
    GENERATION,
    INTEGER,
    LIMIT,
    LINES,
    MAX_WARNINGS,
    NUMBER,
    OBJECT,
    SCALAR,
    STRING,
    STRINGS,
    UNCARRIED,
    Damage,
    Damaged,
    line_damage,
    null_damage,
    repair,
    row_damage,
    row_expect,
)
from gnnmon.data.table import Table
from gnnmon.errors import ReportFileError

GOOD = {
    MANIFEST: {"format_version": 1, "gnnmon": "0.2", "pid": 12, "start_ns": 5, "devices": {}, "options": {},
               "config": {"lr": 0.1}, "distributed": {"rank": 1, "world_size": 2, "host": "h", "clock_offset_ns": -3}},
    GC: {"generation": 2, "t_start_ns": 0, "duration_s": 0.5, "collected": 3, "requested": False, "reason": "auto"},
    SAMPLE: {"t_ns": 10, "children": 0, "cpu_pct": 12.5, "rss_bytes": 2**40, "gpu0_w": 100, "mine": "any"},
    POINT: {"key": "gpu0_energy_mj", "t_ns": 10, "value": 1.5e6, "err_ns": 200, "step": True},
    MARKER: {"kind": "epoch", "t_ns": 10, "value": 3},
    END: {"rows": 10, "end_ns": 99, "ended": "exit", "sampler": {"n": 1}, "children_forked": 0},
    SAME: {"id": 0, "keys": ["label", "index"], "fields": {}, "alias": {"device_s": "wall_s"}},
}
"""A good line of each kind (besides rows), every named field well held, some null-free extras."""


def test_every_kind_of_line_but_rows_names_its_fields_and_a_good_line_has_no_damage():
    assert set(LINES) == {MANIFEST, GC, SAMPLE, POINT, MARKER, END, SAME}
    for kind, line in GOOD.items():
        assert line_damage(kind, line) == [], kind
        nulled = {k: v if k in LINES[kind] and LINES[kind][k].required else None for k, v in line.items()}
        assert line_damage(kind, nulled) == [], kind  # null where a field is not required: good
    assert line_damage("a kind of the future", {"t_ns": "whenever"}) == []  # nothing named: nothing to check


@pytest.mark.parametrize("kind, field, value, expect, required", [
    (GC, "generation", 3, GENERATION, True),
    (GC, "generation", True, GENERATION, True),
    (GC, "t_start_ns", -1, CLOCK, True),
    (GC, "t_start_ns", 1.0, CLOCK, True),
    (GC, "t_start_ns", LIMIT, CLOCK, True),
    (GC, "duration_s", "0.5", NUMBER, True),
    (GC, "duration_s", True, NUMBER, True),  # a bool is no number
    (GC, "duration_s", 1e300, NUMBER, True),
    (GC, "duration_s", -float(LIMIT), NUMBER, True),
    (GC, "collected", 2.0, INTEGER, False),
    (GC, "collected", LIMIT, INTEGER, False),
    (GC, "requested", 1, FLAG, False),
    (GC, "reason", ["auto"], STRING, False),
    (POINT, "key", 0, STRING, True),
    (POINT, "value", [1], NUMBER, True),
    (POINT, "step", "yes", FLAG, False),
    (MARKER, "kind", None, STRING, True),
    (END, "sampler", [], OBJECT, False),
    (SAME, "keys", ["label", 3], STRINGS, True),
    (SAME, "fields", "x", OBJECT, True),
    (MANIFEST, "config", ["lr"], OBJECT, False),
])
def test_a_damaged_field_is_named_with_what_it_holds_and_what_it_must_hold(kind, field, value, expect, required):
    line = {**GOOD[kind], field: value}
    assert line_damage(kind, line) == [Damage(field, value, expect, required)]
    del line[field]
    assert line_damage(kind, line) == ([Damage(field, ABSENT, expect, True)] if required else [])


def test_numbers_just_inside_the_bounds_are_good():
    for value in (LIMIT - 1, -LIMIT, 0):
        assert line_damage(GC, {**GOOD[GC], "collected": value}) == []
    for value in (LIMIT - 1, -LIMIT + 1, 9.2e18, -9.2e18, 0.0):
        assert line_damage(GC, {**GOOD[GC], "duration_s": value}) == []
    assert line_damage(GC, {**GOOD[GC], "duration_s": -LIMIT}) == [Damage("duration_s", -LIMIT, NUMBER, True)]
    assert line_damage(GC, {**GOOD[GC], "t_start_ns": LIMIT - 1}) == []


def test_damage_says_in_words_what_is_held_and_what_must_be():
    words = [d.words() for d in line_damage(GC, {"duration_s": True, "reason": "x" * 60, "collected": None})]
    assert words == ["field 'generation' is missing", "field 't_start_ns' is missing",
                     "field 'duration_s' is true, not a finite number under 2**63 in size"]
    (long,) = line_damage(GC, {**GOOD[GC], "t_start_ns": "x" * 60})
    assert long.words() == f"field 't_start_ns' is a string ('{'x' * 39}…), not {CLOCK.what}"
    (null,) = line_damage(POINT, {**GOOD[POINT], "value": None})
    assert null.words() == "field 'value' is null, not a finite number under 2**63 in size"
    (obj,) = line_damage(END, {**GOOD[END], "rows": {"a": 1}})
    assert obj.words() == "field 'rows' is an object ({'a': 1}), not an integer under 2**63 in size"


def test_a_samples_fields_named_with_a_units_suffix_are_numbers_and_others_anything():
    line = {**GOOD[SAMPLE], "cpu_pct": "12", "rss_bytes": LIMIT, "gpu0_w": None, "host_j": [1], "mine": {"a": 1}}
    assert line_damage(SAMPLE, line) == [Damage("cpu_pct", "12", NUMBER, False),
                                         Damage("rss_bytes", LIMIT, NUMBER, False),
                                         Damage("host_j", [1], NUMBER, False)]


@pytest.mark.parametrize("value", [{"a": 1}, [1, 2]])
def test_a_markers_value_rows_cannot_carry_must_say_it_is_not_carried(value):
    line = {**GOOD[MARKER], "value": value}
    assert line_damage(MARKER, line) == [Damage("carry", ABSENT, UNCARRIED, False)]
    assert line_damage(MARKER, {**line, "carry": None}) == [Damage("carry", None, UNCARRIED, False)]
    assert line_damage(MARKER, {**line, "carry": True}) == [Damage("value", value, SCALAR, False)]
    assert line_damage(MARKER, {**line, "carry": False}) == []
    for scalar in ("text", 1.5, True, None):
        assert line_damage(MARKER, {**GOOD[MARKER], "value": scalar}) == []


def test_the_manifests_distributed_entry_is_checked_field_by_field():
    line = {**GOOD[MANIFEST], "distributed": {"rank": "0", "host": 3, "job_path": "job.jsonl", "mine": [1]}}
    assert line_damage(MANIFEST, line) == [Damage("distributed.rank", "0", INTEGER, True),
                                           Damage("distributed.host", 3, STRING, False)]
    assert line_damage(MANIFEST, {**GOOD[MANIFEST], "distributed": {}}) == [
        Damage("distributed.rank", ABSENT, INTEGER, True)]
    assert line_damage(MANIFEST, {**GOOD[MANIFEST], "distributed": "rank 0"}) == [
        Damage("distributed", "rank 0", OBJECT, False)]


def test_repair_nulls_what_it_can_and_refuses_a_line_missing_what_it_requires():
    gc = {**GOOD[GC], "collected": "3", "reason": 7}
    assert repair(gc, line_damage(GC, gc)) is True
    assert gc == {**GOOD[GC], "collected": None, "reason": None}
    gc = {**GOOD[GC], "duration_s": "x"}
    assert repair(gc, line_damage(GC, gc)) is False

    entry = {"rank": 1, "host": 3}
    manifest = {**GOOD[MANIFEST], "distributed": entry}
    assert repair(manifest, line_damage(MANIFEST, manifest)) is True
    assert manifest["distributed"] == {"rank": 1, "host": None} and entry == {"rank": 1, "host": 3}  # a copy nulled
    manifest = {**GOOD[MANIFEST], "distributed": {"rank": "1", "host": "h"}}
    assert repair(manifest, line_damage(MANIFEST, manifest)) is True and manifest["distributed"] is None  # the entry

    marker = {**GOOD[MARKER], "value": {"a": 1}}
    assert repair(marker, line_damage(MARKER, marker)) is True and marker["carry"] is False  # no longer carried
    assert line_damage(MARKER, marker) == []


# -- rows ------------------------------------------------------------------------------------------

def test_a_rows_fields_are_expected_by_their_declared_unit():
    assert row_expect("label") is STRING and row_expect("index") is INTEGER and row_expect("rank") is INTEGER
    assert row_expect("notes") is STRINGS and row_expect("device") is STRING and row_expect("backend") is STRING
    assert row_expect("t_start_ns") is CLOCK and row_expect("t_end_ns") is CLOCK
    for field in ("wall_s", "rss_peak_bytes", "gc_pause_s", "phase_forward_s"):
        assert row_expect(field) is NUMBER, field
    assert row_expect("mine") is None and row_expect("energy_of_mine") is None  # a field of yours: anything


ROWS = [
    {"label": "train", "index": 0, "wall_s": 0.5, "t_start_ns": 10, "notes": ["a"], "mine": "any"},
    {"label": "train", "index": 1, "wall_s": "slow", "t_start_ns": 20, "notes": None, "mine": [1]},
    {"label": "eval", "index": 0, "wall_s": 0.25, "t_start_ns": -5, "device": "cpu"},
    {"label": "train", "index": 2, "wall_s": 1e300, "t_start_ns": 30, "notes": ["a", 1]},
    {"label": "eval", "index": 1, "wall_s": None, "t_start_ns": 40, "device": 0},
    {"label": "train", "index": 3, "wall_s": 2, "t_start_ns": 50, "notes": ["a"], "mine": {"x": None}},
]
"""Planted rows of two labels: damaged values at rows 1 (wall_s), 2 (t_start_ns), 3 (wall_s and
notes) and 4 (device); None, ints among floats and fields of yours are good."""

DAMAGED = [(1, "wall_s", "slow"), (2, "t_start_ns", -5), (3, "wall_s", 1e300), (3, "notes", ["a", 1]),
           (4, "device", 0)]


def test_row_damage_names_every_damaged_value_of_a_planted_table_in_row_order():
    table = Table(ROWS)
    found = row_damage(table)
    assert sorted((seq, d.field, d.value) for seq, d in found) == sorted(DAMAGED)
    assert [seq for seq, _ in found] == sorted(seq for seq, _, _ in DAMAGED)
    assert all(d.required is False and d.expect is row_expect(d.field) for _, d in found)
    assert row_damage(Table([r for i, r in enumerate(ROWS) if i not in {1, 2, 3, 4}])) == []


def test_row_damage_reads_int_and_float_columns_by_their_kind():
    """An int column's negative clock and a float column's huge number are found without a value
    read one by one; a text in an int column makes it one of objects, found too."""
    rows = [{"label": "t", "index": i, "t_start_ns": -i, "wall_s": 1e19 * i, "device": None} for i in range(200)]
    found = row_damage(Table(rows))
    assert sorted((seq, d.field) for seq, d in found) == sorted(
        [(i, "t_start_ns") for i in range(1, 200)] + [(i, "wall_s") for i in range(1, 200)])


def test_null_damage_nulls_each_damaged_value_and_nothing_else():
    table = Table(ROWS)
    null_damage(table, row_damage(table))
    want = [dict(r) for r in ROWS]
    for seq, field, _ in DAMAGED:
        want[seq][field] = None
    assert list(table.rows()) == want
    assert row_damage(table) == []


# -- one read's damage ------------------------------------------------------------------------------

def test_a_strict_read_refuses_its_first_damaged_line_naming_the_line_and_field(tmp_path):
    path = tmp_path / "run.jsonl"
    damaged = Damaged(path, strict=True)
    gc = {**GOOD[GC], "duration_s": "x"}
    assert damaged.line(5, GC, gc, line_damage(GC, gc)) is False and damaged.stop
    with pytest.raises(ReportFileError) as raised:
        damaged.rows(Table())
    assert str(raised.value) == (f"{path}:5: a GC event's field 'duration_s' is a string ('x'), not a finite number "
                                 f"under 2**63 in size; read past damaged values with {SKIP_HINT}")


def test_a_strict_read_names_a_damaged_rows_line(tmp_path):
    path = tmp_path / "run.jsonl"
    lines = [{"type": MANIFEST, "format": "gnnmon.jsonl"}, {"type": "marker", "kind": "k", "t_ns": 1},
             *({"type": ROW, **r} for r in ROWS)]
    path.write_bytes(b"".join(encode(o) + b"\n" for o in lines))
    with pytest.raises(ReportFileError) as raised:
        Damaged(path, strict=True).rows(Table(ROWS))
    assert str(raised.value).startswith(f"{path}:4: a row's field 'wall_s' is a string ('slow'), not a finite number")
    Damaged(path, strict=True).rows(Table(ROWS[:1]))  # no damage: nothing said


def test_a_lenient_read_nulls_or_skips_and_warns_of_each(tmp_path):
    path = tmp_path / "run.jsonl"
    damaged = Damaged(path, strict=False)
    gc = {**GOOD[GC], "collected": "3"}
    point = {**GOOD[POINT], "t_ns": "late"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert damaged.line(3, GC, gc, line_damage(GC, gc)) is True and gc["collected"] is None
        assert damaged.line(4, POINT, point, line_damage(POINT, point)) is False
        damaged.rows(Table())
    assert not damaged.stop
    assert [str(w.message) for w in caught] == [
        f"{path}:3: a GC event's field 'collected' is a string ('3'), not an integer under 2**63 in size: read as null",
        f"{path}:4: an energy counter's point's field 't_ns' is a string ('late'), not {CLOCK.what}: skipped the line"]


def test_past_ten_warnings_the_rest_are_counted_in_one(tmp_path):
    path = tmp_path / "run.jsonl"
    damaged = Damaged(path, strict=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(MAX_WARNINGS + 7):
            sample = {**GOOD[SAMPLE], "children": "many"}
            damaged.line(n + 2, SAMPLE, sample, line_damage(SAMPLE, sample))
        damaged.rows(Table())
    said = [str(w.message) for w in caught]
    assert len(said) == MAX_WARNINGS + 1
    assert all(s.startswith(f"{path}:{n + 2}: a sample's field 'children'") for n, s in enumerate(said[:-1]))
    assert said[-1] == f"{path}: and 7 more damaged value(s) read as null or line(s) skipped"
