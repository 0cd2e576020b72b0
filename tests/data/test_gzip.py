"""A run file as a gzip stream (gnnmon/data/gz.py): ``collect("run.jsonl.gz")`` (or ``compress=True``
for any path) writes standard gzip whose lines are the rows as recorded; a stream cut at any byte
(a killed writer) reads to its last whole line and says it was cut; a distributed job's files keep
the ``.jsonl.gz`` suffix."""

from __future__ import annotations

import gzip
import json
import warnings
import zlib

import pytest

import gnnmon
from gnnmon.data.gz import Compressor
from gnnmon.data.paths import job_files, rank_path


@gnnmon.cuda_timed(device="cpu")
def step(i: int) -> int:
    with gnnmon.phase("forward"):
        pass
    return i


def record(path, n: int = 300, **options) -> list[dict]:
    with gnnmon.collect(path, max_records=None, **options) as run:
        for i in range(n):
            step(i)
    return run.records


@pytest.mark.parametrize("name, options, compressed", [
    ("run.jsonl.gz", {}, True), ("run.jsonl", {"compress": True}, True), ("run.jsonl.gz", {"compress": False}, False),
    ("run.jsonl", {}, False)])
def test_the_suffix_or_the_option_says_whether_the_file_is_gzip(tmp_path, name, options, compressed):
    path = tmp_path / name
    live = record(path, **options)
    data = path.read_bytes()
    assert (data[:2] == b"\x1f\x8b") == compressed
    text = gzip.decompress(data) if compressed else data
    rows = [json.loads(line) for line in text.splitlines() if b'"type":"row"' in line]
    assert [{k: v for k, v in r.items() if k != "type"} for r in rows] == live  # each line the row as recorded
    assert gnnmon.load(path).records == live


def test_a_bad_compress_option_is_named():
    with pytest.raises(TypeError, match=r"compress must be True \(a gzip stream\), False \(plain lines\) or None"):
        gnnmon.collect("x.jsonl", compress="zstd")


def test_a_stream_cut_anywhere_reads_to_its_last_whole_line_and_says_so(tmp_path):
    """A killed writer leaves a stream without its end: cut at 40 places through its last batches,
    every read keeps the rows of the batches whole before the cut (never fewer than the batches
    entirely before it) and warns that the stream is cut."""
    path = tmp_path / "run.jsonl.gz"
    live = record(path, n=600, flush_interval=0.01)
    data = path.read_bytes()
    for k in range(40):
        at = len(data) - 1 - k * (len(data) // 80)
        cut = tmp_path / f"cut{k}.jsonl.gz"
        cut.write_bytes(data[:at])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = gnnmon.load(cut).records
        assert rows == live[: len(rows)]  # a prefix of the rows, each whole
        whole = zlib.decompressobj(31).decompress(data[:at]).count(b'"type":"row"') - 1  # the last may be cut
        assert len(rows) >= whole
        assert any("the compressed stream is cut off" in str(w.message)
                   for w in caught), [str(w.message) for w in caught]


def test_a_stream_of_several_members_reads_whole(tmp_path):
    """gzip readers read members one after another: so does gnnmon's."""
    path = tmp_path / "two.jsonl.gz"
    live = record(path, n=50)
    one, two = Compressor(), Compressor()
    lines = gzip.decompress(path.read_bytes()).splitlines(keepends=True)
    half = len(lines) // 2
    path.write_bytes(one.batch(b"".join(lines[:half])) + one.finish()
                     + two.batch(b"".join(lines[half:])) + two.finish())
    assert gnnmon.load(path).records == live


def test_a_jobs_compressed_files_keep_their_suffix(tmp_path):
    assert rank_path("runs/job.jsonl.gz", 1).name == "job.rank1.jsonl.gz"
    assert rank_path("runs/job.jsonl", 1).name == "job.rank1.jsonl"
    record(tmp_path / "job.rank0.jsonl.gz", n=10)
    assert job_files(tmp_path / "job.jsonl.gz") == [tmp_path / "job.rank0.jsonl.gz"]
