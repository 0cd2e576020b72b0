"""What holds for the whole run is said once (format version 3): a CPU run's row lines carry none of
the run-level notes (the allocator's note, a note and a null for each sampled figure a row lacks,
"gpu figures: not a CUDA row") nor a sampled figure's ``<field>_source``; the manifest says each
once (``host_memory``, ``sampled``), the end line the allocator's setting at the end; the report
(live, loaded, and ``gnnmon report``) says each once, in the run's notes; a version 2 file (every
row saying them) still reads as it was written, its report saying them from its rows.

Planted: the allocator's setting (``gnnmon.devices.malloc._mmap_threshold``: None is glibc's
default, which keeps freed memory; an int, what ``exact_host_memory()`` set), a note of the row's
own on every other row, and, for the report's counts, rows built with a known set of figures."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import gnnmon
from gnnmon.data.format import FORMAT_VERSION
from gnnmon.data.table import Table
from gnnmon.devices import malloc
from gnnmon.measure.memory_fields import cached
from gnnmon.record.manifest import HOST_MEMORY_NOTE
from gnnmon.report import Report
from gnnmon.report.run_notes import run_notes
from gnnmon.timeline.join import GAUGES

FILES = Path(__file__).resolve().parents[1] / "files"
ROOT = Path(__file__).resolve().parents[2]
ROWS = 12
RUN_LEVEL = ("sample on each side", "not a CUDA row", "freed memory stays in the process")
"""Words of every run-level note version 2 wrote on rows: none may be on a version 3 row."""


@gnnmon.monitor_memory_device(device="cpu")
@gnnmon.cuda_timed(device="cpu")
@gnnmon.gc_controlled
def full_stack(i: int) -> None:
    with gnnmon.phase("forward"):
        time.sleep(0.002)
        keep = torch.ones(1000 * (i % 3))
    with gnnmon.phase("backward"):
        del keep
    if i % 2:
        gnnmon.current_row().note(f"own note {i}")  # a row's own note stays on it


def record(path: Path) -> gnnmon.Run:
    with gnnmon.collect(path, sample=0.05, max_records=None) as run:
        for i in range(ROWS):
            full_stack(i)
    return run


@pytest.mark.parametrize("threshold", [None, 65536])
def test_a_cpu_runs_rows_carry_no_run_level_note_and_the_run_says_each_once(tmp_path, monkeypatch, threshold):
    monkeypatch.setattr(malloc, "_mmap_threshold", threshold)  # planted: the allocator's setting
    path = tmp_path / "run.jsonl"
    run = record(path)
    text = path.read_bytes()
    lines = [json.loads(line) for line in text.splitlines()]  # each line alone, with plain json
    manifest, end = lines[0], lines[-1]
    rows = [line for line in lines if line["type"] == "row"]
    assert manifest["format_version"] == FORMAT_VERSION == 3 and end["type"] == "end" and len(rows) == ROWS
    gauges = {name for name, _, _ in GAUGES}
    for i, row in enumerate(rows):
        assert row["notes"] == ([f"own note {i}"] if i % 2 else []), row["notes"]
        assert not [n for n in row["notes"] if any(w in n for w in RUN_LEVEL)]
        assert not {f"{g}_source" for g in gauges} & row.keys()  # how each is measured: the manifest's
        assert all(isinstance(row[g], (int, float)) for g in gauges & row.keys())  # a figure, or absent
        assert not {"gpu_util_pct", "gpu_power_w"} & row.keys()  # a CPU row has no GPU figure, and no null
        assert row["backend"] == "cpu" and row["mem_peak_bytes"] is not None and row["util_samples"] >= 0
    # the allocator: said once, in the manifest, where it keeps freed memory; its setting at the end in the end line
    assert manifest["host_memory"] == ({"mmap_threshold": None, "note": HOST_MEMORY_NOTE} if threshold is None
                                       else {"mmap_threshold": threshold})
    assert end["host_memory"] == {"mmap_threshold": threshold}
    assert text.count(HOST_MEMORY_NOTE.encode()) == (1 if threshold is None else 0)
    # how each sampled figure is had: once, in the manifest
    said = manifest["sampled"]
    assert said["sources"] == {name: f"measured:{how}@50ms" for name, _, how in GAUGES}
    assert said["cuda_only"] == ["gpu_util_pct", "gpu_power_w"] and said["interval_s"] == 0.05
    for how in {f"measured:{how}@50ms" for _, _, how in GAUGES}:
        assert text.count(how.encode()) == json.dumps(said).count(how), how
    # the report says each once, in the run's notes: live, loaded, and from the shell
    lacking = [name for name in gauges - {"gpu_util_pct", "gpu_power_w"} if any(name not in r for r in rows)]
    cli = subprocess.run([sys.executable, "-m", "gnnmon", "report", str(path)], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert cli.returncode == 0, cli.stderr
    for page in (run.report().markdown(), Report.load(path).markdown(), cli.stdout):
        assert page.count("### Notes on the whole run") == 1
        assert page.count(HOST_MEMORY_NOTE) == (1 if threshold is None else 0)
        assert page.count(f"gpu_util_pct, gpu_power_w: a CUDA row's only (its GPU's samples); the {ROWS} rows") == 1
        for name in lacking:  # a figure some rows lack: how many, and why, once
            missing = sum(name not in r for r in rows)
            assert page.count(f"- note: {name}: absent on {missing} of {ROWS} rows: no ") == 1, name
        assert page.count("- note: own note 1\n") == 1  # a row's own note, with its label's table


def test_the_allocators_setting_changed_mid_run_is_said_with_the_note(tmp_path, monkeypatch):
    """``exact_host_memory()`` called between two steps (planted: the setting changed): the manifest
    has the note as the run started, the end line the threshold it ended with, and the report says
    both once."""
    monkeypatch.setattr(malloc, "_mmap_threshold", None)
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path) as run:
        full_stack(0)
        monkeypatch.setattr(malloc, "_mmap_threshold", 65536)
        full_stack(2)
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert lines[0]["host_memory"]["note"] == HOST_MEMORY_NOTE and lines[-1]["host_memory"] == {"mmap_threshold": 65536}
    assert "sampled" not in lines[0]  # no sampling: nothing said of sampled figures
    for page in (run.report().markdown(), Report.load(path).markdown()):
        assert page.count(HOST_MEMORY_NOTE + "; gnnmon.exact_host_memory() was called during this run "
                          "(mmap threshold 65,536 bytes at its end)") == 1


def test_torch_threads_set_after_the_start_are_the_end_lines_and_the_runs(tmp_path):
    """A script that sets torch's threads once the run has started (as under ``gnnmon run``,
    whose manifest is written first; planted: 1 thread, from a count above 1): the manifest has
    the count the run started with, the end line 1, and the run read back, live or loaded, ran
    its steps on one thread; the count set back before the end is the end line's."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        path = tmp_path / "run.jsonl"
        with gnnmon.collect(path) as run:
            torch.set_num_threads(1)
            full_stack(0)
            live = run.result()
        lines = [json.loads(line) for line in path.read_bytes().splitlines()]
        assert lines[0]["devices"]["torch_threads"] == 2 and lines[-1]["torch_threads"] == 1
        assert live.one_thread and Report.load(path).result.one_thread
        with gnnmon.collect(path, mode="w") as run:
            full_stack(0)
            torch.set_num_threads(2)
        assert json.loads(path.read_bytes().splitlines()[-1])["torch_threads"] == 2
        assert not Report.load(path).result.one_thread and not run.result().one_thread
    finally:
        torch.set_num_threads(before)


def part_rows() -> list[dict]:
    """Planted: 3 CPU rows the timeline reached, the second without cpu_util_pct; 2 CUDA rows, the
    first without gpu_power_w; 1 row the timeline never reached (no util_samples: not counted)."""
    cpu = [{"label": "s", "index": i, "backend": "cpu", "util_samples": 0, "cpu_util_pct": 5.0,
            "mem_peak_bytes": 10} for i in range(3)]
    del cpu[1]["cpu_util_pct"]
    gpu = [{"label": "g", "index": i, "backend": "cuda", "util_samples": 1, "cpu_util_pct": 1.0,
            "gpu_util_pct": 9.0, "gpu_power_w": 70.0} for i in range(2)]
    del gpu[0]["gpu_power_w"]
    return [*cpu, *gpu, {"label": "late", "index": 0, "backend": "cpu"}]


def test_the_run_notes_count_the_rows_that_lack_each_sampled_figure():
    manifest = {"host_memory": {"mmap_threshold": None, "note": "N"},
                "sampled": {"sources": {"cpu_util_pct": "m", "gpu_util_pct": "m", "gpu_power_w": "m"},
                            "keys": {"cpu_util_pct": "cpu_util_pct", "gpu_util_pct": "gpu{i}_util_pct",
                                     "gpu_power_w": "gpu{i}_power_w"},
                            "cuda_only": ["gpu_util_pct", "gpu_power_w"]}}
    table = Table(part_rows())
    assert run_notes(manifest, {}, table) == [
        "N",
        "cpu_util_pct: absent on 1 of 5 rows: no cpu_util_pct sample on each side of them",
        "gpu_power_w: absent on 1 of 2 rows: no gpu<i>_power_w sample on each side of them",
        "gpu_util_pct, gpu_power_w: a CUDA row's only (its GPU's samples); the 3 rows on other devices have none"]
    no_peak = Table([{k: v for k, v in r.items() if k != "mem_peak_bytes"} for r in part_rows()])
    assert run_notes({"host_memory": manifest["host_memory"]}, {}, no_peak) == []  # no CPU memory figure: no note
    assert run_notes({}, {}, table) == []  # a run that said nothing (an older file): nothing said again
    # a run without a manifest
    assert run_notes(None, {"host_memory": {"mmap_threshold": None, "note": "N"}}, table) == ["N"]


def test_cached_says_whether_rows_hold_host_memory_the_allocator_kept(monkeypatch):
    rows = part_rows()
    monkeypatch.setattr(malloc, "_mmap_threshold", None)
    assert cached(rows) and not cached(rows[3:5]) and not cached([])  # CUDA rows: the allocator's own
    monkeypatch.setattr(malloc, "_mmap_threshold", 65536)
    assert not cached(rows)


def test_a_version_2_file_reads_as_written_and_its_report_says_its_rows_notes():
    """tests/files/run-v2-whole.jsonl: written by format version 2 (8 steps of a CPU full stack and 8
    failing calls with a note of their own, sample=0.05): every row line is the row, its notes and
    sources as version 2 wrote them; the report shows the notes its rows hold with their label's
    table, and says no run-level note twice (the manifest has none)."""
    path = FILES / "run-v2-whole.jsonl"
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert lines[0]["format_version"] == 2 and "host_memory" not in lines[0] and "sampled" not in lines[0]
    rows = [{k: v for k, v in line.items() if k != "type"} for line in lines if line["type"] == "row"]
    loaded = gnnmon.load(path)
    assert loaded.records == rows and len(rows) == 16
    steps = [r for r in rows if r["label"] == "full_stack"]
    assert all(HOST_MEMORY_NOTE in r["notes"] and r["cpu_util_pct_source"] is None for r in steps)
    page = Report(loaded).markdown()
    assert page.count(f"- note: {HOST_MEMORY_NOTE}") == 1 and "### Notes on the whole run" not in page
    assert page.count("- note: gpu figures: not a CUDA row") == 2  # one a label, as version 2's rows said it


@gnnmon.cuda_timed
def tiny() -> None:
    pass


@pytest.mark.parametrize("to_file", [True, False])
def test_a_live_report_over_a_window_says_how_many_rows_it_left_out_and_where_they_are(tmp_path, to_file):
    """250 calls in a run that keeps 100 in memory: the live report says it reads the newest 100 of
    250 and where the rest are (the file, or ``max_records=None``); the file's own report reads all
    250 and says nothing of a window; a run within its window says nothing either."""
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path if to_file else None, max_records=100) as run:
        for _ in range(250):
            tiny()
    page = run.report().markdown()
    said = ("this report reads the newest 100 of the run's 250 rows, those kept in memory (max_records 100): the "
            "150 before them, its first calls among them, are in no figure here; ")
    assert page.count(said) == 1
    if to_file:
        assert f"the file holds every row: gnnmon.Report.load({str(path.resolve())!r})" in page
        loaded = Report.load(path)
        assert len(loaded.table) == 250 and "this report reads the newest" not in loaded.markdown()
    else:
        assert "collect(max_records=None) keeps every row" in page
    with gnnmon.collect(max_records=100) as run:
        for _ in range(100):
            tiny()
    assert "this report reads the newest" not in run.report().markdown()
