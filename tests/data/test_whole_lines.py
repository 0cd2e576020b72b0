"""Every line of a run file stands alone (format version 2): each row line, read with plain ``json``
one line at a time, is the row as the live run recorded it, field for field and type for type;
a version 1 file (rows naming ``same`` lines for what repeated on them) still reads back whole; a
file of a newer version is refused with both versions named."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest
import torch

import gnnmon
from gnnmon.data.format import FORMAT_VERSION
from gnnmon.errors import ReportFileError

FILES = Path(__file__).resolve().parents[1] / "files"


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


@gnnmon.cuda_timed(device="cpu")
def failing(i: int) -> None:
    gnnmon.current_row().fields["mine"] = i if i % 2 else None  # a field of yours, sometimes null
    gnnmon.current_row().note(f"call {i % 3}")
    if i % 4 == 0:
        raise ValueError("planted")


def test_each_row_line_is_the_row_as_recorded(tmp_path):
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path, sample=0.05, max_records=None) as run:
        for i in range(40):
            full_stack(i)
            with pytest.raises(ValueError) if i % 4 == 0 else contextlib.nullcontext():
                failing(i)
    live = run.records
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert lines[0]["type"] == "manifest" and lines[0]["format_version"] == FORMAT_VERSION == 3
    rows = [line for line in lines if line["type"] == "row"]
    assert len(rows) == len(live) == 80 and {line["type"] for line in lines} <= {
        "manifest", "row", "gc", "sample", "point", "marker", "end"}
    for line, row in zip(rows, live, strict=True):
        del line["type"]
        assert line == row and [(k, type(v)) for k, v in line.items()] == [(k, type(v)) for k, v in row.items()]
    assert gnnmon.load(path).records == live


def test_a_version_1_file_reads_back_whole():
    """tests/files/run-v1-same.jsonl: written by format version 1 (11 ``same`` lines for 24 rows);
    its rows as that run held them live are beside it."""
    path = FILES / "run-v1-same.jsonl"
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert lines[0]["format_version"] == 1 and sum(line["type"] == "same" for line in lines) == 11
    recorded = json.loads((FILES / "run-v1-same.records.json").read_text())
    assert gnnmon.load(path).records == recorded and len(recorded) == 24


def test_a_newer_format_is_refused_naming_both_versions(tmp_path):
    path = tmp_path / "future.jsonl"
    lines = (FILES / "run-v1-same.jsonl").read_bytes().splitlines()
    manifest = json.loads(lines[0]) | {"format_version": FORMAT_VERSION + 1, "gnnmon": "9.0.0"}
    path.write_bytes(json.dumps(manifest).encode() + b"\n" + b"\n".join(lines[1:]) + b"\n")
    with pytest.raises(ReportFileError) as refused:
        gnnmon.load(path)
    said = str(refused.value)
    assert f"format version {FORMAT_VERSION + 1}" in said and "gnnmon (9.0.0)" in said
    assert f"reads versions 1 to {FORMAT_VERSION}" in said and "upgrade gnnmon" in said
