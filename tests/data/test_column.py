"""One field's column (gnnmon/data/column.py) on its own, from planted values: a new column's kind
from its first value; ints in an ``array('q')`` and floats in an ``array('d')``, None kept as None
(their marker inside); a value of another type (a float among ints, an int among floats, a bool, an
int beyond 64 bits, the int marker itself) makes it a column of objects where every value reads back
as added, whether added one at a time or in a batch; rows without the field read as absent, not
None; a damaged value nulled; numbers as float64 and sorted, of chosen rows."""

from __future__ import annotations

import math
from array import array

import numpy as np
import pytest

from gnnmon.data.column import ABSENT, NO_INT, Column, column_kind, sorted_numbers


def same(a: list, b: list) -> bool:
    """Equal value by value and of the same type (``1 == 1.0 == True`` for ``==``, not here)."""
    return len(a) == len(b) and all(type(x) is type(y) and (x == y or x is y) for x, y in zip(a, b, strict=True))


def made(kind: str, values: list, way: str, absent_before: int = 0) -> Column:
    col = Column(kind, absent_before)
    if way == "extend":
        col.extend(values)
    elif way == "add":
        for v in values:
            col.add(v)
    else:  # in two batches
        col.extend(values[: len(values) // 2])
        col.extend(values[len(values) // 2:])
    return col


WAYS = ["extend", "add", "halves"]


@pytest.mark.parametrize("values, kind", [
    ([3, 1.5], "q"), ([None, 3], "q"), ([None, None], "q"), ([], "q"), ([None, 2.5, 1], "d"), (["a", 1], "o"),
    ([True, 1], "o"), ([None, [1]], "o"), ([{"a": 1}], "o"),
])
def test_a_new_columns_kind_is_its_first_value_not_none(values, kind):
    assert column_kind(values) == kind


@pytest.mark.parametrize("way", WAYS)
def test_ints_are_kept_8_bytes_each_with_none_as_their_marker(way):
    values = [5, None, -7, 0, 2**63 - 1, None, -(2**63) + 1]
    col = made("q", values, way)
    assert col.kind == "q" and isinstance(col.values, array) and col.values.typecode == "q"
    assert list(col.values) == [NO_INT if v is None else v for v in values]
    assert same(col.get_all(), values) and [col.get(i) for i in range(len(values))] == values
    assert col.types == {int, type(None)}


@pytest.mark.parametrize("way", WAYS)
def test_floats_are_kept_8_bytes_each_with_none_as_nan(way):
    values = [0.5, None, -0.0, 1e300, None, 2.25]
    col = made("d", values, way)
    assert col.kind == "d" and col.values.typecode == "d"
    assert math.isnan(col.values[1]) and math.isnan(col.values[4])
    got = col.get_all()
    assert same(got, values) and math.copysign(1.0, got[2]) == -1.0  # -0.0 keeps its sign


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("kind, values", [
    ("q", [1, 2, 2.5, None, 3]),  # a float among ints
    ("q", [1, True, False, 0]),  # bools are no ints
    ("q", [1, 2**70, -3]),  # beyond 64 bits
    ("q", [1, -(2**63) - 1]),  # below them
    ("q", [4, NO_INT, None]),  # the int marker itself is a value, not None
    ("q", [1, "text", ["a"], {"k": None}]),
    ("d", [0.5, 1, None, 2.0]),  # an int among floats
    ("d", [0.5, True]),
    ("d", [0.5, "n/a", [1.0]]),
])
def test_a_value_of_another_type_makes_a_column_of_objects_where_each_reads_back_as_added(way, kind, values):
    col = made(kind, values, way)
    assert col.kind == "o" and isinstance(col.values, list)
    assert same(col.get_all(), values), col.get_all()
    assert same([col.get(i) for i in range(len(values))], values)


def test_a_column_of_objects_keeps_any_value():
    values = ["a", None, {"k": [1, None]}, ["x", "y"], 1.5, 7, False, []]
    col = made("o", values, "extend")
    assert same(col.get_all(), values) and col.numeric  # it holds numbers too
    assert not made("o", ["a", None, ["b"]], "extend").numeric


@pytest.mark.parametrize("kind, value", [("q", 3), ("d", 1.5), ("o", "x")])
def test_rows_without_the_field_read_as_absent_not_none(kind, value):
    col = Column(kind, 2)  # two rows before the first that had it
    col.extend([value, None])
    col.skip(2)
    col.add(value)
    col.add(ABSENT)
    assert col.first == 2 and col.absent == {4, 5, 7}
    got = col.get_all()
    assert [g is ABSENT for g in got] == [True, True, False, False, True, True, False, True]
    assert got[2] == value and got[3] is None and got[6] == value
    assert [col.get(i) is ABSENT for i in range(8)] == [g is ABSENT for g in got]
    assert len(col.values) == 8


@pytest.mark.parametrize("kind, value", [("q", 3), ("d", 1.5), ("o", "x"), ("o", ["x"])])
@pytest.mark.parametrize("way", WAYS)
def test_nulls_marks_each_row_whose_value_is_none_or_absent_as_get_all_gives_them(kind, value, way):
    cases = [[value, None, value], [None, None, None], [value, value], []]
    for values in cases:
        col = made(kind, values, way, absent_before=2)
        col.skip(1)
        got = col.get_all()
        assert same(got[2:2 + len(values)], values)  # None where the marker is, whatever else the column holds
        nulls = col.nulls()
        assert nulls.dtype == bool and nulls.tolist() == [v is None or v is ABSENT for v in got]


def test_absent_rows_stay_absent_when_a_column_becomes_one_of_objects():
    col = Column("q", 1)
    col.extend([1])
    col.skip(1)
    col.add(2.5)
    got = col.get_all()
    assert col.kind == "o" and got[0] is ABSENT and got[1] == 1 and got[2] is ABSENT and got[3] == 2.5


@pytest.mark.parametrize("kind, values", [("q", [1, 2, 3]), ("d", [1.5, 2.5, 3.5]), ("o", ["a", "b", "c"])])
def test_a_nulled_value_reads_none_and_the_others_are_kept(kind, values):
    col = made(kind, values, "extend")
    col.null(1)
    assert col.get_all() == [values[0], None, values[2]] and col.get(1) is None


def test_numbers_are_float64_with_nan_where_a_row_has_no_number():
    cases = {
        "q": ([3, None, -2], [3.0, math.nan, -2.0]),
        "d": ([0.5, None, 2.0], [0.5, math.nan, 2.0]),
        "o": ([1, "x", True, 2.5, None, [1], 2**70], [1.0, math.nan, math.nan, 2.5, math.nan, math.nan, float(2**70)]),
    }
    for kind, (values, want) in cases.items():
        col = made(kind if kind != "o" else "q", values, "extend")
        got = col.numbers()
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, want)
    absent = Column("d", 2)
    absent.extend([1.0])
    np.testing.assert_array_equal(absent.numbers(), [math.nan, math.nan, 1.0])
    assert made("q", [], "extend").numbers().shape == (0,) and made("d", [], "extend").numbers().shape == (0,)
    np.testing.assert_array_equal(made("o", ["a", None], "extend").numbers(), [math.nan, math.nan])


def test_sorted_numbers_of_every_kind_and_of_chosen_rows():
    ints = made("q", [5, None, -1, 3, 0], "extend")
    floats = made("d", [2.5, None, -0.5, 1.0], "extend")
    mixed = made("o", [3, "x", 1.5, True, None, -2], "extend")
    assert isinstance(sorted_numbers(ints), np.ndarray) and sorted_numbers(ints).dtype == np.int64
    assert sorted_numbers(ints).tolist() == [-1, 0, 3, 5]
    assert sorted_numbers(floats).tolist() == [-0.5, 1.0, 2.5]
    got = sorted_numbers(mixed)
    assert got == [-2, 1.5, 3] and [type(v) for v in got] == [int, float, int]  # ints stay ints; text, bools out
    keep = np.array([True, True, False, True, False])
    assert sorted_numbers(ints, keep).tolist() == [3, 5]
    assert sorted_numbers(floats, np.array([False, True, True, True])).tolist() == [-0.5, 1.0]
    assert sorted_numbers(mixed, np.array([False, False, True, True, True, True])) == [-2, 1.5]
    assert sorted_numbers(made("o", ["a"], "extend")) == [] and sorted_numbers(Column("q", 0)) == []
