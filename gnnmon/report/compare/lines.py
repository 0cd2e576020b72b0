"""Two runs side by side (``gnnmon compare BASE NEW``, ``Report.compare(other)``): per label and per
phase, what changed and whether it is beyond the noise each run shows.

Each label's steady top-level calls (:class:`~gnnmon.report.loops.Loop`) give, per run:

* **time** per step, and per 1,000 nodes and edges where both runs record the batches' shapes
  (``num_nodes`` + ``num_edges``): the figure a slowdown is judged on, so that bigger batches are
  not a regression; the same for each phase (``phase_<name>_s``) and for the wait for data
  (``data_wait_s`` + ``data_to_device_s``): medians over the calls;
* **memory**: the highest absolute peak (``mem_peak_bytes``), and where both runs' memory models
  (:mod:`gnnmon.report.memory.model`) can be trusted, their coefficients and what each forecasts
  for the same batch (the new run's largest): the figure memory growth is judged on; else the peak,
  when the batches are of the same size (within :data:`RESIZED`), and nothing when they are not;
* **GC** pause per call, **recompilations** (calls that recompiled), **energy per graph**.

A change is given a verdict only beyond the noise of both runs: ``|new − base| > NOISE_K ·
√(se_base² + se_new²)``, se the standard error of each run's figure: of a median, the larger of
1.2533 × the robust spread / √calls and what the medians of :data:`BLOCKS` stretches of the run
say. Where those disagree beyond :data:`DRIFTS` times what their calls' noise explains, the run
drifts (a busy VM's speed, a phase that takes one of two times a stretch at a time): the
stretches stand in for reruns, and the level is known only to within their standard deviation;
else their standard deviation / √stretches (batch means). Within it the verdict is ``within
noise``. Counts (recompilations) are exact. A judged line regresses when its verdict is
the worse one and it changed by more than the limit (``max_slowdown``, ``max_memory_growth``, e.g.
0.05); a phase's or the data wait's change must also add at least :data:`MIN_OF_STEP` of the
step's time, and more than the step's own noise band: a phase too small to matter, or within
what the whole step varies by, cannot fail the step alone. Where a
judged figure's noise band (``NOISE_K`` standard errors, as a share of the base) is wider than its
limit, the gate cannot tell a change of that size from noise: :func:`inconclusive` names it with
its band. A distributed job is compared as a whole (every rank's rows together) and rank by rank.
Nothing here imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from gnnmon.data.table import Table
from gnnmon.figures import ENERGY_FIELDS, MEM_PEAK, phase_field
from gnnmon.report.loops import NOISE_K, Loop, loops, median, spread
from gnnmon.report.memory.model import fit, per_of

MEDIAN_SE = 1.2533
"""The standard error of a median, in units of the spread over √n (normal data)."""

MIN_OF_STEP = 0.01
"""A phase's or the data wait's change under this share of the step's time is not a slowdown."""

RESIZED = 0.05
"""Batches whose median size (nodes + edges) differs by more than this share are not the same
work: their absolute peaks are shown, not judged, unless both memory models are trusted."""

BLOCKS = 8
"""Stretches of a run whose medians show its drift (at least 5 calls each, 3 stretches or none)."""

DRIFTS = 1.5
"""Stretches whose medians spread more than this many times what their calls' noise explains
show a run that drifts: its level is then known only to that spread."""

MIN_CHANGE = 0.005
"""A relative change under this is never given a verdict (0.5 %)."""

WORSE = {"time": ("slower", "faster"), "memory": ("more", "less"), "count": ("more", "fewer"),
         "energy": ("more", "less")}
"""The verdicts of a change up and of one down, by kind of figure (up is worse for every kind)."""

Figure = tuple[float, float]
"""A figure of one run and its standard error."""


def _median_of(values: np.ndarray) -> Figure | None:
    """The median of the calls in order, and its standard error (see the module doc)."""
    values = values[~np.isnan(values)]
    if not values.size:
        return None
    calls = MEDIAN_SE * spread(values)  # one call's contribution: a median's se is this / √calls
    se = calls / math.sqrt(values.size)
    blocks = min(BLOCKS, values.size // 5)
    if blocks >= 3:
        medians = np.array([median(np.sort(b)) for b in np.array_split(values, blocks)])
        disagree = float(medians.std(ddof=1))
        if disagree > DRIFTS * calls / math.sqrt(values.size / blocks):
            se = max(se, disagree)  # the stretches disagree beyond their calls' noise: the level is known to that
        else:
            se = max(se, disagree / math.sqrt(blocks))
    return median(values), se


def _mean_of(values: np.ndarray) -> Figure | None:
    values = values[~np.isnan(values)]
    if not values.size:
        return None
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else 0.0


def _size(loop: Loop) -> np.ndarray | None:
    """Each call's batch in thousands of nodes and edges (None where the run has no shapes)."""
    if not loop.has("num_nodes"):
        return None
    size = loop.zeros("num_nodes") + (loop.zeros("num_edges") if loop.has("num_edges") else 0.0)
    return np.where(size > 0, size / 1e3, np.nan)


def time_figures(loop: Loop) -> dict[tuple[str | None, str], Figure]:
    """``{(phase, figure): (value s, se)}`` of a loop's steady calls: the step (phase None), each
    phase and the data wait, per step and per 1,000 nodes and edges."""
    steady = loop.steady
    size = _size(loop)
    series: dict[str | None, np.ndarray] = {None: loop.t}
    for name in loop.part.cols:
        phase = phase_field(name)
        if phase is not None:
            series[phase] = loop.column(name)
    if loop.has("data_wait_s"):
        series["data wait"] = np.where(np.isnan(loop.column("data_wait_s")), np.nan, loop.wait)
    out: dict[tuple[str | None, str], Figure] = {}
    # in the order the calls started (a job's ranks ran side by side, their rows one file after another)
    start = loop.column("t_start_ns")[steady] if loop.has("t_start_ns") else np.arange(int(steady.sum()), dtype=float)
    order = np.argsort(np.nan_to_num(start, nan=np.inf), kind="stable")
    for phase, values in series.items():
        per_step = _median_of(values[steady][order])
        if per_step is not None:
            out[(phase, "time per step")] = per_step
        if size is not None:
            per_size = _median_of((values / size)[steady][order])
            if per_size is not None:
                out[(phase, "time per 1,000 nodes+edges")] = per_size
    return out


def other_figures(loop: Loop) -> dict[tuple[str | None, str], Figure]:
    """GC pause per call, calls that recompiled, the highest peak and energy per graph."""
    out: dict[tuple[str | None, str], Figure] = {}
    if loop.has("gc_pause_s"):
        gc = _mean_of(loop.zeros("gc_pause_s")[loop.steady])
        if gc is not None:
            out[(None, "GC pause per call")] = gc
    if loop.has("compile_frames"):
        again = loop.zeros("compile_recompiles") > 0 if loop.has("compile_recompiles") else \
            (loop.zeros("compile_frames") > 0) & (np.cumsum(loop.zeros("compile_frames") > 0) > 1)
        out[(None, "calls that recompiled")] = (float(again.sum()), 0.0)
    if loop.has(MEM_PEAK.name):
        peaks = loop.column(MEM_PEAK.name)
        if np.any(~np.isnan(peaks)):
            out[(None, "peak memory")] = (float(np.nanmax(peaks)), 0.0)
    energy = sum((loop.zeros(f) for f in ENERGY_FIELDS if loop.has(f)), np.zeros(loop.t.size))
    if np.any(energy > 0) and loop.has("num_graphs"):
        graphs = loop.zeros("num_graphs")
        per = np.where(graphs > 0, energy / np.where(graphs > 0, graphs, 1.0), np.nan)
        found = _median_of(per[loop.steady])
        if found is not None:
            out[(None, "energy per graph")] = found
    return out


def kind_of(figure: str) -> str:
    """time, memory, count or energy: what a verdict on ``figure`` says."""
    if figure.startswith(("time", "GC")):
        return "time"
    if figure.startswith("calls"):
        return "count"
    if figure.startswith("energy"):
        return "energy"
    return "memory"


def verdict(base: Figure | None, new: Figure | None, kind: str) -> tuple[float | None, str]:
    """The relative change (new/base − 1) and its verdict against both runs' noise."""
    if base is None or new is None:
        return None, "added" if base is None else "removed"
    (a, se_a), (b, se_b) = base, new
    if a == b:
        return 0.0, "same"
    change = (b - a) / a if a else math.inf
    noise = NOISE_K * math.sqrt(se_a ** 2 + se_b ** 2)
    if abs(b - a) <= noise or abs(change) < MIN_CHANGE:
        return change, "within noise"
    up, down = WORSE[kind]
    return change, up if b > a else down


def line(scope: str, label: str, phase: str | None, figure: str, unit: str, base: Figure | None,
         new: Figure | None, judged: str | None = None, of_step: float | None = None) -> dict[str, Any]:
    """One figure of both runs: values, standard errors, ``change``, ``verdict``, and ``judged``
    (``time`` or ``memory``: the limit it is held to; None: shown, not judged)."""
    change, said = verdict(base, new, kind_of(figure))
    return {"scope": scope, "label": label, "phase": phase, "figure": figure, "unit": unit,
            "base": base[0] if base else None, "base_se": base[1] if base else None,
            "new": new[0] if new else None, "new_se": new[1] if new else None,
            "change": change, "verdict": said, "judged": judged, "of_step": of_step}


UNITS = {"time per step": "s", "time per 1,000 nodes+edges": "s", "GC pause per call": "s",
         "calls that recompiled": "calls", "peak memory": "bytes", "energy per graph": "J"}


def compare_loops(scope: str, a: Loop, b: Loop, models: Callable[[Loop, Loop], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The lines of one label in one scope (see the module doc)."""
    ta, tb = time_figures(a), time_figures(b)
    per_size = any(f == "time per 1,000 nodes+edges" for _, f in ta) and \
        any(f == "time per 1,000 nodes+edges" for _, f in tb)
    judged_figure = "time per 1,000 nodes+edges" if per_size else "time per step"
    step_a = ta.get((None, judged_figure))
    out = []
    for key in sorted(set(ta) | set(tb), key=lambda k: (k[0] is not None, k[0] or "", k[1])):
        phase, figure = key
        judged = "time" if figure == judged_figure else None
        of_step = None
        if judged and phase is not None and key in ta and key in tb and step_a and step_a[0] > 0:
            of_step = (tb[key][0] - ta[key][0]) / step_a[0]
        out.append(line(scope, a.label, phase, figure, "s", ta.get(key), tb.get(key), judged, of_step))
    oa, ob = other_figures(a), other_figures(b)
    lines_models = models(a, b)
    size_a, size_b = _size(a), _size(b)
    resized = size_a is not None and size_b is not None and \
        abs(float(np.nanmedian(size_b)) / float(np.nanmedian(size_a)) - 1) > RESIZED
    for key in sorted(set(oa) | set(ob), key=lambda k: k[1]):
        judged = "memory" if key[1] == "peak memory" and not resized and not any(m["judged"] for m in lines_models) \
            else None
        out.append(line(scope, a.label, None, key[1], UNITS[key[1]], oa.get(key), ob.get(key), judged))
        if key[1] == "peak memory" and resized and not any(m["judged"] for m in lines_models):
            out[-1]["verdict"] += " (not judged: the batches differ in size and no trusted memory model says " \
                                  "what the same batch needs)"
    return out + lines_models


def model_lines(scope: str, base: Table, new: Table) -> Callable[[Loop, Loop], list[dict[str, Any]]]:
    """The memory models' coefficients of a label side by side, and both models' forecast for the
    new run's largest batch (judged), where both can be trusted."""
    def lines_of(a: Loop, b: Loop) -> list[dict[str, Any]]:
        try:
            ma, mb = fit(base, a.label, MEM_PEAK.name), fit(new, b.label, MEM_PEAK.name)
        except ValueError:
            return []
        if not (ma.trusted and mb.trusted) or set(ma.terms) != set(mb.terms) or not ma.terms:
            return []
        out = [line(scope, a.label, None, f"memory model: {'bytes' if t == 'const' else 'bytes per ' + per_of(t)}",
                    "bytes", (ma.coefficients[t], 0.0), (mb.coefficients[t], 0.0))
               for t in ma.coefficients]
        for row in out:
            row["verdict"] = "" if row["verdict"] != "same" else row["verdict"]  # shown, not judged
        nodes = b.column("num_nodes")
        if np.all(np.isnan(nodes)):
            return out
        row = b.part.row(int(b.at[int(np.nanargmax(nodes))]))
        if any(not isinstance(row.get(t), (int, float)) for t in ma.terms):
            return out
        shape = {t: float(row[t]) for t in ma.terms}
        pa, pb = ma.predict(**shape), mb.predict(**shape)
        se_a, se_b = ma.spread_bytes / math.sqrt(ma.rows), mb.spread_bytes / math.sqrt(mb.rows)
        out.append(line(scope, a.label, None, "peak forecast for the new run's largest batch", "bytes",
                        (pa.bytes, se_a), (pb.bytes, se_b), "memory"))
        return out
    return lines_of


def compare_tables(scope: str, base: Table, new: Table) -> list[dict[str, Any]]:
    """Every label's lines in one scope; a label in one run only gets one line that says so."""
    la, lb = {loop.label: loop for loop in loops(base)}, {loop.label: loop for loop in loops(new)}
    out = []
    models = model_lines(scope, base, new)
    for label in [*la, *(k for k in lb if k not in la)]:
        if label in la and label in lb:
            out += compare_loops(scope, la[label], lb[label], models)
        else:
            loop = la.get(label) or lb[label]
            fig = (median(loop.t[loop.steady]), 0.0)
            out.append(line(scope, label, None, "time per step", "s", fig if label in la else None,
                            fig if label in lb else None))
    return out


def ranks_of(table: Table) -> list[Any]:
    """The ranks a job's rows carry ([] for a single process)."""
    found: set[Any] = set()
    for part in table.parts.values():
        if "rank" in part.cols:
            found.update(v for v in part.objects("rank") if v is not None)
    return sorted(found)


def _limit(ln: dict[str, Any], max_slowdown: float | None, max_memory_growth: float | None) -> float | None:
    return max_slowdown if ln["judged"] == "time" else max_memory_growth if ln["judged"] == "memory" else None


def regressions(lines: Iterable[dict[str, Any]], max_slowdown: float | None = None,
                max_memory_growth: float | None = None) -> list[dict[str, Any]]:
    """The judged lines whose verdict is the worse one beyond their limit (see the module doc)."""
    lines = list(lines)
    steps = {(ln["scope"], ln["label"]): band(ln) for ln in lines if ln["judged"] == "time" and ln["phase"] is None}
    out = []
    for ln in lines:
        limit = _limit(ln, max_slowdown, max_memory_growth)
        if limit is None or ln["verdict"] not in ("slower", "more") or ln["change"] is None:
            continue
        floor = max(MIN_OF_STEP, steps.get((ln["scope"], ln["label"])) or 0.0)  # the step's own noise
        if ln["change"] > limit and (ln["of_step"] is None or ln["of_step"] >= floor):
            out.append(ln)
    return out


def band(ln: dict[str, Any]) -> float | None:
    """A line's noise band: ``NOISE_K`` standard errors of the difference, as a share of the base."""
    if not ln["base"] or ln["base_se"] is None or ln["new_se"] is None:
        return None
    return NOISE_K * math.hypot(ln["base_se"], ln["new_se"]) / abs(ln["base"])


def inconclusive(lines: Iterable[dict[str, Any]], max_slowdown: float | None = None,
                 max_memory_growth: float | None = None) -> list[dict[str, Any]]:
    """The judged lines of a whole step (not a phase's) that did not regress but whose noise band
    is wider than their limit: a change of the limit's size could hide in it."""
    lines = list(lines)  # read twice
    bad = {id(ln) for ln in regressions(lines, max_slowdown, max_memory_growth)}
    out = []
    for ln in lines:
        limit = _limit(ln, max_slowdown, max_memory_growth)
        wide = band(ln)
        if limit is not None and ln["phase"] is None and id(ln) not in bad and wide is not None and wide > limit:
            out.append(ln)
    return out


def others_load(table: Table) -> float | None:
    """Other processes' CPU on the run's cores, % of one core: the median over its calls (sampled),
    None where the load was not sampled."""
    found = [loop.column("others_cpu_pct") for loop in loops(table) if loop.has("others_cpu_pct")]
    values = np.concatenate(found) if found else np.array([])
    values = values[~np.isnan(values)]
    return median(values) if values.size else None


def merged(tables: Sequence[Table]) -> Table:
    """Several runs' rows in one table, run after run (each run's calls keep their own index)."""
    if len(tables) == 1:
        return tables[0]
    out = Table()
    for table in tables:
        for row in table.rows():
            out.add(row)
    return out


def between_runs(lines: list[dict[str, Any]], bases: Sequence[Table], news: Sequence[Table]) -> None:
    """Widen each time line of the whole job to the spread between its side's runs: the standard
    deviation of the runs' own figures / √runs, where a side has two runs or more; its verdict is
    given again against the widened noise."""
    sides = []
    for tables in (bases, news):
        per_run: dict[tuple[str, str | None, str], list[float]] = {}
        for table in tables:
            for loop in loops(table):
                for (phase, figure), (value, _) in time_figures(loop).items():
                    per_run.setdefault((loop.label, phase, figure), []).append(value)
        sides.append({k: float(np.std(v, ddof=1)) / math.sqrt(len(v)) for k, v in per_run.items() if len(v) >= 2})
    for ln in lines:
        if ln["scope"] != "all" or ln["unit"] != "s" or not ln["figure"].startswith("time"):
            continue
        key = (ln["label"], ln["phase"], ln["figure"])
        for side, se in (("base", sides[0].get(key)), ("new", sides[1].get(key))):
            if se is not None and ln[f"{side}_se"] is not None:
                ln[f"{side}_se"] = max(ln[f"{side}_se"], se)
        if ln["base"] is not None and ln["new"] is not None:
            ln["change"], ln["verdict"] = verdict((ln["base"], ln["base_se"]), (ln["new"], ln["new_se"]), "time")
