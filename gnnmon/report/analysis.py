"""Step analysis: why a step was slow, where its time went, and what GC cost.

Plain functions over rows (dicts); :class:`gnnmon.report.Report` calls them.

A row's *time* is ``device_s`` if measured, else ``wall_s``, else its window (``t_end_ns`` −
``t_start_ns``). Spikes are rows whose time exceeds, per label, ``max(median + k·1.4826·MAD,
min_ratio·median)`` (defaults k = 5, min_ratio = 1.5) over the rows after warm-up. Each spike gets
one cause, checked in order:

* ``recompile`` — ``torch.compile`` compiled something during it (``@track_compile`` rows:
  ``compile_frames`` > 0; the detail says how many were recompilations and how long it took);
* ``busy machine`` — it was slowed by the machine, as the diagnosis finds it
  (:func:`gnnmon.report.busy.machine_calls`: other processes crowded its cores, sampled, their rate
  above its usual, and, torch on one thread, its own CPU time does not account for its excess and
  its thread's run-queue time, where recorded, holds half of it; not sampled, it waited rather
  than computed, from its CPU time, and its thread's run-queue time holds half that wait; never a
  call its collections explain): never warm-up's or unexplained, so the spikes and the diagnosis
  name the same calls;
* ``off-CPU wait`` — it waited rather than computed where nothing recorded pins the wait on the
  machine (:func:`gnnmon.report.busy.own_waits`): a core, I/O, a lock or a sleep (not a core,
  where the sampled load or the run queue says so);
* ``warm-up`` — one of the first ``warmup`` calls of its label, or a row of the first epoch
  (rows carry ``epoch`` after ``run.mark("epoch", n)``) when that epoch is clearly slower for the
  label than the later ones (its median over theirs by 20 % and 3 spreads: a first pass filling
  caches, e.g. PyG's ``InMemoryDataset`` separating each graph once), unless its collections
  explain it (below: the diagnosis counts them in its GC finding, not in warm-up);
* ``gc`` — collections inside it paused it for at least ``gc_share`` of its excess over the median;
* ``shape`` — its batch (nodes, edges or seed nodes) is more than ``shape_tol`` away from the
  label's median (a partial last batch, an unusually large subgraph, a recompile for a new shape);
* ``unexplained`` — its ``computed`` says whether it computed (True) or waited (False): its CPU
  time against :data:`WAITING_BELOW` of its time, else its process's sampled utilisation; None
  where neither was recorded, and on every other cause.

A label with too few rows to judge (``min_rows``) still reports a call that compiled and took
over ``min_ratio`` times the others' median, as ``recompile``.

Dips are the other side: rows far *below* their label's median (``min(median − k·1.4826·MAD,
median / min_ratio)``), with cause ``shape`` (a partial last batch: expected, not a problem) or
``unexplained`` (a skipped step?).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

import numpy as np

from gnnmon.data.table import Part, Table, as_table
from gnnmon.fields import is_number
from gnnmon.figures import nested_phases, phase_field
from gnnmon.report import busy
from gnnmon.report.loops import Loop, loops
from gnnmon.report.stats import describe, median, percentile, spread

SHAPE_FIELDS = ("num_nodes", "num_edges", "batch_size")

SHAPE_TOL = 0.25
"""How far (a share of the label's median) a batch's nodes, edges or seed nodes lie from the usual
for its shape to be unusual: a spike's or a dip's ``shape`` cause, and the first calls warm-up
judges by their shapes."""

Rows = Table | Iterable[Mapping[str, Any]]


class _Timed:
    """A label's rows that have a time: positions in the part, times, and the steady ones."""

    def __init__(self, part: Part, warmup: int) -> None:
        self.part = part
        times = part.time()
        index = part.numbers("index")
        keep = ~np.isnan(times)
        self.at = np.flatnonzero(keep)
        self.t = times[keep]
        self.index = np.nan_to_num(index[keep], nan=0.0)
        self.steady = self.index >= warmup

    def column(self, name: str) -> np.ndarray:
        return self.part.numbers(name)[self.at]


def _labels_timed(table: Table, warmup: int,
                  min_rows: int) -> Iterable[tuple[str, _Timed, float, float, dict[str, float]]]:
    """Per label: timed rows, median and scaled MAD of the steady rows, median shapes."""
    for label, part in table.parts.items():
        timed = _Timed(part, warmup)
        base = timed.t[timed.steady]
        if base.size < min_rows:
            continue
        yield label, timed, median(base), spread(base), usual_shapes(timed.column, timed.steady)


def usual_shapes(column: Callable[[str], np.ndarray], steady: np.ndarray) -> dict[str, float]:
    """Each shape field's median over the ``steady`` rows (``column(name)``: the field's values,
    NaN where missing), for the fields those rows record."""
    shapes = {}
    for f in SHAPE_FIELDS:
        vals = column(f)[steady]
        vals = vals[~np.isnan(vals)]
        if vals.size:
            shapes[f] = median(vals)
    return shapes


SPIKE_FIELDS = ("index", "gc_pause_s", "gc_collections", "gc_max_generation", "compile_frames", "compile_recompiles",
                "compile_s", "compile_graph_breaks", "epoch", "cpu_s", "wall_s", "cpu_util_pct", "others_cpu_pct",
                "idle_cpu_pct")
"""The fields a slow row's cause and detail are read from."""


def _picked(part: Part, at: list[int], fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rows at positions ``at``, each as a dict of ``fields`` (None where missing): read a
    column at a time, not a row at a time."""
    columns = [part.pick(name, at) for name in fields]
    return [dict(zip(fields, values, strict=True)) for values in zip(*columns, strict=True)] if at else []


def unusual_shape(row: Mapping[str, Any], shapes: dict[str, float], tol: float = SHAPE_TOL) -> str:
    """The row's shape fields more than ``tol`` (a share) away from the usual ``shapes``
    (:func:`usual_shapes`), in words ("num_nodes 19511 vs usual 1271"); "" where none is."""
    odd = [(f, row[f], m) for f, m in shapes.items()
           if is_number(row.get(f)) and m > 0 and abs(row[f] / m - 1) > tol]
    return ", ".join(f"{f} {v:g} vs usual {m:g}" for f, v, m in odd)


def _judged(label: str, row: Mapping[str, Any], t: float, med: float, threshold: float, cause: str, detail: str,
            **more: float | bool | None) -> dict[str, Any]:
    """A spike's or a dip's entry: the row's time against its label's median and the threshold
    (seconds), ``more`` figures, then its cause and the words for it."""
    return {"label": label, "index": row.get("index"), "time_s": t, "median_s": med, "threshold_s": threshold,
            "excess_s": t - med, **more, "cause": cause, "detail": detail}


def spikes(
    records: Rows,
    *,
    k: float = 5.0,
    min_ratio: float = 1.5,
    warmup: int = 2,
    gc_share: float = busy.GC_SHARE,
    shape_tol: float = SHAPE_TOL,
    min_rows: int = 5,
    one_thread: bool = False,
) -> list[dict[str, Any]]:
    """Slow rows with a cause each (see the module doc). Labels with fewer than ``min_rows``
    timed rows after warm-up are not judged, except for calls that compiled. ``one_thread``: torch
    ran on one thread (the manifest's ``torch_threads``), so a call's CPU time is its work."""
    table = as_table(records)
    found: list[dict[str, Any]] = _compiles_in_small_labels(table, warmup, min_rows, min_ratio)
    machine = {loop.label: _machine(loop, one_thread, gc_share) for loop in loops(table)}
    for label, timed, med, noise, shapes in _labels_timed(table, warmup, min_rows):
        threshold = max(med + k * noise, min_ratio * med)
        slow_epoch = _slow_first_epoch(timed, noise)
        slow = np.flatnonzero(timed.t > threshold).tolist()
        others, idle = timed.column("others_cpu_pct"), timed.column("idle_cpu_pct")
        usual = busy.usual_others(others, timed.steady)
        run_queue = timed.column("thread_queued_s") if "thread_queued_s" in timed.part.cols else None
        names = ("cpu_s", "thread_cpu_s") if run_queue is None else ("thread_cpu_s", "cpu_s")  # as busy.load
        took = next((timed.column(f) for f in names if f in timed.part.cols), None)
        crowded = busy.crowded(others, idle, timed.t, med, usual,  # rows outside the loop: nested, raised
                               busy.pace(took, timed.steady, med, idle, run_queue))  # slow rows: beyond k spreads
        done = next((timed.column(f) for f in ("thread_cpu_s", "cpu_s") if one_thread and f in timed.part.cols), None)
        crowded &= ~busy.computed(done, timed.steady, timed.t, med, idle, run_queue)  # as busy.machine_calls
        if one_thread and run_queue is not None:  # as busy.machine_calls: the thread queued
            crowded &= busy.queued_enough(run_queue, timed.steady, timed.t - med)
        in_loop, waited = machine.get(label, ({}, {}))
        rows = _picked(timed.part, timed.at[slow].tolist(), SPIKE_FIELDS + tuple(shapes))
        for j, row in zip(slow, rows, strict=True):
            t = float(timed.t[j])
            excess = t - med
            pause = float(row["gc_pause_s"]) if is_number(row.get("gc_pause_s")) else 0.0
            cause, detail, computed = "unexplained", "", None
            odd_shape = unusual_shape(row, shapes, shape_tol)
            frames = int(row["compile_frames"]) if is_number(row.get("compile_frames")) else 0
            pos = int(timed.at[j])
            # rows the diagnosis does not judge (nested, raised): crowded cores, unless a collection explains it
            by_machine = in_loop[pos] if pos in in_loop else bool(crowded[j]) and pause < gc_share * excess
            if frames > 0:
                cause = "recompile"
                detail = (f"{frames} frame(s) compiled ({row.get('compile_recompiles')} recompiled), "
                          f"{float(row.get('compile_s') or 0.0) * 1e3:.0f} ms compiling, "
                          f"{row.get('compile_graph_breaks')} graph break(s)")
            elif by_machine and pos in waited:
                more, name, cpu, queued, cause, sampled = waited[pos]
                on = ("a core" if cause == busy.CAUSE else "I/O, a lock or a sleep"
                      if sampled or queued is not None and one_thread else "a core, I/O, a lock or a sleep")
                queue = "" if queued is None else f"; its thread's run queue {queued * 1e3:.1f} ms more"
                how = "the sampled load does not account for it" if sampled else "not sampled"
                detail = (f"{how}: it waited at least {more * 1e3:.1f} ms more than the usual call, for {on} "
                          f"({name} {cpu * 1e3:.1f} ms{queue})")
            elif by_machine:
                cause, detail = busy.CAUSE, busy.crowded_words(row["others_cpu_pct"], row["idle_cpu_pct"], t, med,
                                                                 usual)
            elif row.get("index", 0) < warmup and pause < gc_share * excess:
                cause, detail = "warm-up", f"call {row.get('index')} of {label}"
            elif slow_epoch is not None and row.get("epoch") == slow_epoch[0] and pause < gc_share * excess:
                cause = "warm-up"
                detail = (f"epoch {slow_epoch[0]} is slow for {label} (median "
                          f"{slow_epoch[1] * 1e3:.2f} ms vs {med * 1e3:.2f} ms)")
            elif pause > 0 and pause >= gc_share * excess:
                gen = row.get("gc_max_generation")
                cause = "gc"
                detail = (f"{row.get('gc_collections')} collection(s), up to gen {gen}, "
                          f"paused {pause * 1e3:.1f} ms")
            elif odd_shape:
                cause, detail = "shape", odd_shape
            else:
                computed, detail = _unexplained(row)
            found.append(_judged(label, row, t, med, threshold, cause, detail, gc_pause_s=pause, computed=computed))
    found.sort(key=lambda s: (s["label"], s["index"] if s["index"] is not None else -1))
    return found


def _machine(loop: Loop, one_thread: bool,
             gc_share: float) -> tuple[dict[int, bool], dict[int, tuple[float, str, float, float | None, str, bool]]]:
    """A label's top-level calls (positions in its part) and whether each was slowed by the
    machine (:func:`~gnnmon.report.busy.machine_calls`) or waited off the CPU
    (:func:`~gnnmon.report.busy.own_waits`, the load sampled); for each call that waited, its wait
    beyond the usual call's (:func:`~gnnmon.report.busy.off_cpu`), the CPU time it was read from
    (its name and seconds), its thread's extra run-queue time (None where not recorded:
    :func:`~gnnmon.report.busy.queued_more`), its cause (:func:`~gnnmon.report.busy.causes`) and
    whether the load was sampled, as the diagnosis reads them."""
    sampled = busy.load(loop)
    crowd = busy.machine_calls(loop, sampled, one_thread, gc_share)
    at = loop.at.tolist()
    waited = busy.off_cpu(loop, one_thread)
    if waited is None:
        return dict(zip(at, crowd.tolist(), strict=True)), {}
    work = busy.work(loop, one_thread)
    name = "its CPU time" if work is None else "its thread's CPU time" if loop.has("thread_cpu_s") else "its CPU time"
    cpu = loop.column("cpu_s") if work is None else work
    more = busy.queued_more(loop)
    queued = [None] * len(at) if more is None else more.tolist()
    if sampled is None:  # each call that waited: its own cause
        causes, waits = busy.causes(waited, more).tolist(), crowd
    else:  # the crowded cores' calls are the machine's (crowded_words); those that waited otherwise, their own
        waits = busy.own_waits(loop, sampled, one_thread, gc_share)
        causes, crowd = [busy.WAITED] * len(at), crowd | waits
    return (dict(zip(at, crowd.tolist(), strict=True)),
            {p: (float(w), name, float(c), q, k, sampled is not None)
             for p, w, c, q, k, on in zip(at, waited, cpu, queued, causes, waits, strict=True) if on})


def _compiles_in_small_labels(table: Table, warmup: int, min_rows: int, min_ratio: float) -> list[dict[str, Any]]:
    """In a label with too few rows to judge, a call that compiled (``compile_frames`` > 0) and
    took over ``min_ratio`` times the median of the calls that did not is still a ``recompile``
    spike: a compiled model's first call of 13 s must not vanish because the label has 6 rows."""
    out = []
    for label, part in table.parts.items():
        timed = _Timed(part, warmup)
        if int(timed.steady.sum()) >= min_rows or "compile_frames" not in part.cols:
            continue  # judged in full by spikes(), or nothing compiled
        frames = np.nan_to_num(timed.column("compile_frames"), nan=0.0)
        plain = timed.t[frames <= 0]
        if not plain.size:
            continue
        med = median(plain)
        for j in np.flatnonzero((frames > 0) & (timed.t > min_ratio * med)).tolist():
            row = part.row(int(timed.at[j]))
            t = float(timed.t[j])
            n = int(row["compile_frames"])
            out.append(_judged(label, row, t, med, min_ratio * med, "recompile",
                               f"{n} frame(s) compiled, {float(row.get('compile_s') or 0.0) * 1e3:.0f} "
                               f"ms compiling ({timed.t.size} rows: too few to judge the others)",
                               gc_pause_s=float(row.get("gc_pause_s") or 0.0), computed=None))
    return out


def _slow_first_epoch(timed: _Timed, noise: float) -> tuple[Any, float] | None:
    """(first epoch, its median time) if rows carry epochs and the first epoch is clearly slower
    than the later ones — its median above theirs by more than 20 % and 3 spreads — else None.

    The bar is the later epochs' own level, not the spike threshold: it decides why a spike in the
    first epoch was slow, not whether it was, so a rerun whose first epoch is a little faster does
    not turn every first-epoch spike from ``warm-up`` into ``unexplained``."""
    if "epoch" not in timed.part.cols:
        return None
    epochs = timed.column("epoch")
    known = ~np.isnan(epochs)
    values = np.unique(epochs[known])
    if values.size < 2:
        return None
    first = values[0]
    m = median(timed.t[epochs == first])
    base = median(timed.t[known & (epochs != first)])
    if m > max(1.2 * base, base + 3 * noise):
        value = first.item()
        return (int(value) if value == int(value) else value), m
    return None


def dips(
    records: Rows,
    *,
    k: float = 5.0,
    min_ratio: float = 1.5,
    warmup: int = 2,
    shape_tol: float = SHAPE_TOL,
    min_rows: int = 5,
) -> list[dict[str, Any]]:
    """Rows far faster than their label's median, with cause ``shape`` or ``unexplained``."""
    found: list[dict[str, Any]] = []
    for label, timed, med, noise, shapes in _labels_timed(as_table(records), warmup, min_rows):
        threshold = min(med - k * noise, med / min_ratio)
        for j in np.flatnonzero((timed.t < threshold) & timed.steady).tolist():
            row = timed.part.view(int(timed.at[j]))
            t = float(timed.t[j])
            odd_shape = unusual_shape(row, shapes, shape_tol)
            found.append(_judged(label, row, t, med, threshold, "shape" if odd_shape else "unexplained", odd_shape))
    return found


def _first_text(part: Part, field: str) -> str | None:
    """The first text a column holds (which phase a nested one ran inside)."""
    return next((v for v in part.cols[field].values if isinstance(v, str)), None)


WAITING_BELOW = 0.5
"""A slow call whose process computed less than this share of its time (CPU time over wall time,
or sampled utilisation over 100 %) was waiting, not computing: on I/O, a lock, another process,
a device sync."""


DOING = {True: "computing", False: "waiting, not computing"}
"""A spike's ``computed`` (True: it computed, False: it waited) in its detail's first words."""


def _unexplained(row: Mapping[str, Any]) -> tuple[bool | None, str]:
    """What the row says of a slow call nothing explains: whether it computed (True) or waited
    (False), None where neither its CPU time nor its process's utilisation was recorded, and the
    words for it."""
    cpu: Any = row.get("cpu_s")
    wall: Any = row.get("wall_s")
    util: Any = row.get("cpu_util_pct")
    if is_number(cpu) and is_number(wall) and float(wall) > 0:
        cpu_s, wall_s = float(cpu), float(wall)
        computed = not cpu_s < WAITING_BELOW * wall_s
        return computed, f"{DOING[computed]}: {cpu_s * 1e3:.1f} ms of CPU time in {wall_s * 1e3:.1f} ms"
    if is_number(util):
        pct = float(util)
        computed = not pct < 100 * WAITING_BELOW
        return computed, f"{DOING[computed]}: the process used {pct:.0f} % of a core while it ran"
    return None, ("no GC pause, compile, batch shape or warm-up; sample= or energy= records whether it waited or "
                  "computed")


def step_analysis(records: Rows, *, warmup: int = 2) -> dict[str, dict[str, Any]]:
    """Per label: time per node and per edge, each phase's share of the time and the residual
    no phase covered, GC's cost, and p50/p90/p99 raw versus with GC pauses removed. Rows before
    ``warmup`` are left out (all rows are used if that would leave none)."""
    out: dict[str, dict[str, Any]] = {}
    for label, part in as_table(records).parts.items():
        timed = _Timed(part, warmup)
        use = timed.steady if timed.steady.any() else np.ones(timed.t.size, dtype=bool)
        t = timed.t[use]
        if not t.size:
            continue
        total = float(np.sum(t))
        info: dict[str, Any] = {"rows": int(t.size), "warmup_left_out": int(timed.t.size - t.size),
                                "time_s": describe(np.sort(t))}
        for name, key in (("per_node_s", "num_nodes"), ("per_edge_s", "num_edges")):
            size = timed.column(key)[use]
            ok = ~np.isnan(size) & (size > 0)
            info[name] = median(t[ok] / size[ok]) if ok.any() else None
        phases = [k for k in part.cols if phase_field(k) is not None]
        if phases and total > 0:
            inside = nested_phases(part.cols, partial(_first_text, part))
            share = {p[6:-2]: float(np.nansum(timed.column(p)[use])) / total for p in sorted(phases)}
            share["residual"] = 1.0 - sum(v for name, v in share.items() if name not in inside)
            info["phase_share"] = share
            if inside:
                info["phase_in"] = inside  # nested phase -> the phase it ran inside (its share is part of that one)
        pauses = np.nan_to_num(timed.column("gc_pause_s")[use], nan=0.0)
        info["gc_rows"] = int(np.count_nonzero(pauses > 0))
        info["gc_pause_total_s"] = float(np.sum(pauses))
        info["gc_share"] = info["gc_pause_total_s"] / total if total > 0 else None
        raw = np.sort(t).tolist()
        clean = np.sort(np.maximum(0.0, t - pauses)).tolist()
        info["raw"] = {q: percentile(raw, n) for q, n in (("p50", 50), ("p90", 90), ("p99", 99))}
        info["clean"] = {q: percentile(clean, n) for q, n in (("p50", 50), ("p90", 90), ("p99", 99))}
        out[label] = info
    return out


def gc_summary(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Collections per generation and reason, total and longest pause (seconds)."""
    events = list(events)
    per_gen = {g: [e["duration_s"] for e in events if e.get("generation") == g] for g in (0, 1, 2)}
    reasons: dict[str, int] = {}
    for e in events:
        reasons[e.get("reason", "?")] = reasons.get(e.get("reason", "?"), 0) + 1
    return {
        "collections": len(events),
        "by_generation": {g: {"count": len(v), "pause_s": sum(v), "max_s": max(v, default=0.0)}
                          for g, v in per_gen.items()},
        "by_reason": reasons,
        "pause_total_s": sum(e["duration_s"] for e in events),
        "in_rows": sum(1 for e in events if e.get("row")),
    }
