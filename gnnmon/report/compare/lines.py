"""Runs against runs (``gnnmon compare BASE... -- NEW...``, ``Report.compare(other)``): per label and
per phase, each side's figure and the change between the sides with its bounds.

Each label's steady top-level calls (:class:`~gnnmon.report.loops.Loop`) give, per run:

* **time** per step, and per 1,000 nodes and edges where every run records the batches' shapes
  (``num_nodes`` + ``num_edges``): so that bigger batches are not a regression; the same for each
  phase (``phase_<name>_s``) and the wait for data (``data_wait_s`` + ``data_to_device_s``);
  the median over the calls (of a phase some steady calls of some run did not run, the mean over
  all of them, 0 s where it did not run: :func:`gaps`). The step's time is ``device_s`` (a GPU's
  events), else ``wall_s``;
* **CPU time** of the step's thread (``thread_cpu_s``, ``collect(sched=True)``): what the step
  computed, whatever else the machine ran; and its **time less its wait for a core**: its time less
  its thread's run-queue time (``thread_queued_s``), at least its CPU time (both read over the
  row's window, which holds gnnmon's bookkeeping around the call: a queue there may hide some of a
  wait of the step's under load, never add to it), what the step computed and waited for of its
  own (I/O, a lock, a sleep), not for a distributed job's ranks (a rank's wait for another at a
  collective is a voluntary wait); where the thread's is not recorded, the **process CPU time**
  (``cpu_s``), shown, and judged only where one run a side stretched beyond it
  (:func:`wall_stretched`, :meth:`~gnnmon.report.compare.comparison.Comparison.decisions`);
* **memory**: the highest peak (``mem_peak_bytes``), and where both sides' memory models
  (:mod:`gnnmon.report.memory.model`) can be trusted, what each forecasts for the new side's largest
  batch; **GC** pause per call, **recompilations**, **energy per graph**.

Each line's change and bounds come from the runs (:mod:`gnnmon.report.compare.gate`): a side's value
is the geometric mean of its runs' figures. A line is ``slower``/``faster`` (``more``/``less``)
where its 90 % interval excludes no change, else ``within noise``. Per label, one time line is
**judged** against ``max_slowdown``: where every run's step ran on one thread on the host and
recorded its run queue, its time less its wait for a core (a sleep in the step is its cost, a busy
machine's wait is not); else its CPU time where every such run recorded that (multi-threaded, one
thread's times are not the step's; on an accelerator, its device time is the step's); else its
time; per size
where every run has shapes, unless the sides' graphs differ (:func:`graphs_differ`: as many graphs
a step on both sides, other nodes + edges a step), where a step's fixed costs make a figure per
size misread the change and it is judged per step. The peak (or the models' forecast, where both are trusted) is judged
against ``max_memory_growth``, unless the batches differ in size (:data:`RESIZED`) and no trusted
model says what the same batch needs. Phases, data wait and the rest are shown with their bounds,
not judged: the step they add up to is. A distributed job's lines are the job's and each rank's.
Nothing here imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gnnmon.data.table import Table
from gnnmon.figures import ENERGY_FIELDS, MEM_PEAK, phase_field
from gnnmon.report.compare.gate import ALPHA, RERUN_SPREAD, Change, change
from gnnmon.report.loops import Loop, block_se, loops
from gnnmon.report.memory.model import fit, per_of
from gnnmon.report.stats import median, spread
from gnnmon.report.stats import scipy_stats as stats

MEDIAN_SE = 1.2533
"""The standard error of a median, in units of the spread over √n (normal data)."""

RESIZED = 0.05
"""Batches whose median size (nodes + edges) differs by more than this share are not the same
work: their peaks are shown, not judged, unless both memory models are trusted."""

GRAPHS_APART = 0.10
"""Two sides' batches' nodes + edges a step (or seed nodes, graphs a step) whose medians lie more
than this share apart differ (:func:`graphs_differ`): two runs of 200 planted calls of the same
data (tests/report/diagnosis/planted.py: sizes ±20 % a call) had medians 2.3 % apart (standard
deviation over 300 pairs; the widest 6.7 %), so 10 % is over four of those; the newcomer's graphs
that kept a quarter of their edges, or doubled them, were 3.4x and 1.9x apart."""

MIN_CHANGE = 0.005
"""A relative change under this is never called slower or faster (0.5 %)."""

WORSE = {"time": ("slower", "faster"), "memory": ("more", "less"), "count": ("more", "fewer"),
         "energy": ("more", "less")}
"""The verdicts of a change up and of one down, by kind of figure (up is worse for every kind)."""

TIME, CPU_TIME, OWN_TIME = "time", "CPU time", "time less wait for a core"
PROCESS_CPU = "process CPU time"
"""The process's CPU time over the call (``cpu_s``, every row), shown where its thread's is not
recorded: with torch on one thread, the step's work and gnnmon's bookkeeping beside it."""

STRETCHED = 0.10
"""The share of a step's time its process computed (``cpu_s`` / time, the median call) lower on one
side than the other by more than this (relative) is a wall time stretched beyond the work
(:func:`wall_stretched`): quiet reruns on this project's 2-core VM spread 0.9-3.7 % a run in their
CPU time and 1.5-5.2 % in their wall time, together (docs/diagnosis.md), so their ratio moves by
under twice the wider; a newcomer's identical runs, one beside a loaded machine, computed 82 % and
48 % of their step."""
PER_STEP, PER_SIZE = "per step", "per 1,000 nodes+edges"

Figure = tuple[float, float]
"""A figure of one run and its relative standard error (its calls' noise and drift)."""


def _median_of(values: np.ndarray) -> Figure | None:
    """The median of the calls in order, and its relative standard error: the larger of the
    median's (1.2533 × spread / √calls) and the batch medians' (:func:`~gnnmon.report.loops.block_se`),
    which holds where neighbouring calls are alike (a phase that takes one of two times a stretch at
    a time, a machine whose speed drifts)."""
    values = values[~np.isnan(values)]
    if not values.size:
        return None
    level = median(values)
    if not level > 0:
        return None
    se = MEDIAN_SE * spread(values) / math.sqrt(values.size)
    if values.size >= 15:  # three stretches of five: the batch medians' error
        se = max(se, block_se(values, lambda b: median(np.sort(b))))
    return level, se / level


def _mean_of(values: np.ndarray) -> Figure | None:
    """The mean of the calls in order, and its relative standard error: the larger of the
    independent values' (standard deviation / √calls) and, from 15 calls, the batch means'
    (:func:`~gnnmon.report.loops.block_se`: a pause or a phase that comes in stretches, an epoch's
    evaluation, varies less within them than between)."""
    values = values[~np.isnan(values)]
    if not values.size:
        return None
    if not values.mean() > 0:
        return 0.0, 0.0
    se = float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else 0.0
    if values.size >= 15:  # three stretches of five
        se = max(se, block_se(values))
    return float(values.mean()), se / float(values.mean())


def _size(loop: Loop) -> np.ndarray | None:
    """Each call's batch in thousands of nodes and edges (None where the run has no shapes)."""
    if not loop.has("num_nodes"):
        return None
    size = loop.zeros("num_nodes") + (loop.zeros("num_edges") if loop.has("num_edges") else 0.0)
    return np.where(size > 0, size / 1e3, np.nan)


def gaps(loop: Loop) -> set[str]:
    """The phases that some of the loop's steady calls ran and some did not."""
    out = set()
    for name in loop.part.cols:
        phase = phase_field(name)
        if phase is not None:
            ran = ~np.isnan(loop.column(name)[loop.steady])
            if ran.any() and not ran.all():
                out.add(phase)
    return out


def time_figures(loop: Loop, sparse: frozenset[str] | set[str] = frozenset()) -> dict[tuple[str | None, str], Figure]:
    """``{(phase, figure): (value s, relative se)}`` of a loop's steady calls: the step (phase
    None), its thread's CPU time, each phase and the data wait, per step and per 1,000 nodes and
    edges. A phase in ``sparse`` (one that some steady steps of some run of the comparison did not
    run, :func:`gaps`: every run's figure is then of the same kind) is its mean over every step, 0 s
    where it did not run (a phase on one step in ten that takes 300 ms costs a step 30 ms, not its
    median where it ran)."""
    steady = loop.steady
    size = _size(loop)
    series: dict[tuple[str | None, str], np.ndarray] = {(None, TIME): loop.t}
    if loop.has("thread_cpu_s"):
        series[(None, CPU_TIME)] = loop.column("thread_cpu_s")
    elif loop.has("cpu_s"):
        series[(None, PROCESS_CPU)] = loop.column("cpu_s")
    if loop.has("thread_queued_s") and loop.has("thread_cpu_s") and not loop.has("rank"):
        # the run queue and the CPU time are read over the row's window, which holds gnnmon's
        # bookkeeping around the call: the call's time less all of the queue, at least its CPU time,
        # is the least the step computed and waited for of its own (a queue in the bookkeeping may
        # hide some of a sleep under load; never adds to it)
        series[(None, OWN_TIME)] = np.maximum(loop.t - loop.column("thread_queued_s"), loop.column("thread_cpu_s"))
    for name in loop.part.cols:
        phase = phase_field(name)
        if phase is not None:
            series[(phase, TIME)] = loop.column(name)
    if loop.has("data_wait_s"):
        series[("data wait", TIME)] = np.where(np.isnan(loop.column("data_wait_s")), np.nan, loop.wait)
    out: dict[tuple[str | None, str], Figure] = {}
    # in the order the calls started (a job's ranks ran side by side, their rows one file after another)
    start = loop.column("t_start_ns")[steady] if loop.has("t_start_ns") else np.arange(int(steady.sum()), dtype=float)
    order = np.argsort(np.nan_to_num(start, nan=np.inf), kind="stable")
    for (phase, what), values in series.items():
        summary = _median_of
        if phase in sparse:
            # a phase some steps did not run took them 0 s: its mean over every step is what a step pays
            values, summary = np.nan_to_num(values, nan=0.0), _mean_of
        per_step = summary(values[steady][order])
        if per_step is not None:
            out[(phase, f"{what} {PER_STEP}")] = per_step
        if size is not None:
            per_size = summary((values / size)[steady][order])
            if per_size is not None:
                out[(phase, f"{what} {PER_SIZE}")] = per_size
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
    if figure.startswith((TIME, CPU_TIME, PROCESS_CPU, "GC")):
        return "time"
    if figure.startswith("calls"):
        return "count"
    if figure.startswith("energy"):
        return "energy"
    return "memory"


def unit_of(figure: str) -> str:
    return {"time": "s", "count": "calls", "energy": "J", "memory": "bytes"}[kind_of(figure)]


def line(scope: str, label: str, phase: str | None, figure: str, base: Sequence[Figure], new: Sequence[Figure],
         judged: str | None = None, assumed: float = 0.0) -> dict[str, Any]:
    """One figure of both sides (each a list of its runs' figures; empty: the side lacks it): the
    sides' values (geometric means of their runs'), the ``change`` with its one-sided bounds at
    :data:`~gnnmon.report.compare.gate.ALPHA` (``low``, ``high``), the test's ``log``, ``se`` and
    ``df`` (None: a normal quantile; to bound it at another level), the ``spread`` per run it saw or assumed, the
    ``verdict``, and ``judged`` (``time`` or ``memory``: the limit it is held to; None: shown)."""
    out: dict[str, Any] = {"scope": scope, "label": label, "phase": phase, "figure": figure, "unit": unit_of(figure),
                           "base": _level(base), "new": _level(new), "runs": [len(base), len(new)], "change": None,
                           "low": None, "high": None, "log": None, "se": None, "df": None, "spread": None,
                           "seen": None, "test": None, "judged": judged}
    if not base or not new:
        return out | {"verdict": "added" if new else "removed", "judged": None}
    if min(v for v, _ in (*base, *new)) <= 0:  # a count or pause of 0: shown, no ratio to judge
        same = [v for v, _ in base] == [v for v, _ in new]
        return out | {"verdict": "same" if same else "changed (from or to 0)", "judged": None}
    c = change([v for v, _ in base], [v for v, _ in new], [s for _, s in base], [s for _, s in new], assumed)
    return out | of_change(c, kind_of(figure))


def of_change(c: Change, kind: str) -> dict[str, Any]:
    """A line's fields from its change (see :func:`line`)."""
    low, high = c.bound(ALPHA, upper=False), c.bound(ALPHA, upper=True)
    if c.log == 0 and c.se == 0:
        said = "same"
    elif (low > 0 or high < 0) and abs(c.relative) >= MIN_CHANGE:
        up, down = WORSE[kind]
        said = up if c.log > 0 else down
    else:
        said = "within noise"
    return {"change": c.relative, "low": low, "high": high, "log": c.log, "se": c.se,
            "df": c.df if math.isfinite(c.df) else None,  # None: a normal quantile (JSON has no infinity)
            "spread": c.spread, "seen": c.seen, "test": c.test, "verdict": said}


def as_change(ln: dict[str, Any]) -> Change | None:
    """A line's change back (None for a line with none: added, removed, from or to 0)."""
    if ln.get("log") is None:
        return None
    return Change(ln["log"], ln["se"], math.inf if ln["df"] is None else ln["df"], ln["spread"], ln["seen"], ln["test"])


def _level(figures: Sequence[Figure]) -> float | None:
    """A side's value: the geometric mean of its runs' figures (their mean where one is 0)."""
    values = [v for v, _ in figures]
    if not values:
        return None
    if min(values) <= 0:
        return math.fsum(values) / len(values)
    return math.exp(math.fsum(map(math.log, values)) / len(values))


def _loops(table: Table) -> dict[str, Loop]:
    return {loop.label: loop for loop in loops(table)}


def on_host(loop: Loop) -> bool:
    """Whether every steady call of a loop was measured on the host (``backend`` ``cpu``): an
    accelerator's step time is its device's, which its thread's times are not; rows that do not
    say are taken as the host's."""
    return all(b in (None, "cpu") for b in loop.part.pick("backend", loop.at[loop.steady].tolist()))


def lead(base: Sequence[dict[tuple[str | None, str], Figure]], new: Sequence[dict[tuple[str | None, str], Figure]],
         single: bool, by_size: bool = True) -> str:
    """The time figure judged for a label (see the module doc), given every run's figures
    (``single``: every run's torch on one thread, and the label's calls on the host; ``by_size``:
    False where the sides' graphs differ, :func:`graphs_differ`, and the step is judged per step)."""
    every = [*base, *new]
    what = next((w for w in (OWN_TIME, CPU_TIME) if single and all((None, f"{w} {PER_STEP}") in f for f in every)),
                TIME)
    per = PER_SIZE if by_size and all((None, f"{what} {PER_SIZE}") in f for f in every) else PER_STEP
    return f"{what} {per}"


UNITS = {"batch_size": "seed nodes", "num_graphs": "graphs"}
"""What a step's batch counts, in the order :func:`graphs_differ` reads them: its seed nodes (a
neighbour loader's batch), else its graphs."""


def _steady(loop: Loop, name: str) -> np.ndarray:
    """A column's steady calls, those that record it (> 0)."""
    values = loop.zeros(name)[loop.steady] if loop.has(name) else np.array([])
    return values[np.isfinite(values) & (values > 0)]


def _apart(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two sides' calls' counts differ: their medians more than :data:`GRAPHS_APART` apart, and
    a two-sided Mann-Whitney U test at :data:`~gnnmon.report.compare.gate.ALPHA` (see :func:`graphs_differ`)."""
    ma, mb = float(np.median(a)), float(np.median(b))
    if abs(mb / ma - 1) <= GRAPHS_APART:
        return False
    return bool(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue < ALPHA)


def graphs_differ(base: Sequence[Loop], new: Sequence[Loop]) -> str | None:
    """Why the sides' steps are judged per step, not per 1,000 nodes and edges: their graphs differ
    (the change altered the graph or the data), in words; None where they do not, or a side has no
    shapes.

    Time per 1,000 nodes and edges puts bigger batches on one footing with smaller ones (64 graphs
    a step against 32), and the same data drawn in another order or sample. Where each step holds
    as many graphs (or seed nodes) on both sides but the graphs differ, it does not: a step's fixed
    costs (the optimizer, each layer's launch) are spread over other sizes, and a step that kept a
    quarter of its edges read +24.5 % per 1,000 nodes+edges while it ran 2.7x faster (a newcomer's
    5 runs a side of 32 graphs a step, this project's 2-core VM). So: where every steady call of
    every run records the batch's seed nodes (``batch_size``), else its graphs (``num_graphs``), and
    the sides' counts a step differ, the batches differ in size and the step is judged per size;
    where they do not and the sides' nodes + edges a step differ, the graphs differ (where neither
    is recorded, as for a ClusterLoader's or a custom sampler's batches, a bigger batch of the same
    graphs cannot be told from other graphs: per size, as before). Two sides' counts differ where
    their pooled steady calls do by a two-sided Mann-Whitney U
    test at :data:`~gnnmon.report.compare.gate.ALPHA` (scipy; shapes are the data's, not the
    machine's, so the calls are the evidence) and their medians lie more than :data:`GRAPHS_APART`
    apart (with hundreds of calls a side the test alone finds a 1 % difference between two draws of
    the same data). Where both differ (more graphs a step, and other graphs), the step is judged per
    size: a per-graph figure is not made."""
    every = [*base, *new]
    if not all(loop.has("num_nodes") for loop in every):
        return None
    unit = next((u for u in UNITS
                 if all(loop.has(u) and _steady(loop, u).size == int(loop.steady.sum()) for loop in every)), None)
    if unit is None:  # no count says the batches held as many graphs: a bigger batch is as likely
        return None
    counts = [np.concatenate([_steady(loop, unit) for loop in side]) for side in (base, new)]
    if _apart(*counts):
        return None  # bigger (or smaller) batches: per size
    sizes = [np.concatenate([_graph_size(loop) for loop in side]) for side in (base, new)]
    if not all(x.size for x in sizes) or not _apart(*sizes):
        return None
    (ca, cb), name = [float(np.median(x)) for x in counts], UNITS[unit]
    held = f" ({ca:,.0f} {name} a step both sides)" if ca == cb else f" ({ca:,.0f} → {cb:,.0f} {name} a step)"
    return (f"the graphs differ between the sides: {float(np.median(sizes[0])):,.0f} → "
            f"{float(np.median(sizes[1])):,.0f} nodes+edges per step{held}, so the step is judged per step, "
            "not per 1,000 nodes+edges")


def _graph_size(loop: Loop) -> np.ndarray:
    """A loop's steady calls' nodes + edges a step, those that record shapes."""
    size = loop.zeros("num_nodes") + (loop.zeros("num_edges") if loop.has("num_edges") else 0.0)
    size = size[loop.steady]
    return size[np.isfinite(size) & (size > 0)]


def wall_stretched(base: Sequence[Loop], new: Sequence[Loop]) -> list[float] | None:
    """``[base's share, new's share, p]`` where one side's step time stretched beyond its work: the
    share of the step's time its process computed (``cpu_s`` over the call's time, each side's
    pooled steady calls' median) lower on one side by more than :data:`STRETCHED`, and the sides'
    shares apart by a two-sided Mann-Whitney U test (scipy, ``p`` under
    :data:`~gnnmon.report.compare.gate.ALPHA`). Without the load sampled or the thread's run queue,
    that is a loaded machine's wait for a core or the step's own (a sleep, I/O, a lock): one run
    a side cannot tell which (:meth:`~gnnmon.report.compare.comparison.Comparison.decisions`).
    None where it did not, or a run lacks ``cpu_s`` or ran on an accelerator."""
    every = [*base, *new]
    if not all(loop.has("cpu_s") and on_host(loop) for loop in every):
        return None

    def shares(side: Sequence[Loop]) -> np.ndarray:
        found = np.concatenate([(loop.column("cpu_s") / loop.t)[loop.steady] for loop in side])
        return found[np.isfinite(found) & (found > 0)]

    a, b = shares(base), shares(new)
    if not a.size or not b.size:
        return None
    sa, sb = float(np.median(a)), float(np.median(b))
    if min(sa, sb) >= (1 - STRETCHED) * max(sa, sb):
        return None
    p = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    return [sa, sb, p] if p < ALPHA else None


def compare_label(scope: str, label: str, base: Sequence[Loop], new: Sequence[Loop], single: bool,
                  models: Callable[[str], list[dict[str, Any]]], assumed: float) -> list[dict[str, Any]]:
    """The lines of one label in one scope (see the module doc): each side a list of its runs' loops."""
    sparse = set().union(*map(gaps, (*base, *new)))  # one kind of figure for every run of both sides
    ta, tb = [time_figures(loop, sparse) for loop in base], [time_figures(loop, sparse) for loop in new]
    differ = graphs_differ(base, new)
    judged_figure = lead(ta, tb, single and all(map(on_host, (*base, *new))), differ is None)
    keys = sorted({k for f in (*ta, *tb) for k in f}, key=lambda k: (k[0] is not None, k[0] or "", k[1]))
    out = []
    for key in keys:
        judged = "time" if key == (None, judged_figure) else None
        out.append(line(scope, label, key[0], key[1], [f[key] for f in ta if key in f],
                        [f[key] for f in tb if key in f], judged, assumed))
        if judged and differ:
            out[-1]["per_step"] = differ
        if judged and key[1] in (f"{TIME} {PER_STEP}", f"{TIME} {PER_SIZE}") and (stretch := wall_stretched(base, new)):
            out[-1]["stretch"] = stretch
    oa, ob = [other_figures(loop) for loop in base], [other_figures(loop) for loop in new]
    lines_models = models(label)
    modelled = any(m["judged"] for m in lines_models)
    sizes = [[s for s in map(_size, side) if s is not None] for side in (base, new)]
    resized = len(sizes[0]) == len(base) and len(sizes[1]) == len(new) and abs(
        float(np.nanmedian(np.concatenate(sizes[1]))) / float(np.nanmedian(np.concatenate(sizes[0]))) - 1) > RESIZED
    for key in sorted({k for f in (*oa, *ob) for k in f}, key=lambda k: k[1]):
        judged = "memory" if key[1] == "peak memory" and not resized and not modelled else None
        out.append(line(scope, label, None, key[1], [f[key] for f in oa if key in f], [f[key] for f in ob if key in f],
                        judged))
        if key[1] == "peak memory" and resized and not modelled:
            out[-1]["verdict"] += " (not judged: the batches differ in size and no trusted memory model says " \
                                  "what the same batch needs)"
    return out + lines_models


def model_lines(scope: str, base: Table, new: Table) -> Callable[[str], list[dict[str, Any]]]:
    """The memory models' coefficients of a label side by side (each side's runs together), and both
    models' forecast for the new side's largest batch (judged), where both can be trusted."""
    def lines_of(label: str) -> list[dict[str, Any]]:
        try:
            ma, mb = fit(base, label, MEM_PEAK.name), fit(new, label, MEM_PEAK.name)
        except ValueError:
            return []
        if not (ma.trusted and mb.trusted) or set(ma.terms) != set(mb.terms) or not ma.terms:
            return []
        out = []
        for t in ma.coefficients:
            name = f"memory model: {'bytes' if t == 'const' else 'bytes per ' + per_of(t)}"
            out.append(line(scope, label, None, name, [(ma.coefficients[t], 0.0)], [(mb.coefficients[t], 0.0)]))
            if out[-1]["verdict"] != "same":
                out[-1]["verdict"] = ""  # shown, not judged
        loop = _loops(new).get(label)
        if loop is None or not loop.has("num_nodes"):
            return out
        row = loop.part.row(int(loop.at[int(np.nanargmax(loop.column("num_nodes")))]))
        if any(not isinstance(row.get(t), (int, float)) for t in ma.terms):
            return out
        shape = {t: float(row[t]) for t in ma.terms}
        pa, pb = ma.predict(**shape), mb.predict(**shape)
        if not (pa.bytes > 0 and pb.bytes > 0):
            return out
        se_a, se_b = ma.spread_bytes / math.sqrt(ma.rows), mb.spread_bytes / math.sqrt(mb.rows)
        out.append(line(scope, label, None, "peak forecast for the new run's largest batch",
                        [(pa.bytes, se_a / pa.bytes)], [(pb.bytes, se_b / pb.bytes)], "memory"))
        return out
    return lines_of


def compare_sides(scope: str, bases: Sequence[Table], news: Sequence[Table], single: bool,
                  assumed: float = RERUN_SPREAD) -> list[dict[str, Any]]:
    """Every label's lines in one scope, each side a list of its runs' tables; a label on one side
    only gets one line that says so."""
    la, lb = [_loops(t) for t in bases], [_loops(t) for t in news]
    labels = list(dict.fromkeys([k for runs in (la, lb) for run in runs for k in run]))
    models = model_lines(scope, merged(bases), merged(news))
    out = []
    for label in labels:
        base, new = [r[label] for r in la if label in r], [r[label] for r in lb if label in r]
        if base and new:
            out += compare_label(scope, label, base, new, single, models, assumed)
        else:
            steps = [(median(loop.t[loop.steady]), 0.0) for loop in base or new]
            out.append(line(scope, label, None, f"{TIME} {PER_STEP}", steps if base else [], steps if new else []))
    return out


def ranks_of(table: Table) -> list[Any]:
    """The ranks a job's rows carry ([] for a single process)."""
    found: set[Any] = set()
    for part in table.parts.values():
        if "rank" in part.cols:
            found.update(v for v in part.objects("rank") if v is not None)
    return sorted(found)


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
        out.extend(table.records())  # column by column: several times faster than row by row
    return out
