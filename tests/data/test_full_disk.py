"""A disk that fills and frees again: a write that failed leaves no partial line, the rows written
once there is room again load with a strict ``load()``, and the gap is reported.

The disk is a quota on the file, as the kernel applies one: a write gets as many bytes as fit (a
short write), the next raises ``ENOSPC``; freeing space lets writes through again."""

from __future__ import annotations

import errno
import gzip
import json
import warnings

import gnnmon


class QuotaFile:
    """A raw file that holds at most ``capacity`` bytes, as a full disk does."""

    def __init__(self, raw, capacity: int) -> None:
        self.raw = raw
        self.capacity = capacity

    def write(self, data) -> int:
        room = self.capacity - self.raw.tell()
        if room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.raw.write(data[:room])

    def __getattr__(self, name):
        return getattr(self.raw, name)


def test_a_disk_that_fills_and_frees_again_leaves_whole_lines_and_says_what_it_lost(tmp_path):
    """The batch that meets the full disk holds the 20 rows of steps 20-39 and nothing else: no
    collection runs meanwhile (a GC event would be a line of it too, as the collector's count left
    by earlier tests in the process decides)."""
    path = tmp_path / "run.jsonl"

    @gnnmon.cuda_timed(label="step", device="cpu")
    def step(i):
        return i

    with warnings.catch_warnings(record=True) as caught, gnnmon.gc_paused():
        warnings.simplefilter("always")
        with gnnmon.collect(path, flush_interval=60) as run:  # batches leave on flush() only
            writer = run.outlets.file.file
            for i in range(20):
                step(i)
            run.flush()
            quota = writer._file = QuotaFile(writer._file, writer._file.tell() + 40)  # room for part of a line
            for i in range(20, 40):
                step(i)
            run.flush()  # fails part-way through its first line
            assert path.stat().st_size == quota.capacity - 40  # cut back to the last whole line
            quota.capacity = 1 << 30  # space again
            for i in range(40, 60):
                step(i)
            run.flush()
    assert run.lines_lost == 20 and run.write_errors
    assert sum("No space left" in str(w.message) for w in caught) == 1
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])  # every line whole
    loaded = gnnmon.load(path)  # strict
    assert [r["index"] for r in loaded.records] == list(range(20)) + list(range(40, 60))
    assert loaded.complete and loaded.end["lines_lost"] == 20
    assert "No space left" in loaded.end["write_errors"][0]
    text = gnnmon.Report(loaded).markdown()
    assert "20 lines of this run were lost" in text and "No space left" in text


def test_a_disk_with_room_for_some_lines_keeps_every_whole_line_that_fits(tmp_path):
    """A batch of 3,000 rows meets a disk with about 100 lines' room left: the whole lines that fit
    are in the file (a batch is no longer written whole or not at all), the rest are counted."""
    path = tmp_path / "run.jsonl"

    @gnnmon.cuda_timed(label="step", device="cpu")
    def step(i):
        return i

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with gnnmon.collect(path, flush_interval=3600) as run:
            writer = run.outlets.file.file
            step(-1)
            run.flush()
            line = len(path.read_bytes().split(b"\n")[-2]) + 1  # one row's line, bytes
            quota = writer._file = QuotaFile(writer._file, writer._file.tell() + 100 * line + line // 2)
            for i in range(3000):
                step(i)
            run.flush()
            on_disk = [json.loads(x) for x in path.read_bytes().split(b"\n")[:-1]]
            fitted = sum(o["type"] == "row" for o in on_disk) - 1  # rows of this batch that fit
            others = sum(o["type"] not in ("manifest", "same", "row") for o in on_disk)  # GC events that fit
            quota.capacity = 1 << 30  # room for the end line
    assert 90 <= fitted + others <= 105  # about 100 lines' room: the lines vary by a few bytes
    assert run.lines_lost >= 3000 - fitted - others and run.lines_lost - (3000 - fitted) <= 100
    loaded = gnnmon.load(path)  # strict: every line whole
    assert [r["index"] for r in loaded.records] == list(range(fitted + 1))
    assert loaded.end["lines_lost"] == run.lines_lost


def test_a_compressed_file_on_a_full_disk_loses_the_batch_that_did_not_fit_and_reads_whole(tmp_path):
    """A gzip stream is cut back to the batch before the failed one and its compressor goes back
    with it: the batch is lost whole (counted), and the batches after it, once there is room
    again, continue the stream a strict read decompresses to the last line."""
    path = tmp_path / "run.jsonl.gz"

    @gnnmon.cuda_timed(label="step", device="cpu")
    def step(i):
        return i

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gnnmon.collect(path, flush_interval=60) as run:
            writer = run.outlets.file.file
            for i in range(20):
                step(i)
            run.flush()
            before = path.stat().st_size
            quota = writer._file = QuotaFile(writer._file, writer._file.tell() + 40)  # room for part of a batch
            for i in range(20, 40):
                step(i)
            run.flush()
            assert path.stat().st_size == before  # cut back to the batch before
            quota.capacity = 1 << 30
            for i in range(40, 60):
                step(i)
            run.flush()
    assert run.lines_lost >= 20 and sum("No space left" in str(w.message) for w in caught) == 1
    lines = gzip.decompress(path.read_bytes()).split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])  # every line whole, the stream ended
    loaded = gnnmon.load(path)  # strict
    assert [r["index"] for r in loaded.records] == list(range(20)) + list(range(40, 60))
    assert loaded.complete and loaded.end["lines_lost"] == run.lines_lost
