"""Reading a run back (gnnmon/data/load.py) from planted files: one run's file; a planted two-rank
job loaded from the path its ranks were given (with or without ``{rank}``), a glob, a folder or
any rank's file, each as one result whose rows carry their rank, and a rank's file alone with
``job=False``; a folder that is not one job refused by name; ``strict`` and ``progress`` passed to
every file read; :func:`iter_rows` giving each row whole, without its type, as an independent
reader of the format does."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from gnnmon.data.format import FORMAT, MANIFEST, SAME, encode
from gnnmon.data.load import iter_rows, load
from gnnmon.data.paths import rank_path
from gnnmon.data.result import RunResult
from gnnmon.errors import ReportFileError
from tests import rawjsonl

FILES = Path(__file__).resolve().parents[1] / "files"


def rows_of(rank: int | None, n: int = 3) -> list[dict]:
    shift = 0 if rank is None else rank
    return [{"label": "step", "index": i, "wall_s": 0.5 + i + 10 * shift} for i in range(n)]


def plant(path: Path, rank: int | None, *, job_path: str = "job.jsonl", end: bool = True, world: int = 2) -> Path:
    """A run's file: a manifest (a rank's of a job of ``world`` ranks given ``job_path``, or no
    job's), a marker, its rows, a GC event and an end line."""
    manifest = {"type": MANIFEST, "format": FORMAT, "format_version": 1, "host": f"h{rank}"}
    if rank is not None:
        manifest["distributed"] = {"rank": rank, "world_size": world, "job_path": job_path}
    lines = [manifest, {"type": "marker", "kind": "epoch", "t_ns": 1, "value": 0},
             *({"type": "row", **r} for r in rows_of(rank)),
             {"type": "gc", "generation": 0, "t_start_ns": 5, "duration_s": 0.001}]
    if end:
        lines.append({"type": "end", "rows": 3})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(encode(o) + b"\n" for o in lines))
    return path


def plant_job(folder: Path, given: str = "job.jsonl", ranks=(1, 0)) -> list[Path]:
    return [plant(rank_path(folder / given, r), r, job_path=given) for r in ranks]


def assert_the_job(run: RunResult, ranks=(0, 1)) -> None:
    assert run.records == [{**row, "rank": r} for r in ranks for row in rows_of(r)]
    assert [m["rank"] for m in run.manifest["ranks"]] == list(ranks) and run.complete
    assert sorted(run.ranks) == list(ranks) and [e["rank"] for e in run.gc_events] == list(ranks)


def test_one_runs_file_loads_as_it_was_written(tmp_path):
    path = plant(tmp_path / "run.jsonl", None)
    run = load(path)
    assert run.records == rows_of(None) and run.complete and run.path == path and run.ranks == {}
    assert run.manifest["host"] == "hNone" and [m["kind"] for m in run.markers] == ["epoch"]
    assert load(str(path)).records == run.records  # a string as well as a path


def test_a_run_that_did_not_end_loads_incomplete(tmp_path):
    run = load(plant(tmp_path / "run.jsonl", None, end=False))
    assert run.records == rows_of(None) and run.complete is False and run.end == {}


@pytest.mark.parametrize("given", ["job.jsonl", "job-{rank}.jsonl"])
def test_a_job_loads_from_the_path_its_ranks_were_given(tmp_path, given):
    plant_job(tmp_path, given)
    assert not (tmp_path / given).exists()
    job = load(tmp_path / given)
    assert_the_job(job)
    assert [m["file"] for m in job.manifest["ranks"]] == [str(rank_path(tmp_path / given, r)) for r in (0, 1)]


def test_a_job_loads_from_a_glob_of_its_files(tmp_path):
    plant_job(tmp_path)
    assert_the_job(load(str(tmp_path / "job.rank*.jsonl")))
    one = load(str(tmp_path / "job.rank1*.jsonl"))  # a glob matching one rank's file: that rank, as a job
    assert one.records == [{**row, "rank": 1} for row in rows_of(1)]


def test_a_job_loads_from_a_folder_of_its_files(tmp_path):
    plant_job(tmp_path / "job")
    assert_the_job(load(tmp_path / "job"))


@pytest.mark.parametrize("rank", [0, 1])
def test_any_ranks_file_loads_the_job_and_alone_with_job_false(tmp_path, rank):
    files = plant_job(tmp_path)
    given = next(f for f in files if f.name == f"job.rank{rank}.jsonl")
    assert_the_job(load(given))
    alone = load(given, job=False)
    assert alone.records == rows_of(rank) and alone.ranks == {} and alone.path == given
    assert alone.manifest["distributed"]["rank"] == rank


def test_a_ranks_file_whose_other_ranks_are_missing_loads_alone(tmp_path):
    path = plant(tmp_path / "job.rank1.jsonl", 1)
    run = load(path)
    assert run.records == rows_of(1) and run.ranks == {}


def test_a_ranks_file_of_another_job_in_the_folder_is_not_merged_in(tmp_path):
    plant_job(tmp_path)
    plant(tmp_path / "other.rank2.jsonl", 2, job_path="other.jsonl")
    assert_the_job(load(tmp_path / "job.rank0.jsonl"))


def test_a_folder_that_is_not_one_jobs_files_is_refused_by_name(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no run here")
    with pytest.raises(ReportFileError, match=r"empty is a folder with no \.jsonl or \.jsonl\.gz file in it"):
        load(empty)
    mixed = tmp_path / "mixed"
    plant_job(mixed)
    plant(mixed / "alone.jsonl", None)
    with pytest.raises(ReportFileError, match=r"mixed is a folder, not one distributed job's files \(.*alone\.jsonl\)"):
        load(mixed)
    twice = tmp_path / "twice"
    plant(twice / "a.rank0.jsonl", 0)
    plant(twice / "b.rank0.jsonl", 0)
    with pytest.raises(ReportFileError, match=r"twice is a folder, not one distributed job's files \(two files of one "
                                              r"rank\)"):
        load(twice)


def test_a_path_with_no_run_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^no such file: .*nothing\.jsonl$"):
        load(tmp_path / "nothing.jsonl")


def test_strict_is_passed_to_every_ranks_file(tmp_path):
    files = plant_job(tmp_path)
    rank1 = next(f for f in files if f.name == "job.rank1.jsonl")
    lines = rank1.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b'"wall_s":11.5', b'"wall_s":"slow"')  # rank 1's second row
    rank1.write_bytes(b"\n".join(lines))
    for given in (tmp_path / "job.jsonl", tmp_path, tmp_path / "job.rank0.jsonl", str(tmp_path / "job.rank*.jsonl")):
        with pytest.raises(ReportFileError, match=r"job\.rank1\.jsonl:4: a row's field 'wall_s' is a string"):
            load(given)
        with pytest.warns(RuntimeWarning, match=r"job\.rank1\.jsonl:4: a row's field 'wall_s'"):
            job = load(given, strict=False)
        assert [r["wall_s"] for r in job.records if r["rank"] == 1] == [10.5, None, 12.5]


def test_progress_is_told_the_bytes_of_every_file_read(tmp_path):
    files = plant_job(tmp_path)
    told: list[int] = []
    load(tmp_path / "job.jsonl", progress=told.append)
    assert sum(told) == sum(f.stat().st_size for f in files)
    told.clear()
    load(files[0], job=False, progress=told.append)
    assert sum(told) == files[0].stat().st_size


def test_iter_rows_gives_each_row_whole_without_its_type(tmp_path):
    path = tmp_path / "run.jsonl"
    same = {"type": SAME, "id": 0, "keys": ["label", "index", "device", "wall_s"], "fields": {"device": "cpu"}}
    lines = [{"type": MANIFEST, "format": FORMAT}, same, {"type": "row", "label": "s", "index": 0, "wall_s": 0.5,
                                                          "same": 0},
             {"type": "sample", "t_ns": 3}, {"type": "row", "label": "t", "index": 0, "wall_s": 1.5, "device": "x"}]
    path.write_bytes(b"".join(encode(o) + b"\n" for o in lines))
    got = list(iter_rows(path))
    assert got == [{"label": "s", "index": 0, "device": "cpu", "wall_s": 0.5},
                   {"label": "t", "index": 0, "wall_s": 1.5, "device": "x"}]
    assert got == rawjsonl.rows(path) and list(got[0]) == ["label", "index", "device", "wall_s"]


def test_iter_rows_refuses_or_skips_a_row_without_its_label(tmp_path):
    path = plant(tmp_path / "run.jsonl", None)
    lines = path.read_bytes().split(b"\n")
    lines.insert(3, encode({"type": "row", "index": 7}))
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(ReportFileError, match=r"run\.jsonl:4: a row without its label and index"):
        list(iter_rows(path))
    with pytest.warns(RuntimeWarning, match=r"run\.jsonl:4: skipped a row"):
        assert list(iter_rows(path, strict=False)) == rows_of(None)


def test_iter_rows_and_load_read_a_file_of_an_old_version_as_an_independent_reader_does():
    path = FILES / "run-0.1.0-flat-layout.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(iter_rows(path)) == load(path).records == rawjsonl.rows(path)
    assert len(rawjsonl.rows(path)) == 12


def test_a_job_whose_path_has_brackets_loads_as_one(tmp_path):
    plant_job(tmp_path, "job[1].jsonl")
    assert_the_job(load(tmp_path / "job[1].rank0.jsonl"))
    assert_the_job(load(tmp_path / "job[1].jsonl"))
