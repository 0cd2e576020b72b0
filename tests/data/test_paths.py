"""Where a job's files are (gnnmon/data/paths.py): :func:`rank_path` names each rank's file from
the path every rank was given (``.rank<N>`` before the suffix, or in place of ``{rank}``; outside a
job the path as given); :func:`job_files` finds the ranks' files of a planted job folder in rank
order, those :func:`rank_path` names and no others."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gnnmon.data.paths import RANK_FIELD, job_files, rank_path


@pytest.mark.parametrize("given, rank, want", [
    ("runs/job.jsonl", 0, "runs/job.rank0.jsonl"),
    ("runs/job.jsonl", 1, "runs/job.rank1.jsonl"),
    ("runs/job.jsonl", 12, "runs/job.rank12.jsonl"),
    ("job.jsonl", 3, "job.rank3.jsonl"),
    ("runs/job", 2, "runs/job.rank2"),  # no suffix: at the end
    ("runs/job.v2.jsonl", 1, "runs/job.v2.rank1.jsonl"),  # before the last suffix only
    ("runs/job-{rank}.jsonl", 4, "runs/job-4.jsonl"),
    ("runs/{rank}/job.jsonl", 5, "runs/5/job.jsonl"),  # in a folder's name too
    ("runs/job.jsonl", None, "runs/job.jsonl"),  # outside a job: as given
    ("runs/job-{rank}.jsonl", None, "runs/job-0.jsonl"),
])
def test_rank_path_names_each_ranks_file(given, rank, want):
    assert rank_path(given, rank) == Path(want)
    assert rank_path(Path(given), rank) == Path(want)  # a path as well as a string


def test_rank_path_takes_any_path_like():
    class Where(os.PathLike):
        def __fspath__(self) -> str:
            return "out/run.jsonl"

    assert rank_path(Where(), 7) == Path("out/run.rank7.jsonl")
    assert RANK_FIELD == "{rank}"


def plant(folder: Path, names: list[str]) -> None:
    for name in names:
        (folder / name).write_text("")


def test_job_files_find_the_files_rank_path_names_in_rank_order(tmp_path):
    ranks = [3, 0, 11, 1, 2]
    for given in (tmp_path / "job.jsonl", tmp_path / "job_{rank}.jsonl", tmp_path / "r{rank}-job.jsonl"):
        plant(tmp_path, [rank_path(given, r).name for r in ranks])
        assert job_files(given) == [rank_path(given, r) for r in sorted(ranks)]
        assert job_files(str(given)) == job_files(given)


def test_job_files_leave_out_other_runs_and_names_that_only_look_alike(tmp_path):
    plant(tmp_path, ["job.rank0.jsonl", "job.rank1.jsonl",
                     "job.jsonl",  # the path as given: no rank's file
                     "job.rank.jsonl", "job.rankA.jsonl", "job.rank1.jsonl.tmp", "job.rank2.json",
                     "myjob.rank0.jsonl", "job.rank0.extra.jsonl", ".job.rank3.jsonl.123.tmp",
                     "other.rank0.jsonl"])
    (tmp_path / "sub").mkdir()
    plant(tmp_path / "sub", ["job.rank5.jsonl"])  # another folder's
    assert [f.name for f in job_files(tmp_path / "job.jsonl")] == ["job.rank0.jsonl", "job.rank1.jsonl"]


def test_job_files_of_a_job_with_no_files_is_empty(tmp_path):
    assert job_files(tmp_path / "job.jsonl") == []
    assert job_files(tmp_path / "job-{rank}.jsonl") == []
    plant(tmp_path, ["job.jsonl", "job.rank.jsonl"])
    assert job_files(tmp_path / "job.jsonl") == []


def test_job_files_are_found_from_a_relative_path(tmp_path, monkeypatch):
    (tmp_path / "runs").mkdir()
    plant(tmp_path / "runs", ["job.rank1.jsonl", "job.rank0.jsonl"])
    monkeypatch.chdir(tmp_path)
    assert job_files("runs/job.jsonl") == [Path("runs/job.rank0.jsonl"), Path("runs/job.rank1.jsonl")]


def test_job_files_find_the_ranks_of_a_job_whose_name_has_brackets(tmp_path):
    given = tmp_path / "job[1].jsonl"
    plant(tmp_path, [rank_path(given, r).name for r in (1, 0)])
    assert job_files(given) == [rank_path(given, 0), rank_path(given, 1)]
