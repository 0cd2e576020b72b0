"""What repeats on rows is said once in a run file (gnnmon/data/same.py) and read back onto every
row: a file's rows read back equal to the live run's, every field's value, type and place; the rows
of the full stack with three phases and sampling take at most 400 bytes; a run whose notes differ
on every row keeps its writer's memory flat; a set lost with a full disk is declared again."""

from __future__ import annotations

import json
import time

import pytest
import torch

import gnnmon
from gnnmon.data.format import ROW, SAME, encode, typed_line
from gnnmon.data.same import MAX_SETS, Compactor


@gnnmon.monitor_memory_device(device="cpu")
@gnnmon.cuda_timed(device="cpu")
@gnnmon.gc_controlled
def full_stack(i: int) -> None:
    with gnnmon.phase("forward"):
        time.sleep(0.001)
        keep = torch.ones(1000 * (i % 3))  # rows whose peak differs from their start, and rows whose does not
    with gnnmon.phase("backward"):
        del keep
    with gnnmon.phase("optimizer"):
        pass


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_a_files_rows_read_back_as_the_live_run_holds_them(tmp_path):
    @gnnmon.cuda_timed(device="cpu")
    def failing(i: int) -> None:
        gnnmon.current_row().fields["mine"] = i if i % 2 else None  # a field of yours, sometimes null
        gnnmon.current_row().note(f"call {i % 3}")
        if i % 4 == 0:
            raise ValueError("planted")

    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path, sample=0.05) as run:
        for i in range(60):
            full_stack(i)
            with pytest.raises(ValueError) if i % 4 == 0 else _nothing():
                failing(i)
            with gnnmon.timed(label="nested_outside"):
                pass
    live = run.records
    loaded = gnnmon.load(path).records
    assert len(live) == len(loaded) == 180
    for a, b in zip(live, loaded, strict=True):
        assert a == b and [(k, type(v)) for k, v in a.items()] == [(k, type(v)) for k, v in b.items()], (a, b)
    assert list(gnnmon.iter_rows(path)) == loaded
    lines = _lines(path)
    sets = [line for line in lines if line["type"] == SAME]
    rows = [line for line in lines if line["type"] == ROW]
    assert sets and all("same" in r for r in rows)  # each row's repeated fields said in a set
    assert len(sets) < len(rows) / 5
    assert not any("notes" in r or "device_source" in r for r in rows)  # said once, not per row


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_the_full_stack_with_three_phases_and_sampling_writes_at_most_400_bytes_a_row(tmp_path):
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path, sample=0.05) as run:
        for i in range(400):
            full_stack(i)
    raw = path.read_bytes().splitlines()[1:]  # all but the manifest: rows, their sets, samples, the end
    rows = [line for line in raw if line.startswith(b'{"type":"row"')]
    sets = [line for line in raw if line.startswith(b'{"type":"same"')]
    assert len(rows) == 400 and run.rows_written == 400
    per_row = (sum(map(len, rows)) + sum(map(len, sets))) / len(rows)
    assert per_row <= 400, per_row
    whole = sum(len(typed_line(ROW, encode(r))) for r in run.records) / len(rows)
    assert whole > 2 * per_row  # what each row would take written whole
    loaded = gnnmon.load(path).records
    assert loaded == run.records and all(r["phase_forward_s"] >= 0.001 for r in loaded)
    assert all(r["mem_peak_bytes"] == r["rss_peak_bytes"] and r["device_s"] == r["wall_s"] for r in loaded)


def test_notes_that_differ_on_every_row_keep_the_writers_sets_bounded(tmp_path):
    path = tmp_path / "run.jsonl"

    @gnnmon.cuda_timed(device="cpu")
    def step(i: int) -> None:
        gnnmon.current_row().note(f"row {i}")

    with gnnmon.collect(path) as run:
        for i in range(MAX_SETS + 300):
            step(i)
    lines = _lines(path)
    assert len([line for line in lines if line["type"] == SAME]) == MAX_SETS
    whole = [line for line in lines if line["type"] == ROW and "same" not in line]
    assert len(whole) == 300 and whole[0]["notes"][-1] == f"row {MAX_SETS}"  # written whole once full
    assert gnnmon.load(path).records == run.records
    assert [r["notes"][-1] for r in gnnmon.load(path).records] == [f"row {i}" for i in range(MAX_SETS + 300)]


def test_a_writer_that_lost_lines_declares_its_sets_again_and_types_stay_apart():
    compactor = Compactor()
    rows = [{"label": "s", "index": 0, "gc_pause_s": 0.0, "notes": ["a"]},
            {"label": "s", "index": 1, "gc_pause_s": 0, "notes": ["a"]}]  # 0.0 and 0: two sets, not one
    first = [json.loads(line) for line in compactor.lines(rows)]
    assert [line["type"] for line in first] == [SAME, ROW, SAME, ROW]
    assert compactor.lines(rows[:1]) and json.loads(compactor.lines(rows[:1])[0])["type"] == ROW  # declared
    compactor.forget()  # a full disk: the declaration may be among the lost lines
    again = [json.loads(line) for line in compactor.lines(rows[:1])]
    assert [line["type"] for line in again] == [SAME, ROW] and again[0]["fields"] == {"gc_pause_s": 0.0, "notes": ["a"]}
    assert again[0]["keys"] == ["label", "index", "gc_pause_s", "notes"]


def test_a_row_naming_a_set_no_line_declares_is_read_without_it_and_said(tmp_path):
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path):
        gnnmon.cuda_timed(device="cpu")(lambda: None)()
    lines = path.read_bytes().splitlines(keepends=True)
    cut = [line for line in lines if not line.startswith(b'{"type":"same"')]
    path.write_bytes(b"".join(cut))
    for strict in (True, False):  # the line that declared it is lost: the row is kept, without them
        with pytest.warns(RuntimeWarning, match=r"run.jsonl:2: rows name a set of repeated fields \(0\) no line"):
            (row,) = gnnmon.load(path, strict=strict).records
        assert row["label"] == "<lambda>" and "notes" not in row and row["wall_s"] > 0


def test_your_field_cannot_be_named_same():
    @gnnmon.cuda_timed(device="cpu")
    def step() -> None:
        gnnmon.current_row().fields["same"] = 1

    with gnnmon.collect(), pytest.raises(ValueError, match="'same' would shadow the set of repeated fields"):
        step()


def test_values_of_yours_of_any_kind_are_written_and_read_back(tmp_path):
    """A tensor, an array, a dict, a zero and a null among your fields: each is yours (a zero of
    yours is a value, written on the row), and each reads back as the live row holds it."""
    import numpy

    @gnnmon.cuda_timed(device="cpu")
    def step(i: int) -> None:
        fields = gnnmon.current_row().fields
        fields["mine_tensor"] = torch.zeros(3)
        fields["mine_array"] = numpy.zeros(2)
        fields["mine_dict"] = {"a": [1, 2], "b": None}
        fields["mine_zero"] = 0
        fields["mine_none"] = None if i % 2 else i

    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path) as run:
        for i in range(6):
            step(i)
    rows = [line for line in _lines(path) if line["type"] == ROW]
    assert all(r["mine_zero"] == 0 and r["mine_tensor"] == [0.0, 0.0, 0.0] for r in rows)  # on the row itself
    assert gnnmon.load(path).records == json.loads(json.dumps(run.records, default=lambda o: o.tolist()))
