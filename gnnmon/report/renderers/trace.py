"""A run as a Chrome trace (JSON object format), viewable in Perfetto (ui.perfetto.dev) or
chrome://tracing: rows, their phases, GC pauses, markers and the sampled timeline on one time axis.

Per process (one per rank of a distributed job) the tracks are:

* ``rows``: one slice per row, from ``t_start_ns`` to ``t_end_ns`` (host time), children nested
  in their parent; a row open beside another that is not its parent (a row from another
  thread) goes on a further ``rows`` track. A slice's args hold the row's figures (ms, MiB), its
  watched layers' (``layer_conv1_forward_ms``, ...), the loader's split of its wait, and markers.
* ``data wait``: the loop's wait for a row's batch (``watch_loader``), ending where the row starts,
  with where the loader spent it (sampling, gathering, transform).
* ``phases``: each row's phases one after another from the row's start. gnnmon records a phase's
  total duration (device time on an accelerator), not where it began, so the placement is
  sequential; the durations are measured.
* ``gc``: one slice per collection, where and how long it ran.
* counters: every sampled figure, by unit (``utilisation %``, ``memory MiB``, ``power W``); the
  machine's RAM in use on a track of its own (``machine memory MiB``), and the workers' series
  only where the run had workers.
* markers (epochs, configs) as instant events.

Times are microseconds from the run's first timestamp; ``otherData`` names the run's start.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, TextIO

from gnnmon.data.result import RunResult
from gnnmon.figures import BYTES, PERCENT, TRACED, WATTS, figure_of, nested_phases
from gnnmon.report.escape import strict_json
from gnnmon.report.exports import Written, register_export
from gnnmon.report.sampled import sampled_figures

ROWS_TID, PHASES_TID, GC_TID, NESTED_TID, DATA_TID = 1, 2, 3, 4, 5
EXTRA_ROWS_TID = 10  # further rows tracks: 10, 11, ...
COUNTERS = {PERCENT.tag: "utilisation %", BYTES.tag: "memory MiB", WATTS.tag: "power W"}
"""A sampled figure's unit -> the counter track it is drawn on."""
DATA_SPLIT = ("data_sample_s", "data_gather_s", "data_transform_s")
"""Where the loader spent the wait, on the data-wait slice (PyG neighbour loaders)."""
MACHINE_TRACKS = {"ram_used": "machine memory MiB"}
"""Figures of the whole machine, on a track of their own: the machine's RAM in use would squash
the process's own memory flat on a shared scale."""
ROW_KEEP = ("index", "parent", "device", "error", "num_nodes", "num_edges", "num_graphs", "compiled", "epoch", "stage",
            "config")


def _us(t_ns: int, t0: int) -> float:
    return (t_ns - t0) / 1e3


def _row_args(row: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {k: row[k] for k in ROW_KEEP if row.get(k) is not None}
    for field, (name, factor) in TRACED.items():
        value = row.get(field)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            args[name] = round(value * factor, 6)
    for field, value in row.items():  # each watched layer's figures (a family: layer_<name>_<figure>)
        if field.startswith("layer_") and isinstance(value, (int, float)) and not isinstance(value, bool):
            figure = figure_of(field)
            if figure is not None and figure.unit.suffix and field.endswith(figure.unit.suffix):
                args[field[: -len(figure.unit.suffix)] + "_" + figure.unit.tag] = round(value * figure.unit.factor, 6)
    if row.get("notes"):
        args["notes"] = list(row["notes"])
    return args


def _phases(row: dict[str, Any]) -> list[tuple[str, float]]:
    """(phase, seconds) in the order the row's fields name them (the order first closed)."""
    return [(k[6:-2], v) for k, v in row.items()
            if k.startswith("phase_") and k.endswith("_s") and isinstance(v, (int, float)) and v >= 0]


def _placed(row: dict[str, Any], start: int, end: int) -> list[tuple[str, float, int, int, str | None]]:
    """(phase, seconds, start ns, duration ns, the phase it ran inside) of a row's phases: the outer
    ones one after another from the row's start, each nested one after its earlier siblings from
    its parent's start (parents first)."""
    phases = _phases(row)
    inside = nested_phases(row, row.get)
    order = [p for p in phases if p[0] not in inside] + [p for p in phases if p[0] in inside]
    cursor: dict[str | None, int] = {None: start}  # where the next phase inside each one (None: the row) starts
    span: dict[str | None, int] = {None: end}  # where each placed phase ends
    out = []
    for name, seconds in order:
        parent = inside.get(name)
        begin, limit = cursor.get(parent, start), span.get(parent, end)
        dur = min(int(seconds * 1e9), max(limit - begin, 0))
        cursor[parent], cursor[name], span[name] = begin + dur, begin, begin + dur
        out.append((name, seconds, begin, dur, parent))
    return out


class _Lanes:
    """Row slices onto tracks: a row nests in a track's open slice only if that slice is its
    parent, else it takes a track with no slice open (a new one if none is free). Rows come in
    order of start."""

    def __init__(self) -> None:
        self.open: list[list[tuple[int, str]]] = []  # per track, its open slices (end, key), outermost first

    def place(self, start: int, end: int, key: str, parent: str | None) -> int:
        for lane, stack in enumerate(self.open):
            while stack and stack[-1][0] <= start:
                stack.pop()
            if not stack or (stack[-1][1] == parent and stack[-1][0] >= end):
                stack.append((end, key))
                return lane
        self.open.append([(end, key)])
        return len(self.open) - 1


def _tid(lane: int) -> int:
    return ROWS_TID if lane == 0 else EXTRA_ROWS_TID + lane - 1


def _times(report: RunResult) -> Iterable[int]:
    for row in report.records:
        if row.get("t_start_ns") is not None:
            yield row["t_start_ns"]
    for event in report.gc_events:
        yield event["t_start_ns"]
    for sample in report.samples:
        yield sample["t_ns"]
    for marker in report.markers:
        yield marker["t_ns"]


class TraceExport:
    """The ``trace`` export: a Chrome trace JSON file."""

    name = "trace"
    what = ("a Chrome trace JSON (rows, phases, GC pauses, markers and samples on one timeline; open it in "
            "ui.perfetto.dev or chrome://tracing)")

    def write(self, result: RunResult, out: str | os.PathLike[str]) -> str:
        """Write ``result`` as a Chrome trace JSON file at ``out``; says what was written."""
        with open(out, "w", encoding="utf-8", errors="backslashreplace") as f:
            return self.write_stream(result, f)

    def write_stream(self, result: RunResult, stream: TextIO) -> str:
        """Write ``result`` as Chrome trace JSON to ``stream``; says how many events."""
        trace = chrome_trace(result)
        stream.write(strict_json(trace))
        return Written(len(trace["traceEvents"]), "trace events")


def chrome_trace(report: RunResult) -> dict[str, Any]:
    """The run as a Chrome trace object (``{"traceEvents": [...], ...}``); see the module doc."""
    t0 = min(_times(report), default=0)
    events: list[dict[str, Any]] = []
    names: dict[tuple[int, int], str] = {}
    lanes: dict[int, _Lanes] = {}
    timed = (r for r in report.records if r.get("t_start_ns") is not None)  # a row without its start has no place
    rows = sorted(timed, key=lambda r: (r["t_start_ns"], -max(r.get("t_end_ns") or 0, r["t_start_ns"])))
    for row in rows:
        pid = int(row.get("rank") or 0)
        start = row["t_start_ns"]
        end = max(row.get("t_end_ns") or start, start)
        key = f"{row['label']}#{row['index']}"
        tid = _tid(lanes.setdefault(pid, _Lanes()).place(start, end, key, row.get("parent")))
        names[(pid, tid)] = "rows"
        events.append({"name": row["label"], "cat": "row", "ph": "X", "pid": pid, "tid": tid,
                       "ts": _us(start, t0), "dur": (end - start) / 1e3, "args": _row_args(row)})
        wait = row.get("data_wait_s")
        if isinstance(wait, (int, float)) and not isinstance(wait, bool):
            wait -= row.get("data_wait_in_row_s") or 0.0  # a later batch's wait is inside the row, drawn there
        if isinstance(wait, (int, float)) and wait > 0 and row.get("parent") is None:
            names[(pid, DATA_TID)] = "data wait"  # the loop's wait for this row's batch: just before it
            split = {k[5:-2] + "_ms": round(row[k] * 1e3, 6) for k in DATA_SPLIT
                     if isinstance(row.get(k), (int, float))}
            events.append({"name": "data wait", "cat": "data", "ph": "X", "pid": pid, "tid": DATA_TID,
                           "ts": _us(start, t0) - wait * 1e6, "dur": wait * 1e6, "args": {"row": key, **split}})
        for name, seconds, at, dur_ns, parent in _placed(row, start, end):
            tid = PHASES_TID if parent is None else NESTED_TID
            names[(pid, tid)] = "phases (placed in order)" if parent is None else "nested phases"
            args = {"row": key, "measured_ms": round(seconds * 1e3, 6)}
            if parent is not None:
                args["inside"] = parent
            events.append({"name": name, "cat": "phase", "ph": "X", "pid": pid, "tid": tid,
                           "ts": _us(at, t0), "dur": dur_ns / 1e3, "args": args})
    for gc_event in report.gc_events:
        pid = int(gc_event.get("rank") or 0)
        names[(pid, GC_TID)] = "gc"
        args = {k: gc_event[k] for k in ("collected", "reason", "row", "phase", "thread")
                if gc_event.get(k) is not None}
        events.append({"name": f"gc gen {gc_event['generation']}", "cat": "gc", "ph": "X", "pid": pid, "tid": GC_TID,
                       "ts": _us(gc_event["t_start_ns"], t0), "dur": gc_event["duration_s"] * 1e6, "args": args})
    workers = any(s.get("children") for s in report.samples)  # no workers: no workers' series
    for sample in report.samples:
        pid = int(sample.get("rank") or 0)
        by_unit: dict[str, dict[str, float]] = {}
        for figure, unit, value in sampled_figures(sample):
            if figure.startswith("children_") and not workers:
                continue
            track = MACHINE_TRACKS.get(figure, COUNTERS[unit])
            by_unit.setdefault(track, {})[figure] = round(value, 4)
        for unit, values in by_unit.items():
            events.append({"name": unit, "cat": "sample", "ph": "C", "pid": pid, "tid": 0,
                           "ts": _us(sample["t_ns"], t0), "args": values})
    for marker in report.markers:
        pid = int(marker.get("rank") or 0)
        events.append({"name": f"{marker['kind']}={marker.get('value')}", "cat": "marker", "ph": "i", "s": "p",
                       "pid": pid, "tid": ROWS_TID, "ts": _us(marker["t_ns"], t0)})
    pids = sorted({e["pid"] for e in events})
    meta: list[dict[str, Any]] = []
    for pid in pids:
        label = f"rank {pid}" if any("rank" in r for r in report.records) else "gnnmon run"
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}})
    for (pid, tid), name in sorted(names.items()):
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    manifest = report.manifest or {}
    other = {k: manifest[k] for k in ("start_time", "host", "gnnmon", "torch") if manifest.get(k) is not None}
    other["t0_ns"] = t0
    return {"traceEvents": meta + events, "displayTimeUnit": "ms", "otherData": other}


register_export(TraceExport())
