"""Writing a run file (gnnmon/data/write.py) on its own: the manifest and every line written read
back exactly, one line each, in order (from several threads too); modes ``w``, ``x`` and ``a``; a
header JSON cannot hold fails before any file is touched; a path this process already writes is
refused; a write the disk cuts short keeps the whole lines that fit, says how many, and cuts back
the part of a line, so that the lines written later are whole (where the cut itself fails, the
part is left as a line of its own that a lenient read skips)."""

from __future__ import annotations

import errno
import json
import math
import os
import threading
import warnings

import pytest

from gnnmon.data.format import dumps, encode, parse
from gnnmon.data.read import read_lines
from gnnmon.data.write import JsonlWriter
from tests.data.test_full_disk import QuotaFile  # a raw file that holds only so many bytes

MANIFEST = {"type": "manifest", "format": "gnnmon.jsonl", "format_version": 1, "config": {"lr": 0.01, "name": "é"}}


def rows(first: int, n: int) -> list[dict]:
    return [{"type": "row", "label": "step", "index": i, "wall_s": i / 4, "notes": ["x" * (i % 5)]}
            for i in range(first, first + n)]


def file_lines(path) -> list[dict]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [parse(line) for line in data.split(b"\n")[:-1]]


def test_the_manifest_and_every_line_read_back_exactly_in_order(tmp_path):
    path = tmp_path / "run.jsonl"
    writer = JsonlWriter(path, header=MANIFEST)
    assert writer.lines == 1 and path.read_bytes() == (dumps(MANIFEST) + "\n").encode()
    writer.write(rows(0, 1)[0])
    writer.write_lines([encode(r) for r in rows(1, 3)])
    writer.write_lines([])  # nothing
    writer.write({"type": "sample", "t_ns": 5, "cpu_pct": math.nan})  # NaN: null
    writer.close()
    assert file_lines(path) == [MANIFEST, *rows(0, 4), {"type": "sample", "t_ns": 5, "cpu_pct": None}]
    assert writer.lines == 6 and writer.closed
    writer.close()  # again: nothing
    assert list(read_lines(path)) == file_lines(path)  # gnnmon's reader agrees


def test_a_mode_not_w_x_or_a_is_refused(tmp_path):
    for mode in ("r", "wb", "", "w+"):
        with pytest.raises(ValueError, match="mode must be 'w', 'x' or 'a'"):
            JsonlWriter(tmp_path / "run.jsonl", mode, header=MANIFEST)
    assert list(tmp_path.iterdir()) == []


def test_the_folders_of_the_path_are_made(tmp_path):
    path = tmp_path / "a" / "b" / "run.jsonl"
    JsonlWriter(path, header=MANIFEST).close()
    assert file_lines(path) == [MANIFEST]


def test_mode_w_replaces_a_file_and_mode_x_writes_a_new_one(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text("an old run\nof several lines\n")
    JsonlWriter(path, "w", header=MANIFEST).close()
    assert file_lines(path) == [MANIFEST]
    new = tmp_path / "new.jsonl"
    JsonlWriter(new, "x", header=MANIFEST).close()
    assert file_lines(new) == [MANIFEST]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.jsonl", "run.jsonl"]  # no temporary file left


def test_mode_a_appends_after_the_lines_there(tmp_path):
    path = tmp_path / "run.jsonl"
    JsonlWriter(path, header=MANIFEST).close()
    writer = JsonlWriter(path, "a")
    assert writer.lines == 0
    writer.write_lines([encode(r) for r in rows(0, 2)])
    writer.close()
    again = JsonlWriter(path, "a", header={"type": "marker", "kind": "resumed", "t_ns": 9})
    again.write(rows(2, 1)[0])
    again.close()
    assert file_lines(path) == [MANIFEST, *rows(0, 2), {"type": "marker", "kind": "resumed", "t_ns": 9}, rows(2, 1)[0]]
    assert again.lines == 2


def test_a_header_json_cannot_hold_fails_before_any_file_is_touched(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text("the previous run\n")
    cycle = dict(MANIFEST)
    cycle["config"] = cycle
    for mode in ("w", "x"):
        with pytest.raises(TypeError, match="keys must be"):
            JsonlWriter(path, mode, header={**MANIFEST, "config": {("a", 1): 2}})  # a key JSON has not
        with pytest.raises((ValueError, RecursionError)):
            JsonlWriter(path, mode, header=cycle)
    assert path.read_text() == "the previous run\n" and [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]


@pytest.mark.skipif(os.name != "posix", reason="advisory locks")
def test_a_path_this_process_writes_is_refused_and_free_again_once_closed(tmp_path):
    path = tmp_path / "run.jsonl"
    manifest = {**MANIFEST, "pid": 4242}
    first = JsonlWriter(path, header=manifest)
    first.write(rows(0, 1)[0])
    for mode in ("w", "a"):
        with pytest.raises(FileExistsError, match=r"being written by another process's gnnmon run \(pid 4242\)"):
            JsonlWriter(path, mode, header={"type": "manifest", "format": "gnnmon.jsonl", "run": "second"})
    assert file_lines(path) == [manifest, rows(0, 1)[0]]  # the first run's file untouched
    first.close()
    JsonlWriter(path, header={"type": "manifest", "format": "gnnmon.jsonl", "run": "second"}).close()
    assert file_lines(path) == [{"type": "manifest", "format": "gnnmon.jsonl", "run": "second"}]


def test_lines_written_from_several_threads_are_each_whole(tmp_path):
    path = tmp_path / "run.jsonl"
    writer = JsonlWriter(path, header=MANIFEST)

    def work(k: int) -> None:
        for i in range(200):
            if i % 2:
                writer.write({"type": "row", "label": f"t{k}", "index": i, "pad": "x" * (i * 7 % 300)})
            else:
                writer.write_lines([encode({"type": "row", "label": f"t{k}", "index": i, "pad": "y" * 50})])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    got = file_lines(path)[1:]
    assert writer.lines == 801 and len(got) == 800
    for k in range(4):
        assert [r["index"] for r in got if r["label"] == f"t{k}"] == list(range(200))  # each thread's in order


def test_a_write_the_disk_cuts_short_keeps_the_whole_lines_that_fit_and_cuts_back_the_rest(tmp_path):
    path = tmp_path / "run.jsonl"
    writer = JsonlWriter(path, header=MANIFEST)
    writer.write_lines([encode(r) for r in rows(0, 2)])
    before = path.stat().st_size
    batch = [encode(r) for r in rows(2, 5)]
    room = len(batch[0]) + 1 + len(batch[1]) + 1 + len(batch[2]) // 2  # two lines and half of the third
    disk = writer._file = QuotaFile(writer._file, before + room)
    with pytest.raises(OSError, match="No space left") as raised:
        writer.write_lines(batch)
    assert raised.value.lines_written == 2 and writer.lines == 1 + 2 + 2
    assert file_lines(path) == [MANIFEST, *rows(0, 4)]  # the part of the third line cut back
    with pytest.raises(OSError) as again:  # no room at all: nothing of it
        writer.write(rows(9, 1)[0])
    assert again.value.lines_written == 0 and file_lines(path) == [MANIFEST, *rows(0, 4)]
    disk.capacity = 1 << 30  # room again
    writer.write_lines([encode(r) for r in rows(7, 2)])
    writer.close()
    assert file_lines(path) == [MANIFEST, *rows(0, 4), *rows(7, 2)] and writer.lines == 7


def test_where_the_cut_back_fails_the_part_left_is_a_line_of_its_own(tmp_path, monkeypatch):
    path = tmp_path / "run.jsonl"
    writer = JsonlWriter(path, header=MANIFEST)
    batch = [encode(r) for r in rows(0, 3)]
    disk = writer._file = QuotaFile(writer._file, path.stat().st_size + len(batch[0]) + 1 + 10)

    def no_truncate(fd, length):
        raise OSError(errno.EIO, "planted")

    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(OSError, match="No space left") as raised:
        writer.write_lines(batch)
    assert raised.value.lines_written == 1
    disk.capacity = 1 << 30
    writer.write_lines([encode(r) for r in rows(5, 2)])  # the cut still fails: a newline ends the part first
    monkeypatch.undo()
    writer.close()
    raw = path.read_bytes().split(b"\n")
    assert raw[-1] == b"" and raw[2] == batch[1][:10]  # the part, on a line of its own
    assert [json.loads(line) for line in raw[:2] + raw[3:-1]] == [MANIFEST, rows(0, 1)[0], *rows(5, 2)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(read_lines(path, strict=False)) == [MANIFEST, rows(0, 1)[0], *rows(5, 2)]
    assert [str(w.message).split(": skipped")[0] for w in caught] == [f"{path}:3"]
