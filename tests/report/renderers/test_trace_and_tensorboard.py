"""Exports of a real run: a Chrome trace (rows nested, phases, GC pauses, samples, markers on one
time axis, valid for Perfetto / chrome://tracing) and TensorBoard scalars read back by
TensorBoard's own reader; both from the CLI too."""

from __future__ import annotations

import gc
import json
import threading
import time
from collections import defaultdict

import pytest

import gnnmon
from gnnmon.cli import main
from gnnmon.report.renderers.trace import chrome_trace

STEP_S, FORWARD_S, BACKWARD_S, CHILD_S = 0.04, 0.02, 0.01, 0.005
STEPS = 3


# On the CPU: the planted sleeps are host time (on a GPU machine where CUDA is in use a call with no
# device among its arguments is timed on the GPU, whose time for a sleep is ~0).
@gnnmon.cuda_timed(device="cpu")
def child() -> None:
    time.sleep(CHILD_S)


@gnnmon.cuda_timed(device="cpu")
def step() -> None:
    with gnnmon.phase("forward"):
        time.sleep(FORWARD_S)
        child()
        gc.collect()
    with gnnmon.phase("backward"):
        time.sleep(BACKWARD_S)
    time.sleep(STEP_S - FORWARD_S - BACKWARD_S)


@gnnmon.cuda_timed(device="cpu")
def side() -> None:
    time.sleep(0.03)


@pytest.fixture(scope="module")
def run_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("exports") / "run.jsonl"
    with gnnmon.collect(path, sample=0.02) as run:
        run.mark("epoch", 0)
        for i in range(STEPS):
            if i == 1:  # a row from another thread overlapping this one without nesting in it
                thread = threading.Thread(target=lambda: (time.sleep(0.01), side()))
                thread.start()
            step()
            if i == 1:
                thread.join()
    return path


def _slices(events):
    return [e for e in events if e["ph"] == "X"]


def test_the_trace_is_valid_chrome_trace_json(run_path, tmp_path):
    out = tmp_path / "run.json"
    gnnmon.Report.load(run_path).export("trace", out)
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    assert trace["displayTimeUnit"] == "ms" and events
    for e in events:  # the fields every Chrome trace event must have, with their types
        assert e["ph"] in {"X", "C", "i", "M"} and isinstance(e["name"], str)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0
    # complete events on one track must nest (the viewers drop or misdraw partial overlaps)
    by_track = defaultdict(list)
    for e in _slices(events):
        by_track[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_track.values():
        stack: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start + 1e-3:  # adjacent slices (µs as floats: 1 ns of rounding)
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, "partially overlapping slices on one track"
            stack.append(end)


def test_the_trace_holds_rows_phases_gc_samples_and_markers_where_they_happened(run_path):
    events = chrome_trace(gnnmon.load(run_path))["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    steps = [e for e in events if e.get("cat") == "row" and e["name"] == "step"]
    children = [e for e in events if e.get("cat") == "row" and e["name"] == "child"]
    assert len(steps) == len(children) == STEPS
    for s, c in zip(steps, children, strict=True):
        assert s["dur"] >= STEP_S * 1e6 and c["dur"] >= CHILD_S * 1e6  # the planted sleeps, in µs
        assert s["tid"] == c["tid"] and s["ts"] <= c["ts"] and c["ts"] + c["dur"] <= s["ts"] + s["dur"]
        assert names[(0, s["tid"])] == "rows" and c["args"]["parent"] == f"step#{s['args']['index']}"
    # the other thread's row overlaps step 1 without nesting: a rows track of its own
    (other,) = [e for e in events if e.get("cat") == "row" and e["name"] == "side"]
    assert other["tid"] != steps[1]["tid"] and names[(0, other["tid"])] == "rows"
    # phases: measured durations, inside their row, in order
    phases = [e for e in events if e.get("cat") == "phase"]
    assert [p["name"] for p in phases] == ["forward", "backward"] * STEPS
    for i, s in enumerate(steps):
        fwd, bwd = phases[2 * i], phases[2 * i + 1]
        assert (fwd["dur"] >= (FORWARD_S + CHILD_S) * 1e6
                and fwd["args"]["measured_ms"] == pytest.approx(fwd["dur"] / 1e3))
        assert bwd["dur"] >= BACKWARD_S * 1e6 and bwd["ts"] == pytest.approx(fwd["ts"] + fwd["dur"])
        assert s["ts"] == pytest.approx(fwd["ts"]) and bwd["ts"] + bwd["dur"] <= s["ts"] + s["dur"] + 1e-3
    # each step's planted gc.collect(): a gen-2 slice inside the step's forward phase
    full = [e for e in events if e.get("cat") == "gc" and e["name"] == "gc gen 2"
            and e["args"].get("row", "").startswith("step#")]
    assert len(full) >= STEPS
    for g in full:
        s = steps[int(g["args"]["row"].split("#")[1])]
        assert g["args"]["phase"] == "forward" and s["ts"] <= g["ts"] <= s["ts"] + s["dur"]
    # samples as counters; the epoch marker as an instant event
    with_util = [s for s in gnnmon.load(run_path).samples  # a first sample has no baseline: no utilisation yet
                 if any(isinstance(v, (int, float)) and k.endswith("_pct") and not k.startswith("children_")
                        for k, v in s.items())]
    assert len([e for e in events if e["ph"] == "C" and e["name"] == "utilisation %"]) == len(with_util) >= 1
    assert [e["name"] for e in events if e["ph"] == "i"] == ["epoch=0"]


def test_tensorboard_scalars_read_back_by_tensorboard(run_path, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = gnnmon.load(run_path)
    written = gnnmon.Report(run).export("tensorboard", tmp_path / "tb").n
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert sum(len(acc.Scalars(t)) for t in tags) == written
    rows = [r for r in run.records if r["label"] == "step"]
    wall = acc.Scalars("step/wall_ms")
    assert [e.step for e in wall] == [r["index"] for r in rows]
    assert [e.value for e in wall] == pytest.approx([r["wall_s"] * 1e3 for r in rows], rel=1e-6)
    assert [e.wall_time for e in wall] == pytest.approx([r["t_end_ns"] / 1e9 for r in rows])
    assert all(e.value >= FORWARD_S * 1e3 for e in acc.Scalars("step/forward_ms"))
    assert len(acc.Scalars("timeline/cpu_util_pct")) == sum(s.get("cpu_util_pct") is not None for s in run.samples) >= 1


def test_the_cli_exports_and_refuses_what_it_cannot_read(run_path, tmp_path, capsys):
    out = tmp_path / "cli.json"
    assert main(["export", "trace", str(run_path), "-o", str(out)]) == 0
    assert json.loads(out.read_text())["traceEvents"]
    assert "trace events" in capsys.readouterr().err
    not_a_run = tmp_path / "notes.txt"
    not_a_run.write_text("not a run\n")
    assert main(["export", "trace", str(not_a_run), "-o", str(out)]) == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "trace", str(run_path)])  # no -o
    assert exit_info.value.code == 2


def test_the_trace_shows_the_data_wait_before_its_row_and_the_layers_on_it(tmp_path):
    """Planted rows of a watched loader and watched layers: the wait is a slice of its own that
    ends where its row starts, as long as the wait, with the loader's split; the row's slice holds
    each layer's times and peaks in ms and MiB."""

    path = tmp_path / "loader.jsonl"
    lines = [{"type": "manifest", "format": "gnnmon.jsonl", "format_version": 1, "host": "h"}]
    for i in range(3):
        start = 10**9 + i * 10**8
        lines.append({"type": "row", "label": "step", "index": i, "parent": None, "t_start_ns": start,
                      "t_end_ns": start + 5 * 10**7, "error": None, "wall_s": 0.05, "data_wait_s": 0.02,
                      "data_sample_s": 0.012, "data_gather_s": 0.005, "data_transform_s": 0.001,
                      "layer_conv1_forward_s": 0.004, "layer_conv1_backward_s": 0.006,
                      "layer_conv1_peak_delta_bytes": 3 * 2**20})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    events = chrome_trace(gnnmon.load(path))["traceEvents"]
    rows = [e for e in events if e.get("cat") == "row"]
    waits = [e for e in events if e.get("cat") == "data"]
    assert len(rows) == len(waits) == 3
    for row, wait in zip(rows, waits, strict=True):
        assert wait["ts"] + wait["dur"] == pytest.approx(row["ts"]) and wait["dur"] == pytest.approx(20_000)
        assert wait["args"] == {"row": f"step#{row['args']['index']}", "sample_ms": 12.0, "gather_ms": 5.0,
                                "transform_ms": 1.0}
        assert row["args"]["layer_conv1_forward_ms"] == 4.0 and row["args"]["layer_conv1_backward_ms"] == 6.0
        assert row["args"]["layer_conv1_peak_delta_mib"] == 3.0 and row["args"]["data_wait_ms"] == 20.0
    assert any(e.get("ph") == "M" and e["args"].get("name") == "data wait" for e in events)
