"""A run's plain result (gnnmon/data/result.py) on its own: made from planted parts it gives them
back (rows, config, sampler stats, counters' points, whether it ended); :meth:`RunResult.read` of
a planted file puts each kind of line in its place, with or without an end line, ignores a kind it
does not know, refuses the first damaged line of the file (a row's or another's) naming it, or with
``strict=False`` keeps every good line; :meth:`RunResult.merge` of two planted ranks (given in any
order) tags everything with its rank, in rank order, and says what each rank was; the deprecated
:meth:`RunResult.report` warns and uses the report stage registered."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from gnnmon.data.format import FORMAT, MANIFEST, encode
from gnnmon.data.result import RunResult
from gnnmon.errors import ReportFileError

ROWS = [{"label": "step", "index": 0, "wall_s": 0.5, "notes": ["a"]},
        {"label": "eval", "index": 0, "wall_s": 0.25, "device": "cpu"},
        {"label": "step", "index": 1, "wall_s": 0.75}]
GC = {"generation": 2, "t_start_ns": 100, "duration_s": 0.002, "collected": 4}
SAMPLE = {"t_ns": 150, "cpu_pct": 50.0}
MARKER = {"kind": "epoch", "t_ns": 50, "value": 1}
POINTS = [{"key": "gpu0_energy_mj", "t_ns": 1000, "value": 10.0, "err_ns": 5, "step": True},
          {"key": "gpu0_energy_mj", "t_ns": 2000, "value": 30.0, "err_ns": 5, "step": True},
          {"key": "rapl_package_j", "t_ns": 1500, "value": 7.0}]
END = {"rows": 3, "end_ns": 3000, "sampler": {"samples": 1, "cpu_s": 0.01}, "children_forked": 2}


def planted_file(path: Path, *, end: bool = True, manifest: dict | None = None) -> Path:
    manifest = manifest or {"format_version": 1, "config": {"lr": 0.01, "layers": [2, 3]}}
    lines = [{"type": MANIFEST, "format": FORMAT, **manifest}, {"type": "marker", **MARKER},
             {"type": "row", **ROWS[0]}, {"type": "gc", **GC}, {"type": "row", **ROWS[1]},
             {"type": "sample", **SAMPLE}, *({"type": "point", **p} for p in POINTS), {"type": "row", **ROWS[2]}]
    if end:
        lines.append({"type": "end", **END})
    path.write_bytes(b"".join(encode(o) + b"\n" for o in lines))
    return path


def test_a_result_made_from_planted_parts_gives_them_back():
    manifest = {"config": {"lr": 0.01}}
    run = RunResult(ROWS, manifest=manifest, gc_events=[GC], samples=[SAMPLE], markers=[MARKER], points=POINTS,
                    end=END, complete=True)
    assert run.records == ROWS and run.rows_written == 3 and run.table.labels() == ["step", "eval"]
    assert (run.gc_events, run.samples, run.markers) == ([GC], [SAMPLE], [MARKER])
    assert run.config == {"lr": 0.01}
    run.config["lr"] = 1.0  # a copy: the manifest is the file's
    assert manifest["config"] == {"lr": 0.01}
    assert run.sampler_stats == {"samples": 1, "cpu_s": 0.01} and run.children_forked == 2
    assert run.points == [{"key": "gpu0_energy_mj", "t_ns": 1000, "value": 10.0},
                          {"key": "gpu0_energy_mj", "t_ns": 2000, "value": 30.0},
                          {"key": "rapl_package_j", "t_ns": 1500, "value": 7.0}]
    assert run.counters.delta("gpu0_energy_mj", 1250, 1750) == pytest.approx(10.0)
    assert repr(run) == "<gnnmon.RunResult memory rows=3>"


def test_an_empty_result_has_defaults_and_says_it_is_incomplete():
    run = RunResult([], path="runs/x.jsonl")
    assert run.records == [] and run.config == {} and run.sampler_stats == {} and run.children_forked == 0
    assert run.points == [] and run.counters.keys() == [] and run.end == {} and run.ranks == {}
    assert run.path == Path("runs/x.jsonl") and repr(run) == "<gnnmon.RunResult runs/x.jsonl rows=0 incomplete>"


@pytest.mark.parametrize("end", [True, False])
def test_read_puts_each_kind_of_planted_line_in_its_place(tmp_path, end):
    path = planted_file(tmp_path / "run.jsonl", end=end)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a good file: not a word
        run = RunResult.read(path)
    assert run.manifest == {"format": FORMAT, "format_version": 1, "config": {"lr": 0.01, "layers": [2, 3]}}
    assert run.records == ROWS  # in file order, across labels, without their type
    assert (run.gc_events, run.samples, run.markers) == ([GC], [SAMPLE], [MARKER])
    assert run._points == POINTS  # as written: err_ns and step kept
    assert [(p["key"], p["t_ns"]) for p in run.points] == [("gpu0_energy_mj", 1000), ("gpu0_energy_mj", 2000),
                                                           ("rapl_package_j", 1500)]
    assert run.complete is end and run.end == (END if end else {}) and run.path == path
    assert run.config == {"lr": 0.01, "layers": [2, 3]}


def test_read_passes_over_a_kind_of_line_it_does_not_know(tmp_path):
    path = planted_file(tmp_path / "run.jsonl")
    with open(path, "ab") as f:
        f.write(encode({"type": "future", "t_ns": "whenever"}) + b"\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = RunResult.read(path)
    assert run.records == ROWS and run.complete


@pytest.mark.parametrize("first", ["row", "gc"])
def test_a_strict_read_refuses_the_first_damaged_line_of_the_file_whatever_its_kind(tmp_path, first):
    lines = [{"type": MANIFEST, "format": FORMAT},
             {"type": "row", **ROWS[0]},
             {"type": "row", **ROWS[1], "wall_s": "slow"},
             {"type": "gc", **GC, "duration_s": "long"},
             {"type": "row", **ROWS[2]}]
    if first == "gc":
        lines[2], lines[3] = lines[3], lines[2]
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(encode(o) + b"\n" for o in lines))
    whose = {"row": "a row's field 'wall_s' is a string ('slow')", "gc": "a GC event's field 'duration_s' is a string"}
    with pytest.raises(ReportFileError, match=re.escape(f"run.jsonl:3: {whose[first]}")):
        RunResult.read(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = RunResult.read(path, strict=False)
    assert run.records == [ROWS[0], {**ROWS[1], "wall_s": None}, ROWS[2]]  # every row kept, the damaged value null
    assert run.gc_events == []  # its required duration damaged: the event skipped
    assert len(caught) == 2


def test_rows_among_other_lines_go_into_the_table_a_chunk_at_a_time(tmp_path, monkeypatch):
    """Counted, not timed: a file of 3,000 rows of two labels with a marker, a GC event and a
    sample among them is read with no row added one at a time (each chunk's rows go in together),
    every line in its place."""
    from gnnmon.data.table import Table

    lines, rows = [{"type": MANIFEST, "format": FORMAT}], []
    for i in range(3000):
        rows.append({"label": "eval" if i % 1000 > 900 else "step", "index": i, "wall_s": i / 8})
        lines.append({"type": "row", **rows[-1]})
        if i % 250 == 0:
            lines += [{"type": "marker", **MARKER, "t_ns": i}, {"type": "gc", **GC}, {"type": "sample", **SAMPLE}]
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(encode(o) + b"\n" for o in lines))
    monkeypatch.setattr(Table, "add", lambda *a: pytest.fail("a row added one at a time"))
    run = RunResult.read(path)
    assert run.records == rows and run.table.labels() == ["step", "eval"]
    assert run.markers == [{**MARKER, "t_ns": i} for i in range(0, 3000, 250)]
    assert run.gc_events == [GC] * 12 and run.samples == [SAMPLE] * 12


def test_a_line_whose_type_is_no_string_is_refused_or_skipped(tmp_path):
    lines = [{"type": MANIFEST, "format": FORMAT}, {"type": "row", **ROWS[0]}, {"type": 5, "t_ns": 1},
             {"type": "row", **ROWS[2]}]
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(encode(o) + b"\n" for o in lines))
    with pytest.raises(ReportFileError, match=r"run\.jsonl:3: a line's field 'type' is an integer \(5\), not a string"):
        RunResult.read(path)
    with pytest.warns(RuntimeWarning, match=r"run\.jsonl:3: a line's field 'type' .*: skipped the line"):
        run = RunResult.read(path, strict=False)
    assert run.records == [ROWS[0], ROWS[2]]


@pytest.mark.parametrize("kind", [None, 5, ["row"], "missing"])
def test_a_line_without_a_string_type_among_rows_is_refused_as_anywhere_else(tmp_path, kind):
    odd = {"label": "step", "index": 9} if kind == "missing" else {"type": kind, "label": "step", "index": 9}
    lines = [{"type": MANIFEST, "format": FORMAT}, {"type": "row", **ROWS[0]}, odd, {"type": "row", **ROWS[2]}]
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(encode(o) + b"\n" for o in lines))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # NotImplemented in a boolean context (3.14: TypeError)
        with pytest.raises(ReportFileError, match=r"run\.jsonl:3: a line's field 'type'"):
            RunResult.read(path)


# -- a job ---------------------------------------------------------------------------------------

def rank(r: int, *, complete: bool = True, distributed: bool = True) -> RunResult:
    """Rank ``r``'s planted result: two rows of its own, an event of each kind, an end line."""
    manifest = {"format": FORMAT, "host": f"node{r}"}
    if distributed:
        manifest["distributed"] = {"rank": r, "world_size": 2, "job_path": "job.jsonl"}
    rows = [{"label": "step", "index": i, "wall_s": 0.1 * (r + 1) + i} for i in range(2)]
    return RunResult(rows, manifest=manifest, gc_events=[{**GC, "t_start_ns": 100 + r}],
                     samples=[{"t_ns": 10 + r}], markers=[{"kind": "epoch", "t_ns": 5 + r}],
                     points=[{"key": "gpu0_energy_mj", "t_ns": 1000, "value": 1.0 + r},
                             {"key": "gpu0_energy_mj", "t_ns": 2000, "value": 3.0 + 10 * r}],
                     end={"rows": 2, "end_ns": 3000 + r} if complete else None,
                     path=f"job.rank{r}.jsonl", complete=complete)


def test_merge_of_two_planted_ranks_tags_everything_with_its_rank_in_rank_order():
    zero, one = rank(0), rank(1)
    job = RunResult.merge([one, zero])  # given out of order
    assert job.records == [{**row, "rank": r} for r, part in ((0, zero), (1, one)) for row in part.records]
    assert job.gc_events == [{**GC, "t_start_ns": 100, "rank": 0}, {**GC, "t_start_ns": 101, "rank": 1}]
    assert job.samples == [{"t_ns": 10, "rank": 0}, {"t_ns": 11, "rank": 1}]
    assert job.markers == [{"kind": "epoch", "t_ns": 5, "rank": 0}, {"kind": "epoch", "t_ns": 6, "rank": 1}]
    planted = {0: (1.0, 3.0), 1: (2.0, 13.0)}  # each rank's counter at 1000 and 2000 ns
    assert job.points == [{"key": "gpu0_energy_mj", "t_ns": t, "value": v, "rank": r}
                          for r, values in planted.items() for t, v in zip((1000, 2000), values, strict=True)]
    assert job.counters.keys() == []  # the job's points are each rank's: read through ranks
    assert job.ranks[1].counters.delta("gpu0_energy_mj", 1000, 2000) == 11.0
    assert job.manifest["host"] == "node0"  # the lowest rank's
    assert job.manifest["ranks"] == [
        {"rank": r, "world_size": 2, "job_path": "job.jsonl", "file": f"job.rank{r}.jsonl", "complete": True}
        for r in (0, 1)]
    assert job.end == {"type": "end", "rows": 4, "ranks": [{"rows": 2, "end_ns": 3000, "rank": 0},
                                                           {"rows": 2, "end_ns": 3001, "rank": 1}]}
    assert job.complete is True and job.path == Path("job.rank0.jsonl")
    assert sorted(job.ranks) == [0, 1] and all(part.records == [] for part in job.ranks.values())
    assert job.ranks[1].manifest is one.manifest and job.ranks[1].gc_events == one.gc_events
    assert zero.records[0] == {"label": "step", "index": 0, "wall_s": 0.1}  # the ranks' own rows untouched


def test_merge_says_a_job_with_an_unfinished_rank_is_incomplete():
    job = RunResult.merge([rank(0), rank(1, complete=False)])
    assert job.complete is False and [r["complete"] for r in job.manifest["ranks"]] == [True, False]
    assert job.end["ranks"] == [{"rows": 2, "end_ns": 3000, "rank": 0}] and job.end["rows"] == 4


def test_merge_ranks_results_without_a_distributed_entry_by_their_position():
    a, b = rank(0, distributed=False), rank(1, distributed=False)
    job = RunResult.merge([b, a])  # b first: rank 0
    assert [(r["rank"], r["wall_s"]) for r in job.records] == [(0, 0.2), (0, 1.2), (1, 0.1), (1, 1.1)]
    assert [r["rank"] for r in job.manifest["ranks"]] == [0, 1] and job.manifest["host"] == "node1"


def test_merge_of_files_read_back(tmp_path):
    runs = []
    for r in (0, 1):
        path = planted_file(tmp_path / f"job.rank{r}.jsonl",
                            manifest={"distributed": {"rank": r, "world_size": 2}, "config": {"r": r}})
        runs.append(RunResult.read(path))
    job = RunResult.merge(runs)
    assert job.records == [{**row, "rank": r} for r in (0, 1) for row in ROWS]
    assert job.config == {"r": 0} and [m["file"] for m in job.manifest["ranks"]] == [
        str(tmp_path / f"job.rank{r}.jsonl") for r in (0, 1)]
    assert len(job.points) == 2 * len(POINTS)


# -- the deprecated report -----------------------------------------------------------------------

def test_a_plain_result_knows_no_report():
    """The report reads the result (gnnmon.Report(result)); the result has no way up to it."""
    assert not hasattr(RunResult(ROWS), "report")


def test_a_result_of_row_lines_reads_them_as_a_file_would_and_only_when_asked(tmp_path):
    """``RunResult.of_lines`` (a live run's window: one encoded row per line, no newline): the
    rows read back as the same lines written to a file and loaded, records first (no table made on
    the way) or the table first."""
    from gnnmon.data.format import ROW, encode, typed_line
    from gnnmon.data.load import load as load_file

    rows = [{"label": "step" if i % 3 else "eval", "index": i, "wall_s": i / 7, "notes": ["n"] * (i % 2)}
            for i in range(700)]  # several chunks, two labels interleaved
    rows[5]["mine"] = {"nested": [1, None, "x"]}  # a field of one row only
    lines = [typed_line(ROW, encode(r)) for r in rows]
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"type":"manifest","format":"gnnmon.jsonl"}\n' + b"".join(line + b"\n" for line in lines))
    from_file = load_file(path).records
    first_records = RunResult.of_lines(lines, manifest={"m": 1})
    assert first_records._table is None  # nothing read yet
    assert first_records.records == from_file == rows
    assert first_records._table is None  # records came straight from the lines
    first_table = RunResult.of_lines(lines)
    assert len(first_table.table) == 700 and first_table.table.labels() == ["eval", "step"]
    assert first_table.records == rows and first_table.manifest is None
    assert RunResult.of_lines([]).records == [] and len(RunResult.of_lines([]).table) == 0


@pytest.mark.parametrize(("manifest", "end", "one"), [
    ({"devices": {"torch_threads": 1}}, None, True), ({"devices": {"torch_threads": 2}}, None, False),
    ({"devices": {"torch_threads": 2}}, {"torch_threads": 1}, True),  # set after the start: the end's
    ({"devices": {"torch_threads": 1}}, {"torch_threads": 4}, False),
    (None, None, False), ({"devices": None}, {}, False), ({}, {"torch_threads": 1}, True)])
def test_one_thread_is_the_end_lines_thread_count_else_the_manifests(manifest, end, one):
    assert RunResult(ROWS, manifest=manifest, end=end).one_thread is one


def test_a_job_ran_on_one_thread_where_every_rank_did():
    ones = [RunResult(ROWS, manifest={"distributed": {"rank": r}}, end={"torch_threads": 1}) for r in (0, 1)]
    assert RunResult.merge(ones).one_thread
    mixed = [ones[0], RunResult(ROWS, manifest={"distributed": {"rank": 1}}, end={"torch_threads": 2})]
    assert not RunResult.merge(mixed).one_thread
