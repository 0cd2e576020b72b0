"""The columnar table (gnnmon/data/table.py, gnnmon/data/column.py) on its own: every row added
reads back as it was written (same values, same types, same order) whichever way it was added; a
field reads as numbers, as values, or at chosen rows; a planted set of rows gives the statistics
computed by hand; and a table of 100,000 rows holds 8 bytes a field a row and no object per row."""

from __future__ import annotations

import gc
import math
import random
import sys
import types
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from gnnmon.data.column import MAX_SHARED, NO_INT, sorted_numbers
from gnnmon.data.table import BATCH, Table, as_table, returned


def same(a, b) -> bool:
    """Equal and of the same type all the way down (``1 == 1.0 == True`` and ``0.0 == -0.0`` for
    ``==``, not here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def assert_rows_equal(got, want) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert same(g, w), f"row {i}: {g!r} != {w!r}"


def added_each_way(rows):
    """The same rows as three tables: one row at a time, from the constructor, and in runs of one
    label through :meth:`Table.extend` (the reader's path)."""
    one = Table()
    for row in rows:
        one.add(row)
    runs = Table()
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j]["label"] == rows[i]["label"]:
            j += 1
        runs.extend(rows[i:j])
        i = j
    return {"add": one, "constructor": Table(rows), "extend": runs}


# -- rows read back as written ---------------------------------------------------------------------

MIXED = [
    {"label": "train", "index": 0, "wall_s": 0.5, "mem_peak_bytes": 1024, "notes": None},
    # an int among floats, a float among ints
    {"label": "train", "index": 1, "wall_s": 1, "mem_peak_bytes": 2048.0, "notes": ["slow"]},
    {"label": "eval", "index": 0, "wall_s": None, "device": "cpu", "error": "KeyError"},
    {"label": "train", "index": 2, "wall_s": -0.0, "mem_peak_bytes": None, "notes": ["slow", "gc"]},
    {"label": "train", "index": 3, "wall_s": True, "mem_peak_bytes": 2**70, "config": {"lr": 0.1, "layers": [64, 64]}},
    {"label": "eval", "index": 1, "wall_s": 2.25, "device": "cuda:0", "error": None},
    {"label": "train", "index": 4, "wall_s": "n/a", "mem_peak_bytes": -(2**63), "notes": []},
    {"label": "train", "index": 5},  # every figure absent: absent, not None, when read back
]
"""Planted rows of two labels, each column holding the mixes the column docstring names: ints
among floats and floats among ints, None, a bool, texts, lists of texts, nested dicts, an int
beyond 64 bits and NO_INT itself, -0.0, and fields absent from some rows."""


@pytest.mark.parametrize("way", ["add", "constructor", "extend"])
def test_mixed_rows_read_back_equal_in_type_and_in_the_order_added(way):
    """Each planted row reads back equal, every value of its own type (1 stays int beside floats,
    2048.0 stays float beside ints, -0.0 keeps its sign, True stays a bool), absent fields
    absent, rows of both labels in the order added."""
    table = added_each_way(MIXED)[way]
    assert len(table) == len(MIXED) and table.labels() == ["train", "eval"]
    assert_rows_equal(list(table.rows()), MIXED)
    assert_rows_equal(table.records(), MIXED)  # all at once, column by column: the same rows


@pytest.mark.parametrize("way", ["add", "constructor", "extend"])
def test_many_rows_across_batches_read_back_equal_and_in_order(way):
    """1,000 planted rows (several batches of :data:`BATCH`), three labels interleaved in runs,
    fields that come and go and change order, values of every kind the column keeps: each reads
    back as written, in order."""
    rng = random.Random(40)
    kinds = [0, 7, -3, 2**62, 0.0, -0.0, 1.5, float(2**60), True, False, None, "a", "", ["x", "y"], [], {"k": [1, "z"]}]
    rows = []
    for k in range(1000):
        label = ("train", "eval", "test")[(k // 37) % 3]
        row = {"label": label, "index": k}
        for name in ("wall_s", "mem_peak_bytes", "notes"):
            if rng.random() < 0.85:
                # mostly one type per field (the common case), a mix now and then
                row[name] = rng.choice(kinds) if rng.random() < 0.2 else {"wall_s": k / 7, "mem_peak_bytes": k * 8,
                                                                        "notes": None}[name]
        if rng.random() < 0.1:
            row = dict(reversed(list(row.items())))  # the same fields in another order
        rows.append(row)
    table = added_each_way(rows)[way]
    assert len(table) == 1000
    assert_rows_equal(list(table.rows()), rows)
    assert_rows_equal(table.records(), rows)  # all at once, column by column: the same rows


def test_texts_and_lists_of_texts_are_shared_between_rows_but_never_numbers():
    """Equal texts (built apart, so distinct objects) come back as one object; a list of texts
    equal to its neighbour's as one list; 1, True and 1.0 are equal but each reads back as
    itself."""
    rows = [{"label": "t", "device": "cuda:" + str(k % 2), "notes": ["a", "b"] if k < 3 else ["c"]} for k in range(200)]
    part = Table(rows).parts["t"]
    devices = part.objects("device")
    assert devices == [f"cuda:{k % 2}" for k in range(200)]
    assert len({id(d) for d in devices}) == 2
    notes = part.objects("notes")
    assert notes[:3] == [["a", "b"]] * 3 and notes[0] is notes[1] is notes[2] and notes[3] is notes[199]
    numbers = Table([{"label": "t", "v": v} for v in (1, True, 1.0, 0.0, -0.0, False, 0)]).parts["t"].objects("v")
    assert_rows_equal(numbers, [1, True, 1.0, 0.0, -0.0, False, 0])


def test_past_max_shared_distinct_texts_every_text_still_reads_back():
    """A text unique to each row (a ``parent`` key) past :data:`MAX_SHARED` distinct ones: each
    row's own text back."""
    n = MAX_SHARED + 3 * BATCH
    rows = [{"label": "t", "parent": f"step:{k}"} for k in range(n)]
    assert Table(rows).parts["t"].objects("parent") == [f"step:{k}" for k in range(n)]


def test_a_nan_reads_back_as_none_as_the_format_has_no_nan():
    """The column's documented exception: a float NaN comes back as None (the file writes null)."""
    rows = [{"label": "t", "v": 1.5}, {"label": "t", "v": math.nan}, {"label": "t", "v": 2.5}]
    assert Table(rows).parts["t"].objects("v") == [1.5, None, 2.5]


# -- numbers and selection ---------------------------------------------------------------------

def test_numeric_columns_read_as_float64_with_nan_for_no_number():
    """``numbers``: ints and floats (big ints too) as float64; None, absent, texts and bools as NaN;
    a field the label lacks as all NaN."""
    part = Table(MIXED).parts["train"]
    np.testing.assert_array_equal(part.numbers("wall_s"), [0.5, 1.0, -0.0, math.nan, math.nan, math.nan])
    np.testing.assert_array_equal(part.numbers("mem_peak_bytes"),
                                  [1024.0, 2048.0, math.nan, float(2**70), float(-(2**63)), math.nan])
    np.testing.assert_array_equal(part.numbers("index"), [0, 1, 2, 3, 4, 5])
    assert part.numbers("index").dtype == np.float64
    assert np.isnan(part.numbers("error")).all() and part.numbers("error").shape == (6,)


def test_int_and_float_columns_keep_8_bytes_a_value_and_none_as_their_marker():
    """A field of ints only is an ``array('q')`` (None as NO_INT), of floats only an
    ``array('d')`` (None as NaN): what makes the report's numpy reads free."""
    rows = [{"label": "t", "n": None if k % 5 == 0 else k, "s": None if k % 7 == 0 else k / 4} for k in range(300)]
    cols = Table(rows).parts["t"].cols
    assert (cols["n"].kind, cols["s"].kind) == ("q", "d")
    assert cols["n"].values.itemsize == cols["s"].values.itemsize == 8
    assert list(cols["n"].values).count(NO_INT) == 60
    assert Table(rows).parts["t"].objects("n") == [r["n"] for r in rows]


def test_selecting_a_field_gives_it_for_every_row_or_at_the_rows_asked():
    """``objects`` (every row of the label), ``pick`` (rows at given positions, int, float and
    object columns alike), ``view`` (one row, a field at a time) and ``where`` (rows split by a
    field's value) each give exactly the planted values."""
    table = Table(MIXED)
    train, ev = table.parts["train"], table.parts["eval"]
    assert train.objects("index") == [0, 1, 2, 3, 4, 5]
    assert ev.objects("device") == ["cpu", "cuda:0"] and ev.objects("mem_peak_bytes") == [None, None]
    assert train.pick("index", [5, 0, 3]) == [5, 0, 3]
    assert_rows_equal(train.pick("wall_s", [4, 2, 0]), ["n/a", -0.0, 0.5])
    assert train.pick("notes", [1, 5]) == [["slow"], None]  # absent reads None
    for part in (train, ev):  # nulls: objects' ``is None`` as a bool array, for every field and one no row has
        for name in [*part.cols, "nobody"]:
            assert part.nulls(name).tolist() == [v is None for v in part.objects(name)], name
    ints = Table([{"label": "t", "k": None if k == 3 else k, "f": None if k == 4 else k / 2}
                  for k in range(100)]).parts["t"]
    assert ints.pick("k", [2, 3, 99]) == [2, None, 99] and ints.pick("f", [4, 5]) == [None, 2.5]
    view = train.view(3)
    assert view["mem_peak_bytes"] == 2**70 and view.get("device", "none") == "none" and "device" not in view
    assert dict(view) == MIXED[4] and len(train.view(5)) == 2
    with pytest.raises(KeyError):
        train.view(5)["wall_s"]
    split = table.where("device")
    assert sorted(split, key=str) == [None, "cpu", "cuda:0"]
    assert_rows_equal(list(split[None].rows()), [r for r in MIXED if "device" not in r])
    assert_rows_equal(list(split["cuda:0"].rows()), [MIXED[5]])


def test_a_rows_time_is_device_time_else_wall_time_else_its_window():
    """Planted: one row of each kind, and one with none of them."""
    rows = [{"label": "t", "device_s": 0.25, "wall_s": 9.0, "t_start_ns": 0, "t_end_ns": 9 * 10**9},
            {"label": "t", "device_s": None, "wall_s": 0.5, "t_start_ns": 0, "t_end_ns": 9 * 10**9},
            {"label": "t", "t_start_ns": 10**9, "t_end_ns": 3 * 10**9},
            {"label": "t"}]
    np.testing.assert_array_equal(Table(rows).parts["t"].time(), [0.25, 0.5, 2.0, math.nan])


# -- statistics on planted rows ------------------------------------------------------------------

def planted_run():
    """200 train rows (``wall_s`` 0.01 .. 1.00 twice, shuffled; two more that raised, with
    10 s; three with None) and 50 eval rows (``mem_peak_bytes`` 1..50 KiB, ints)."""
    rng = random.Random(7)
    walls = [round(0.01 * k, 2) for k in range(1, 101)] * 2
    rng.shuffle(walls)
    rows = [{"label": "train", "index": i, "wall_s": w, "error": None} for i, w in enumerate(walls)]
    rows.insert(40, {"label": "train", "index": 200, "wall_s": 10.0, "error": "RuntimeError"})
    rows.insert(90, {"label": "train", "index": 201, "wall_s": 10.0, "error": "OutOfMemoryError"})
    for k in range(3):
        rows.insert(10 + k, {"label": "train", "index": 202 + k, "wall_s": None, "error": None})
    for k in range(50):
        rows.insert(2 * k + 1, {"label": "eval", "index": k, "mem_peak_bytes": (k + 1) * 1024})
    return rows


def test_planted_rows_give_the_statistics_computed_by_hand():
    """The calls that returned (``returned``) and the numbers the report describes
    (``sorted_numbers``) equal the planted truth: 200 train times, 0.01 .. 1.00 each twice (mean
    0.505, median 0.505, min 0.01, max 1.00), the two raised rows and the three None left out; 50
    eval peaks whose sum is 1,275 KiB exactly, still ints."""
    table = Table(planted_run())
    assert {k: p.n for k, p in table.parts.items()} == {"train": 205, "eval": 50}
    train = table.parts["train"]
    keep = returned(train)
    assert keep is not None and int(keep.sum()) == 203
    raised = [i for i, row in enumerate(r for r in planted_run() if r["label"] == "train") if row["error"]]
    assert np.flatnonzero(~keep).tolist() == raised and len(raised) == 2
    walls = sorted_numbers(train.cols["wall_s"], keep)
    assert isinstance(walls, np.ndarray) and walls.dtype == np.float64 and len(walls) == 200
    np.testing.assert_array_equal(walls, sorted([round(0.01 * k, 2) for k in range(1, 101)] * 2))
    assert math.fsum(walls) / len(walls) == pytest.approx(0.505, abs=1e-12)
    assert float(np.median(walls)) == pytest.approx(0.505, abs=1e-12)
    assert (walls[0], walls[-1]) == (0.01, 1.0)
    assert len(sorted_numbers(train.cols["wall_s"])) == 202  # with the rows that raised
    peaks = sorted_numbers(table.parts["eval"].cols["mem_peak_bytes"])
    assert peaks.dtype == np.int64 and int(peaks.sum()) == 1275 * 1024 and peaks[0] == 1024
    assert table.figures() == ["wall_s", "mem_peak_bytes"]  # index and error are not figures
    assert returned(table.parts["eval"]) is None  # no error field: every call returned


def test_as_table_keeps_a_table_and_makes_one_from_rows():
    table = Table(MIXED)
    assert as_table(table) is table
    assert_rows_equal(list(as_table(iter(MIXED)).rows()), MIXED)


# -- memory -------------------------------------------------------------------------------------

def reachable(root: object, follow: Callable[[object], bool] = lambda obj: True) -> Iterator[object]:
    """Each object reachable from ``root``, once (by ``gc.get_referents``; classes, modules and
    functions left out), walking on from those ``follow`` accepts."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        yield obj
        if follow(obj):
            stack.extend(gc.get_referents(obj))


def held(root) -> tuple[int, int]:
    """Bytes and objects reachable from ``root`` (each object once, by ``sys.getsizeof``): what the
    table keeps alive."""
    sizes = [sys.getsizeof(obj) for obj in reachable(root)]
    return sum(sizes), len(sizes)


def long_run(n):
    """Rows as a reader makes them: each a fresh dict with fresh values (texts built per row)."""
    for k in range(n):
        yield {"label": "train" if k % 4 else "eval", "index": k, "wall_s": k * 1e-3, "mem_peak_bytes": 4096 + k,
               "device": "cuda:" + str(k % 2), "notes": None, "error": None}


def test_a_100k_row_table_holds_8_bytes_a_field_a_row_and_no_object_per_row():
    """Counted, not timed: everything reachable from a table of 100,000 planted rows of 7 fields
    is at most 8 bytes a field a row plus each row's position (64 bytes a row), with 25 % for the
    arrays' growth and 64 KiB fixed, where 100,000 dicts alone would take ~18 MB; and the
    objects it keeps do not grow with the rows (two labels' texts, at most a batch of rows each
    waiting to be columnised)."""
    n = 100_000
    table = Table(long_run(n))
    size, objects = held(table)
    assert size <= 1.25 * 8 * (7 + 1) * n + 65536, f"{size / n:.1f} bytes a row"
    small_size, small_objects = held(Table(long_run(n // 10)))
    assert objects <= 200 + 2 * BATCH * 10, objects  # rows waiting: at most BATCH a label, ~10 objects each
    assert objects - small_objects <= 2 * BATCH * 10  # 10x the rows, no more objects but those
    assert (size - small_size) / (n - n // 10) <= 1.25 * 8 * 8  # the cost of a row is flat
    # the rows read back from the columns
    rows = table.rows()
    first = [next(rows) for _ in range(3)]
    assert first == [{"label": "eval", "index": 0, "wall_s": 0.0, "mem_peak_bytes": 4096, "device": "cuda:0",
                      "notes": None, "error": None}] + [
        {"label": "train", "index": k, "wall_s": k * 1e-3, "mem_peak_bytes": 4096 + k, "device": f"cuda:{k % 2}",
         "notes": None, "error": None} for k in (1, 2)]


@pytest.mark.parametrize("way", ["add", "extend"])
def test_numpy_scalars_in_rows_made_in_memory_are_numbers(way):
    """A row built in memory may hold numpy scalars (a user's figure, a reduction's result): each
    reads as its number wherever it comes among Python numbers, and a bool stays no number."""
    planted = [{"label": "step", "a": np.float64(0.5), "b": 1.0, "c": np.int64(3), "d": np.float32(2.0)},
               {"label": "step", "a": 0.25, "b": np.float64(0.75), "c": 4, "d": np.bool_(True)}]
    table = Table()
    if way == "add":
        for row in planted:
            table.add(row)
    else:
        table.extend(planted)
    part = table.parts["step"]
    assert part.numbers("a").tolist() == [0.5, 0.25]
    assert part.numbers("b").tolist() == [1.0, 0.75]
    assert part.numbers("c").tolist() == [3.0, 4.0]
    assert part.numbers("d")[0] == 2.0 and np.isnan(part.numbers("d")[1])
