"""Reading a run file (gnnmon/data/read.py) on its own, from planted lines: every object back in
order, each chunk numbered by its first line, across chunks and blank lines; a file cut mid-line
keeps every earlier line and warns of the cut one; a corrupt line is refused naming its line (and
the field where its parser stopped), or with ``strict=False`` skipped with a warning, every other
line kept; what is no gnnmon manifest is refused by what its first line holds; rows named by a
``same`` line are read back whole; a row without its label or index is refused or skipped
(:func:`bad_row`); :func:`row_lines` finds a row's line; ``progress`` counts every byte read."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from gnnmon.data import format as format_module
from gnnmon.data import read as read_module
from gnnmon.data.format import FORMAT, FORMAT_VERSION, MANIFEST, ROW, SAME, encode
from gnnmon.data.read import CHUNK_BYTES, SKIP_HINT, bad_row, read_chunks, read_lines, row_lines
from gnnmon.errors import ReportFileError

MANIFEST_LINE = {"type": MANIFEST, "format": FORMAT, "format_version": FORMAT_VERSION, "config": {"lr": 0.01}}


def planted_rows(n: int, label: str = "step") -> list[dict]:
    return [{"type": ROW, "label": label, "index": i, "wall_s": i / 8, "notes": ["a"] if i % 3 else None}
            for i in range(n)]


def write_lines(path: Path, objs: list[dict], tail: bytes = b"") -> Path:
    """``objs`` as the writer's lines (each ending in a newline), then ``tail`` as it is."""
    path.write_bytes(b"".join(encode(o) + b"\n" for o in objs) + tail)
    return path


def caught(fn):
    """What ``fn()`` returns and the messages of the warnings it gave."""
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in found]


def numbered(path: Path, strict: bool = True) -> dict[int, dict]:
    """Every object :func:`read_chunks` gives, by the line it says it came from."""
    return {n + i: obj for n, objs in read_chunks(path, strict=strict) for i, obj in enumerate(objs)}


# -- a good file ----------------------------------------------------------------------------------

def test_every_planted_line_reads_back_in_order_manifest_first(tmp_path):
    objs = [MANIFEST_LINE, *planted_rows(5), {"type": "gc", "generation": 2, "t_start_ns": 10, "duration_s": 0.5},
            {"type": "end", "rows": 5}]
    path = write_lines(tmp_path / "run.jsonl", objs)
    (got, said) = caught(lambda: list(read_lines(path)))
    assert got == objs and said == []
    assert [type(o["wall_s"]) for o in got if o["type"] == ROW] == [float] * 5  # 0.0 stays a float


def test_each_chunk_is_numbered_by_its_first_line_across_many_chunks(tmp_path):
    rows = planted_rows(3000)  # about 200 KB: several chunks of CHUNK_BYTES
    path = write_lines(tmp_path / "run.jsonl", [MANIFEST_LINE, *rows])
    assert path.stat().st_size > 4 * CHUNK_BYTES
    chunks = list(read_chunks(path))
    assert len(chunks) > 4 and chunks[0] == (1, [MANIFEST_LINE])
    by_line = numbered(path)
    assert sorted(by_line) == list(range(1, 3002))
    assert all(by_line[i + 2] == row for i, row in enumerate(rows))  # row i is line i + 2


def test_each_line_is_decoded_once_one_parser_call_a_line(tmp_path, monkeypatch):
    """Counted, not timed: reading a file of several chunks (rows, markers, a GC event) decodes
    each line once, by one orjson call for that line alone: no chunk decoded again as an array,
    no line twice, and json (several times slower) never called."""
    pytest.importorskip("orjson")
    decoded: list[bytes] = []
    real = format_module._orjson_loads
    monkeypatch.setattr(format_module, "_orjson_loads", lambda line: decoded.append(line) or real(line))
    monkeypatch.setattr(format_module.json, "loads", lambda *a, **k: pytest.fail("json decoded a line"))
    objs = [MANIFEST_LINE]
    for i, row in enumerate(planted_rows(3000)):
        objs += [row] + ([{"type": "marker", "kind": "epoch", "t_ns": i}] if i % 500 == 0 else [])
    objs.insert(700, {"type": "gc", "generation": 0, "t_start_ns": 5, "duration_s": 0.001})
    path = write_lines(tmp_path / "run.jsonl", objs)
    assert list(read_lines(path)) == objs
    assert sorted(decoded) == sorted(path.read_bytes().splitlines(keepends=True))


def test_blank_lines_are_passed_over_and_every_line_keeps_its_number(tmp_path):
    objs = [MANIFEST_LINE, *planted_rows(4)]
    lines = [encode(o) for o in objs]
    path = tmp_path / "run.jsonl"
    path.write_bytes(lines[0] + b"\n" + lines[1] + b"\n\n   \n" + b"\n".join(lines[2:]) + b"\n")
    by_line = numbered(path)
    assert by_line == {1: objs[0], 2: objs[1], 5: objs[2], 6: objs[3], 7: objs[4]}


def test_a_last_line_complete_but_without_its_newline_is_read(tmp_path):
    objs = [MANIFEST_LINE, *planted_rows(3)]
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"\n".join(encode(o) for o in objs))
    got, said = caught(lambda: list(read_lines(path)))
    assert got == objs and said == []


def test_a_manifest_spaced_by_another_writer_is_a_manifest(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(MANIFEST_LINE, indent=None) + "\n" + json.dumps(planted_rows(1)[0]) + "\n")
    assert list(read_lines(path)) == [MANIFEST_LINE, planted_rows(1)[0]]


# -- a file cut mid-line ------------------------------------------------------------------------

@pytest.mark.parametrize("rows", [3, 3000])
@pytest.mark.parametrize("keep", [1, 0.5, -1])
def test_a_file_cut_mid_line_keeps_every_earlier_line_and_warns_of_the_cut_one(tmp_path, rows, keep):
    objs = [MANIFEST_LINE, *planted_rows(rows)]
    last = encode({"type": ROW, "label": "step", "index": rows, "wall_s": 1.5, "notes": ["cut"]})
    cut = int(len(last) * keep) if isinstance(keep, float) else keep if keep > 0 else len(last) + keep
    path = write_lines(tmp_path / "run.jsonl", objs, tail=last[:cut])
    for strict in (True, False):  # a cut last line is no corruption
        got, said = caught(lambda s=strict: list(read_lines(path, strict=s)))
        assert got == objs
        n = len(objs) + 1
        assert said == [f"{path}: last line {n} is cut off (the writer was interrupted); read the {n - 1} complete "
                        "line(s) before it"]


def test_a_file_cut_in_its_manifest_reads_nothing_and_warns(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(encode(MANIFEST_LINE)[:50])
    got, said = caught(lambda: list(read_chunks(path)))
    assert got == [] and said == [f"{path}: last line 1 is cut off (the writer was interrupted); read the 0 complete "
                                  "line(s) before it"]


# -- corrupt lines ------------------------------------------------------------------------------

CORRUPT = {
    "cut, then more lines": b'{"type":"row","label":"step","index":9,"wall_s":0.',
    "a NaN token": b'{"type":"row","label":"step","index":9,"wall_s":NaN}',
    "an array": b"[1, 2, 3]",
    "a string": b'"row"',
    "not JSON": b"hello",
}


@pytest.mark.parametrize("what", list(CORRUPT))
@pytest.mark.parametrize("rows", [4, 3000])
def test_a_corrupt_line_is_refused_naming_it_or_skipped_keeping_every_other_line(tmp_path, what, rows):
    objs = [MANIFEST_LINE, *planted_rows(rows)]
    at = 1 + rows // 2  # a line in the middle (0-based among objs): its 1-based number is at + 1
    lines = [encode(o) for o in objs]
    lines.insert(at, CORRUPT[what])
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(ReportFileError, match=rf"run\.jsonl:{at + 1}: corrupt line \(") as raised:
        list(read_lines(path))
    assert str(raised.value).startswith(f"{path}:{at + 1}: ") and str(raised.value).endswith(SKIP_HINT)
    got, said = caught(lambda: list(read_lines(path, strict=False)))
    assert got == objs  # every other line kept, in order
    assert len(said) == 1 and said[0].startswith(f"{path}:{at + 1}: skipped a corrupt line (")


def test_a_corrupt_line_names_the_field_where_its_parser_stopped(tmp_path):
    path = write_lines(tmp_path / "run.jsonl", [MANIFEST_LINE, *planted_rows(2)],
                       tail=b'{"type":"row","label":"step","index":2,"wall_s":0.5,"notes":[oops]}\n')
    with pytest.raises(ReportFileError, match=r"run\.jsonl:4: corrupt line \(.*, in field 'notes'\)"):
        list(read_lines(path))


def test_a_complete_corrupt_manifest_is_skipped_leniently_and_the_rest_read(tmp_path):
    path = tmp_path / "run.jsonl"
    rows = planted_rows(3)
    path.write_bytes(b'{"type":"manifest","format":"gnnmon.jsonl","config":{"lr":}}\n'
                     + b"".join(encode(r) + b"\n" for r in rows))
    with pytest.raises(ReportFileError, match=r"run\.jsonl:1: corrupt line"):
        list(read_lines(path))
    got, said = caught(lambda: list(read_lines(path, strict=False)))
    assert got == rows and len(said) == 1 and f"{path}:1: skipped a corrupt line" in said[0]


# -- what is not a gnnmon run ------------------------------------------------------------------

@pytest.mark.parametrize("first, held", [
    ({"type": "manifest", "format": "other.jsonl"}, "field 'format' is 'other.jsonl', not 'gnnmon.jsonl'"),
    ({"type": "manifest"}, "field 'format' is missing, not 'gnnmon.jsonl'"),
    ({"type": "row", "format": FORMAT}, "field 'type' is 'row', not 'manifest'"),
    ({"format": FORMAT}, "field 'type' is missing, not 'manifest'"),
])
def test_a_first_line_that_is_no_gnnmon_manifest_is_refused_by_what_it_holds(tmp_path, first, held):
    path = write_lines(tmp_path / "run.jsonl", [first, *planted_rows(2)])
    for strict in (True, False):
        with pytest.raises(ReportFileError, match="not a gnnmon report") as raised:
            list(read_chunks(path, strict=strict))
        assert str(raised.value) == (f"{path}:1: not a gnnmon report: line 1 is not a gnnmon.jsonl manifest (its "
                                     f"{held})")


@pytest.mark.parametrize("content", [b"", b"\n", b"   \n{}\n"])
def test_an_empty_file_is_refused_as_empty(tmp_path, content):
    path = tmp_path / "run.jsonl"
    path.write_bytes(content)
    with pytest.raises(ReportFileError, match=r"run\.jsonl is empty: no gnnmon manifest line"):
        list(read_chunks(path))


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^no such file: .*nothing\.jsonl$"):
        list(read_chunks(tmp_path / "nothing.jsonl"))


# -- rows ----------------------------------------------------------------------------------------

def test_rows_naming_a_set_of_repeated_fields_are_read_back_whole(tmp_path):
    same = {"type": SAME, "id": 0, "keys": ["label", "index", "device", "wall_s", "notes"],
            "fields": {"device": "cpu", "notes": ["warm"]}}
    path = write_lines(tmp_path / "run.jsonl", [
        MANIFEST_LINE, same, {"type": ROW, "label": "s", "index": 0, "wall_s": 0.5, "same": 0},
        {"type": ROW, "label": "s", "index": 1, "wall_s": 0.25, "same": 0}])
    got = list(read_lines(path))
    assert got[1] == same  # the set's own line is given too
    assert got[2:] == [{"type": ROW, "label": "s", "index": i, "device": "cpu", "wall_s": w, "notes": ["warm"]}
                       for i, w in ((0, 0.5), (1, 0.25))]
    assert [list(r) for r in got[2:]] == [["type", "label", "index", "device", "wall_s", "notes"]] * 2  # in order
    assert got[2]["notes"] is not got[3]["notes"]  # each row's list its own


@pytest.mark.parametrize("row, field, held", [
    ({"type": ROW, "index": 1}, "label", "missing"),
    ({"type": ROW, "label": 3, "index": 1}, "label", "3, not a string"),
    ({"type": ROW, "label": "s"}, "index", "missing"),
    ({"type": ROW, "label": "s", "index": "1"}, "index", "'1', not an integer"),
    ({"type": ROW, "label": "s", "index": 1.0}, "index", "1.0, not an integer"),
    ({"type": ROW, "label": "s", "index": True}, "index", "True, not an integer"),
])
def test_a_row_without_its_label_and_index_is_refused_or_skipped(tmp_path, row, field, held):
    path = tmp_path / "run.jsonl"
    with pytest.raises(ReportFileError) as raised:
        bad_row(path, 7, row, strict=True)
    assert str(raised.value) == (f"{path}:7: a row without its label and index (its field {field!r} is {held}); "
                                 f"skip it with {SKIP_HINT}")
    skipped, said = caught(lambda: bad_row(path, 7, row, strict=False))
    assert skipped is True and said == [f"{path}:7: skipped a row without its label and index (its field "
                                        f"{field!r} is {held})"]
    assert bad_row(path, 7, {"type": ROW, "label": "s", "index": 0}, strict=True) is False

    rows = planted_rows(3)
    write_lines(path, [MANIFEST_LINE, rows[0], row, rows[1], rows[2]])
    with pytest.raises(ReportFileError, match=r"run\.jsonl:3: a row without its label and index"):
        list(read_lines(path))
    got, said = caught(lambda: list(read_lines(path, strict=False)))
    assert got == [MANIFEST_LINE, *rows] and len(said) == 1 and said[0].startswith(f"{path}:3: skipped a row")


def test_row_lines_finds_the_line_of_each_row_among_those_a_read_keeps(tmp_path):
    rows = planted_rows(6)
    objs = [MANIFEST_LINE, {"type": "marker", "kind": "epoch", "t_ns": 1}, rows[0], rows[1],
            {"type": ROW, "index": 99},  # no label: not among the rows a read keeps
            {"type": "sample", "t_ns": 2}, rows[2], rows[3], rows[4], rows[5]]
    path = write_lines(tmp_path / "run.jsonl", objs)
    assert row_lines(path, {0, 2, 5}) == {0: 3, 2: 7, 5: 10}
    assert row_lines(path, {1}) == {1: 4} and row_lines(path, {6}) == {}


# -- progress -----------------------------------------------------------------------------------

@pytest.mark.parametrize("cut", [False, True])
def test_progress_is_told_every_byte_read_a_few_at_a_time(tmp_path, monkeypatch, cut):
    every = 64 << 10
    monkeypatch.setattr(read_module, "PROGRESS_EVERY", every)
    path = write_lines(tmp_path / "run.jsonl", [MANIFEST_LINE, *planted_rows(3000)],
                       tail=b'{"type":"row","lab' if cut else b"")
    told: list[int] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = sum(1 for o in read_lines(path, progress=told.append) if o["type"] == ROW)
    assert rows == 3000 and sum(told) == path.stat().st_size
    assert len(told) >= 3 and 0 < told[-1] and all(every <= n < every + CHUNK_BYTES + 200 for n in told[:-1])
