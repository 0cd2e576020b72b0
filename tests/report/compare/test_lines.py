"""The per-label lines of ``gnnmon compare`` (:mod:`gnnmon.report.compare.lines`) on planted runs:
each call's time, CPU time, phases, data wait, GC pause, compilation, peak, energy and batch shape
chosen by the test, so that every line's figure, change, verdict, unit, judged flag and bounds
follow from the plant. The expectations are computed here from the planted numbers: a run's figure
is its steady calls' median (index 2 on; the first two are warm-up) with the median's standard
error (√(π/2) × the robust spread / √calls; from 15 calls, at least the spread of the medians of
consecutive stretches), a side's value the geometric mean of its runs' figures, the change new /
base − 1 with one-sided 95 % bounds (Student's t over the runs; one run a side: an assumed spread
per run at the normal quantile). Nothing depends on the machine's speed."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from gnnmon.data.table import Table
from gnnmon.report.compare.comparison import Comparison
from gnnmon.report.compare.gate import Change
from gnnmon.report.compare.lines import (
    _mean_of,
    _median_of,
    as_change,
    compare_label,
    compare_sides,
    gaps,
    kind_of,
    lead,
    line,
    merged,
    model_lines,
    of_change,
    other_figures,
    others_load,
    ranks_of,
    time_figures,
    unit_of,
)
from gnnmon.report.loops import loops
from gnnmon.report.memory.model import fit
from tests.report.compare.planted import result
from tests.report.diagnosis.planted import MiB, steps

MEDIAN_SE = math.sqrt(math.pi / 2)
"""The standard error of a median of normal data, in units of its standard deviation over √n."""
ROBUST = 1 / stats.norm.ppf(0.75)
"""The median absolute deviation of normal data times this is its standard deviation (1.4826)."""
Q95 = stats.norm.ppf(0.95)


def sigma(cv: float) -> float:
    """The logarithms' spread of a log-normal figure whose coefficient of variation is ``cv`` (a
    relative spread, assumed or a run's own, is held so: 0.03 -> 0.029993)."""
    return math.sqrt(math.log(1 + cv * cv))


WARM = [0.5, 0.5]
"""Two warm-up calls (index 0 and 1), far off every steady figure: no steady figure may hold them."""
NOT_JUDGED = ("(not judged: the batches differ in size and no trusted memory model says what the same "
              "batch needs)")


def rows(label: str = "step", **columns: list[Any]) -> list[dict[str, Any]]:
    """One call a row, ``index`` counting from 0; each column lists its calls' values (None: the row
    lacks the field)."""
    n = len(next(iter(columns.values())))
    out = []
    for i in range(n):
        r: dict[str, Any] = {"label": label, "index": i, "parent": None, "error": None}
        r.update({k: v[i] for k, v in columns.items() if v[i] is not None})
        out.append(r)
    return out


def loop_of(rs: list[dict[str, Any]]):
    (loop,) = loops(Table(rs))
    return loop


def median_figure(values: list[float]) -> tuple[float, float]:
    """A run's figure from fewer than 15 steady calls: their median and its relative error."""
    v = np.asarray(values, dtype=float)
    m = float(np.median(v))
    return m, MEDIAN_SE * ROBUST * float(np.median(np.abs(v - m))) / math.sqrt(v.size) / m


def geomean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values))))


def student(base: list[float], new: list[float]) -> dict[str, float]:
    """The change between two sides of runs and its one-sided 95 % bounds, Student's t pooled."""
    a, b = np.log(base), np.log(new)
    df = a.size + b.size - 2
    s = math.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / df)
    se = s * math.sqrt(1 / a.size + 1 / b.size)
    d = float(b.mean() - a.mean())
    q = stats.t.ppf(0.95, df)
    return {"change": math.expm1(d), "low": math.expm1(d - q * se), "high": math.expm1(d + q * se), "se": se,
            "df": df, "spread": s, "log": d}


def approx(x: float) -> Any:
    return pytest.approx(x, rel=1e-4)


# --- a run's figures --------------------------------------------------------------------------------------------


def test_a_runs_time_is_its_steady_calls_median_with_the_medians_error():
    """Five steady calls (1, 2, 2, 3, 10 ms) after two slow warm-up calls: the median 2 ms, its
    error √(π/2) · 1.4826 · MAD / √5 (MAD 1 ms); the outlier moves neither."""
    times = [1e-3, 2e-3, 2e-3, 3e-3, 10e-3]
    figures = time_figures(loop_of(rows(wall_s=WARM + times)))
    assert list(figures) == [(None, "time per step")]
    level, se = figures[(None, "time per step")]
    assert level == pytest.approx(2e-3, rel=1e-12)
    assert se == approx(MEDIAN_SE * ROBUST * 1e-3 / math.sqrt(5) / 2e-3)
    assert (level, se) == pytest.approx(median_figure(times), rel=1e-4)


def test_fifteen_calls_in_three_stretches_are_held_to_the_stretches_medians():
    """15 steady calls that took 1 ms, then 2 ms, then 3 ms, five at a time (neighbouring calls
    alike): the median's error over independent calls (MAD 1 ms: 0.48 ms) is smaller than the three
    stretches' medians show (1, 2 and 3 ms: standard deviation 1 ms / √3 = 0.58 ms), which holds.
    The rows are in the file shuffled, the stretches in the order the calls started."""
    in_order = [1e-3] * 5 + [2e-3] * 5 + [3e-3] * 5
    start = [10_000_000 * k for k in range(17)]
    shuffle = [0, 1, *(2 + (5 * (k % 3) + k // 3) for k in range(15))]  # 1, 2, 3 ms, 1, 2, 3 ms ... in the file
    t = WARM + in_order
    figure = time_figures(loop_of(rows(wall_s=[t[i] for i in shuffle], t_start_ns=[start[i] for i in shuffle],
                                       index=[i for i in shuffle])))[(None, "time per step")]
    blocks = 1e-3 / math.sqrt(3)
    assert blocks > MEDIAN_SE * ROBUST * 1e-3 / math.sqrt(15)
    assert figure == (pytest.approx(2e-3, rel=1e-12), approx(blocks / 2e-3))
    # the same calls without their start times are taken in the file's order: 1, 2, 3 ms in every stretch
    plain = time_figures(loop_of(rows(wall_s=[t[i] for i in shuffle], index=[i for i in shuffle])))
    assert plain[(None, "time per step")] == (pytest.approx(2e-3, rel=1e-12),
                                              approx(MEDIAN_SE * ROBUST * 1e-3 / math.sqrt(15) / 2e-3))


def test_fourteen_calls_are_too_few_for_stretches():
    """14 steady calls in stretches of 1, 2 and 3 ms (5, 5, 4): two stretches of five and a short
    one are too few (three of five are needed), so the error is the median's alone."""
    times = [1e-3] * 5 + [2e-3] * 5 + [3e-3] * 4
    figure = time_figures(loop_of(rows(wall_s=WARM + times)))[(None, "time per step")]
    assert figure == pytest.approx(median_figure(times), rel=1e-4)


def test_spikes_in_the_last_stretch():
    """Calls of 2 ms with the last four at 10 ms (a slow end): 14 steady calls are too few for
    stretches, and the median's error is 0 (most calls took 2 ms exactly); 15 are three stretches
    whose medians (2, 2 and 10 ms) show the slow end."""
    fourteen = time_figures(loop_of(rows(wall_s=WARM + [2e-3] * 10 + [10e-3] * 4)))[(None, "time per step")]
    assert fourteen == (pytest.approx(2e-3, rel=1e-12), 0.0)
    fifteen = time_figures(loop_of(rows(wall_s=WARM + [2e-3] * 11 + [10e-3] * 4)))[(None, "time per step")]
    assert fifteen == (pytest.approx(2e-3, rel=1e-12), approx(float(np.std([2e-3, 2e-3, 10e-3], ddof=1))
                                                               / math.sqrt(3) / 2e-3))


def test_calls_without_start_times_keep_the_files_order():
    """21 steady calls: three (0.5 ms) carry their start times, eighteen do not (a run whose rows
    lost them) and slowed down call by call, 1 ms to 18 ms in the file: those come after the three,
    in the order of the file, so the four stretches' medians (0.75, 6, 11 and 16 ms) show the
    slowing down."""
    t, start = list(WARM), [0, 1]
    slowing = iter(np.arange(1, 19) * 1e-3)
    for k in range(21):
        t.append(0.5e-3 if k % 7 == 0 else float(next(slowing)))
        start.append(100 + k if k % 7 == 0 else None)
    figure = time_figures(loop_of(rows(wall_s=t, t_start_ns=start)))[(None, "time per step")]
    ordered = np.array([0.5e-3] * 3 + [k * 1e-3 for k in range(1, 19)])
    medians = [np.median(b) for b in np.array_split(ordered, 4)]
    assert medians == pytest.approx([0.75e-3, 6e-3, 11e-3, 16e-3])
    level = float(np.median(ordered))
    se = max(MEDIAN_SE * ROBUST * float(np.median(np.abs(ordered - level))) / math.sqrt(21),
             float(np.std(medians, ddof=1)) / 2)
    assert figure == (pytest.approx(level, rel=1e-12), approx(se / level))


def test_a_call_without_a_start_time_is_taken_last():
    """16 steady calls: fifteen that slowed down from 1 to 15 ms in the order they started, and one
    of 0.5 ms whose row, in the middle of the file, has no start time: it is taken after them, so
    the three stretches' medians are 3.5, 9 and 13 ms (not 2.75, 8 and 13, as first; nor as filed)."""
    slowing = [k * 1e-3 for k in range(1, 16)]
    t = WARM + slowing[:8] + [0.5e-3] + slowing[8:]
    start = [0, 1] + [10 + k for k in range(8)] + [None] + [10 + k for k in range(8, 15)]
    figure = time_figures(loop_of(rows(wall_s=t, t_start_ns=start)))[(None, "time per step")]
    ordered = np.array(slowing + [0.5e-3])
    medians = [np.median(b) for b in np.array_split(ordered, 3)]
    assert medians == pytest.approx([3.5e-3, 9e-3, 13e-3])
    level = float(np.median(ordered))
    se = max(MEDIAN_SE * ROBUST * float(np.median(np.abs(ordered - level))) / 4, np.std(medians, ddof=1) / math.sqrt(3))
    assert figure == (pytest.approx(level, rel=1e-12), approx(se / level))


def test_a_run_whose_calls_took_no_time_has_no_time_figure():
    """A figure is a ratio: calls that took 0 s give none (nor do calls with no figure at all)."""
    figures = time_figures(loop_of(rows(wall_s=[0.0] * 5, phase_load_s=[0.0, 0.0, 0.0, 0.0, -1.0])))
    assert figures == {}
    assert _median_of(np.array([math.nan, math.nan])) is None and _median_of(np.array([])) is None


def test_cpu_time_phases_and_the_wait_for_data_per_step():
    """Each steady call (five) carries its thread's CPU time, two phases, and the wait for its batch
    with the copy to the device: each gets its own figure, its median, keyed by phase. A call
    whose wait was not timed (no ``data_wait_s``, only a copy) is not a wait of 0: it is left out."""
    wall = [4e-3, 5e-3, 6e-3, 5e-3, 5e-3]
    cpu = [3e-3, 3e-3, 4e-3, 3e-3, 2e-3]
    fwd = [1e-3, 1e-3, 2e-3, 1e-3, 1e-3]
    bwd = [2e-3, 2e-3, 2e-3, 3e-3, 2e-3]
    wait = [1e-3, None, 3e-3, 1e-3, 5e-3]
    copy = [1e-4, 7e-3, 1e-4, 1e-4, 1e-4]
    figures = time_figures(loop_of(rows(wall_s=WARM + wall, thread_cpu_s=WARM + cpu, phase_forward_s=WARM + fwd,
                                        phase_backward_s=WARM + bwd, data_wait_s=WARM + wait,
                                        data_to_device_s=[0.0, 0.0] + copy)))
    waits = [w + c for w, c in zip(wait, copy, strict=True) if w is not None]
    assert figures == {
        (None, "time per step"): pytest.approx(median_figure(wall), rel=1e-4),
        (None, "CPU time per step"): pytest.approx(median_figure(cpu), rel=1e-4),
        ("forward", "time per step"): pytest.approx(median_figure(fwd), rel=1e-4),
        ("backward", "time per step"): pytest.approx(median_figure(bwd), rel=1e-4),
        ("data wait", "time per step"): pytest.approx(median_figure(waits), rel=1e-4),
    }


def test_a_phase_some_steps_did_not_run_is_its_mean_over_every_step():
    """Twenty steady calls of 10 ms; phase io ran on every fifth (calls 0, 5, 10, 15) for 250 ms and
    not at all on the others: a step pays 4 x 250 / 20 = 50 ms of io on average, its figure (a
    newcomer's compare read "io: time per step 300.3 ms, added" for a 300 ms phase on one step in
    ten), with the mean's relative error (the sample standard deviation over √20, over the mean);
    phase forward, on every step, is still its median."""
    io = [0.25 if i % 5 == 0 else None for i in range(20)]
    lp = loop_of(rows(wall_s=WARM + [0.01] * 20, phase_io_s=[None, None] + io, phase_forward_s=WARM + [4e-3] * 20))
    assert gaps(lp) == {"io"}
    assert time_figures(lp)[("io", "time per step")][0] == 0.25  # alone: the median of the steps that ran it
    figures = time_figures(lp, gaps(lp))
    paid = np.array([0.25 if i % 5 == 0 else 0.0 for i in range(20)])
    assert paid.mean() == 0.05
    assert figures[("io", "time per step")] == (pytest.approx(0.05, rel=1e-12),
                                                pytest.approx(paid.std(ddof=1) / math.sqrt(20) / 0.05, rel=1e-9))
    assert figures[("forward", "time per step")] == (pytest.approx(4e-3, rel=1e-12), 0.0)


def test_a_phase_one_run_skipped_once_is_the_same_kind_of_figure_on_both_sides():
    """Both runs time phase io at 8, 12, 10, 14, 9, 11 ms over and over (20 steady steps); the new
    run skipped it on one step. Every run's io figure is then a mean over every step (the base's
    too), so the change is that one step's 0 s in twenty, about -5 %, not a median against a mean
    (which read +18 % on a lognormal phase)."""
    pattern = [8e-3, 12e-3, 10e-3, 14e-3, 9e-3, 11e-3]
    io = [pattern[i % 6] for i in range(20)]
    skipped = [None if i == 7 else v for i, v in enumerate(io)]
    base = loop_of(rows(wall_s=WARM + [0.02] * 20, phase_io_s=WARM + io))
    new = loop_of(rows(wall_s=WARM + [0.02] * 20, phase_io_s=WARM + skipped))
    (ln,) = [ln for ln in compare_label("all", "step", [base], [new], True, lambda label: [], 0.03)
             if ln["phase"] == "io" and ln["figure"] == "time per step"]
    assert ln["base"] == pytest.approx(float(np.mean(io)), rel=1e-12)
    assert ln["new"] == pytest.approx(float(np.mean([v or 0.0 for v in skipped])), rel=1e-12)
    assert ln["change"] == pytest.approx(-pattern[7 % 6] / sum(io), rel=1e-9)
    # the other way round (the base skipped it): the new run, which ran io on every step, is its mean
    # too, 212 ms / 20 = 10.6 ms (its median, 10.5 ms, would read +5 % for +6 %)
    assert float(np.median(io)) == pytest.approx(10.5e-3, rel=1e-12)
    (back,) = [ln for ln in compare_label("all", "step", [new], [base], True, lambda label: [], 0.03)
               if ln["phase"] == "io" and ln["figure"] == "time per step"]
    assert back["base"] == pytest.approx(10e-3, rel=1e-12)
    assert back["new"] == pytest.approx(sum(io) / 20, rel=1e-12) and sum(io) == pytest.approx(0.212, rel=1e-12)
    assert back["change"] == pytest.approx(sum(io) / (sum(io) - pattern[7 % 6]) - 1, rel=1e-9)


def test_time_per_thousand_nodes_and_edges():
    """Batches of 1,500 nodes and 500 edges (2 thousand), one call's of 1,000 nodes and none: each
    steady call's time over its batch, in thousands of nodes and edges; the call of 0 nodes and 0
    edges has no size and is left out of the figure per size (not of the step's)."""
    wall = [4e-3, 6e-3, 2e-3, 5e-3, 9e-3]
    nodes = [1500, 1500, 1000, 1500, 0]
    edges = [500, 500, 0, 500, 0]
    figures = time_figures(loop_of(rows(wall_s=WARM + wall, num_nodes=[10, 10] + nodes,
                                        num_edges=[10, 10] + edges)))
    per = [w / ((n + e) / 1e3) for w, n, e in zip(wall, nodes, edges, strict=True) if n + e]
    assert figures == {(None, "time per step"): pytest.approx(median_figure(wall), rel=1e-4),
                       (None, "time per 1,000 nodes+edges"): pytest.approx(median_figure(per), rel=1e-4)}


def test_a_batch_without_edges_is_sized_by_its_nodes():
    wall = [4e-3, 6e-3, 5e-3]
    nodes = [2000, 3000, 2500]
    figures = time_figures(loop_of(rows(wall_s=WARM + wall, num_nodes=[1, 1] + nodes)))
    per = [w / (n / 1e3) for w, n in zip(wall, nodes, strict=True)]
    assert figures[(None, "time per 1,000 nodes+edges")] == pytest.approx(median_figure(per), rel=1e-4)
    assert median_figure(per)[0] == pytest.approx(2e-3)
    one_node = time_figures(loop_of(rows(wall_s=WARM + [1e-3] * 3, num_nodes=[1] * 5)))  # 1 s per 1,000
    assert one_node[(None, "time per 1,000 nodes+edges")] == (pytest.approx(1.0), 0.0)


def test_gc_pause_per_call_is_the_mean_over_the_steady_calls():
    """GC paused 2, 4 and 6 ms in three steady calls and not at all in one that recorded no pause:
    the mean 3 ms a call, its error the standard deviation over √4; the warm-up's pauses are not counted."""
    pauses = [2e-3, 4e-3, 6e-3, None]
    got = other_figures(loop_of(rows(wall_s=WARM + [1e-3] * 4, gc_pause_s=[1.0, 1.0] + pauses)))
    counted = np.array([2e-3, 4e-3, 6e-3, 0.0])
    assert got == {(None, "GC pause per call"): (pytest.approx(3e-3),
                                                 pytest.approx(counted.std(ddof=1) / 2 / 3e-3))}


def test_gc_pause_of_one_call_and_of_none():
    one = other_figures(loop_of(rows(wall_s=[1e-3], gc_pause_s=[4e-3])))
    assert one == {(None, "GC pause per call"): (pytest.approx(4e-3), 0.0)}
    never = other_figures(loop_of(rows(wall_s=WARM + [1e-3] * 3, gc_pause_s=[1.0, 1.0, 0.0, 0.0, 0.0])))
    assert never == {(None, "GC pause per call"): (0.0, 0.0)}
    # what the function answers for calls with no pause recorded at all
    assert _mean_of(np.array([math.nan, 2e-3, 4e-3])) == (
        pytest.approx(3e-3), pytest.approx(np.std([2e-3, 4e-3], ddof=1) / math.sqrt(2) / 3e-3))
    assert _mean_of(np.array([math.nan])) is None
    # a pause that came in a stretch (the first 8 of 24 calls, 3 ms each): the batch means' error (4
    # stretches of 6 calls, at least 5 each: 3 ms, 1 ms, 0, 0), larger than the independent values'
    stretch = np.array([3e-3] * 8 + [0.0] * 16)
    parts = np.array([3e-3, 1e-3, 0.0, 0.0])
    assert _mean_of(stretch) == (pytest.approx(1e-3, rel=1e-12),
                                 pytest.approx(parts.std(ddof=1) / math.sqrt(4) / 1e-3, rel=1e-9))
    assert parts.std(ddof=1) / math.sqrt(4) > stretch.std(ddof=1) / math.sqrt(24)
    # 15 calls are the fewest held to stretches (three of five: 3 ms, 0, 0, whose means' standard
    # deviation over √3 is 1 ms, the mean itself), not the independent values' 0.38 ms
    fifteen = np.array([3e-3] * 5 + [0.0] * 10)
    thirds = np.array([3e-3, 0.0, 0.0])
    assert thirds.std(ddof=1) / math.sqrt(3) == pytest.approx(1e-3, rel=1e-12)
    assert fifteen.std(ddof=1) / math.sqrt(15) == pytest.approx(0.378e-3, rel=1e-3)
    assert _mean_of(fifteen) == (pytest.approx(1e-3, rel=1e-12), pytest.approx(1.0, rel=1e-9))


def test_calls_that_recompiled():
    """Six calls compiled frames at calls 0, 2 and 4: the first compiled, the other two
    recompiled (warm-up calls count: compiling is what warm-up holds). Where the rows say which calls
    recompiled (``compile_recompiles``), that count is taken instead."""
    frames = [3, 0, 1, 0, 2, 0]
    got = other_figures(loop_of(rows(wall_s=[1e-3] * 6, compile_frames=frames)))
    assert got == {(None, "calls that recompiled"): (2.0, 0.0)}
    said = other_figures(loop_of(rows(wall_s=[1e-3] * 6, compile_frames=frames, compile_recompiles=[0, 0, 0, 0, 1, 0])))
    assert said == {(None, "calls that recompiled"): (1.0, 0.0)}
    once = other_figures(loop_of(rows(wall_s=[1e-3] * 6, compile_frames=[0, 3, 0, 0, 0, 0])))
    assert once == {(None, "calls that recompiled"): (0.0, 0.0)}


def test_the_peak_is_the_highest_of_every_call():
    """The highest peak of the run, warm-up included (a call's peak is what the device must hold),
    calls without one aside."""
    got = other_figures(loop_of(rows(wall_s=[1e-3] * 5, mem_peak_bytes=[9e8, 1e8, None, 3e8, 2e8])))
    assert got == {(None, "peak memory"): (9e8, 0.0)}
    none = other_figures(loop_of(rows(wall_s=[1e-3] * 3, mem_peak_bytes=[None, None, None], other=[1, 1, 1])))
    assert none == {}


def test_energy_per_graph():
    """Each steady call's energy (GPU, CPU and RAM joules, each where measured) over its graphs: 12 J
    over 4 graphs, 6 J over 2, 4 J over 1, 8 J over 2 (3, 3, 4 and 4 J a graph: the median 3.5 J);
    a call of no graph (40 J) is left out, and the warm-up's 100 J a graph."""
    gpu = [50.0, 50.0, 10.0, 4.0, 1.0, None, 20.0]
    cpu = [50.0, 50.0, 2.0, 2.0, 2.0, 8.0, 20.0]
    ram = [None, None, None, None, 1.0, None, None]
    graphs = [1, 1, 4, 2, 1, 2, 0]
    got = other_figures(loop_of(rows(wall_s=[1e-3] * 7, energy_gpu_j=gpu, energy_cpu_j=cpu, energy_ram_j=ram,
                                     num_graphs=graphs)))
    assert got == {(None, "energy per graph"): pytest.approx(median_figure([3.0, 3.0, 4.0, 4.0]), rel=1e-4)}
    assert got[(None, "energy per graph")][0] == 3.5


def test_energy_without_graphs_or_without_energy_has_no_figure():
    none = other_figures(loop_of(rows(wall_s=[1e-3] * 4, energy_gpu_j=[1.0] * 4)))
    zero = other_figures(loop_of(rows(wall_s=[1e-3] * 4, energy_gpu_j=[0.0] * 4, num_graphs=[1] * 4)))
    nographs = other_figures(loop_of(rows(wall_s=[1e-3] * 4, energy_cpu_j=[5.0] * 4, num_graphs=[0] * 4)))
    assert none == zero == nographs == {}
    one = other_figures(loop_of(rows(wall_s=[1e-3] * 3, energy_ram_j=[0.0, 0.0, 6.0], num_graphs=[1, 1, 2])))
    assert one == {(None, "energy per graph"): (3.0, 0.0)}
    small = other_figures(loop_of(rows(wall_s=[1e-3] * 3, energy_cpu_j=[0.5] * 3, num_graphs=[1] * 3)))
    assert small == {(None, "energy per graph"): (0.5, 0.0)}


# --- a line -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("figure", "kind", "unit"), [
    ("time per step", "time", "s"), ("time per 1,000 nodes+edges", "time", "s"), ("CPU time per step", "time", "s"),
    ("GC pause per call", "time", "s"), ("calls that recompiled", "count", "calls"),
    ("energy per graph", "energy", "J"),
    ("peak memory", "memory", "bytes"), ("memory model: bytes per node", "memory", "bytes"),
    ("peak forecast for the new run's largest batch", "memory", "bytes")])
def test_kind_and_unit(figure, kind, unit):
    assert kind_of(figure) == kind and unit_of(figure) == unit
    assert line("all", "step", None, figure, [(2.0, 0.0)], [(2.0, 0.0)])["unit"] == unit


def test_a_line_of_five_runs_a_side():
    """Base runs 10-11 ms, new runs 12-13 ms: the sides' values are the runs' geometric means, the
    change and its bounds Student's t over the runs' logarithms (8 degrees of freedom): slower."""
    base = [10e-3, 10.5e-3, 11e-3, 10.2e-3, 10.8e-3]
    new = [12e-3, 12.6e-3, 13e-3, 12.2e-3, 12.9e-3]
    got = line("rank 1", "step", "forward", "time per step", [(v, 0.01) for v in base], [(v, 0.02) for v in new],
               "time", 0.5)
    want = student(base, new)
    assert got == {"scope": "rank 1", "label": "step", "phase": "forward", "figure": "time per step", "unit": "s",
                   "base": approx(geomean(base)), "new": approx(geomean(new)), "runs": [5, 5],
                   "change": approx(want["change"]), "low": approx(want["low"]), "high": approx(want["high"]),
                   "log": approx(want["log"]), "se": approx(want["se"]), "df": 8, "spread": approx(want["spread"]),
                   "seen": True, "test": "Student's t over 5 + 5 runs", "judged": "time", "verdict": "slower"}
    assert got["low"] > 0


def test_a_line_of_one_run_a_side_holds_the_assumed_spread_or_the_runs_own():
    """One run a side, 10 % apart: the spread between reruns cannot be seen, the one assumed (2 %)
    or a run's own error where wider (the new run's 5 %) is held at the normal quantile (df None)."""
    assumed = line("all", "step", None, "time per step", [(1.0, 0.01)], [(1.10, 0.005)], None, 0.02)
    se = sigma(0.02) * math.sqrt(2)
    assert assumed["df"] is None and assumed["seen"] is False and assumed["spread"] == pytest.approx(sigma(0.02))
    assert assumed["se"] == approx(se) and assumed["change"] == approx(0.10)
    assert assumed["low"] == approx(math.expm1(math.log(1.10) - Q95 * se))
    assert assumed["high"] == approx(math.expm1(math.log(1.10) + Q95 * se))
    # 9.5 % (log) over 1.645 · 2.8 %: beyond the noise
    assert assumed["verdict"] == "slower" and assumed["judged"] is None
    own = line("all", "step", None, "time per step", [(1.0, 0.01)], [(1.10, 0.05)], None, 0.02)
    assert own["spread"] == pytest.approx(sigma(0.05)) and own["se"] == approx(sigma(0.05) * math.sqrt(2))
    assert own["verdict"] == "within noise" and own["low"] < 0 < own["high"]
    base_own = line("all", "step", None, "time per step", [(1.0, 0.05)], [(1.10, 0.0)], None, 0.02)
    assert base_own["spread"] == pytest.approx(sigma(0.05))
    default = line("all", "step", None, "time per step", [(1.0, 0.0)], [(1.10, 0.0)])
    assert default["spread"] == 0.0 and default["se"] == 0.0 and default["low"] == default["high"]


def test_verdicts_by_kind_and_direction():
    """Up is worse for every kind: slower/faster for times, more/less for memory and energy,
    more/fewer for counts; a change with no error either way is taken as it is."""
    def said(figure: str, base: float, new: float) -> str:
        return line("all", "step", None, figure, [(base, 0.0)], [(new, 0.0)])["verdict"]

    assert [said("time per step", 1.0, 1.1), said("time per step", 1.1, 1.0)] == ["slower", "faster"]
    assert [said("GC pause per call", 1.0, 1.1), said("GC pause per call", 1.1, 1.0)] == ["slower", "faster"]
    assert [said("peak memory", 1.0, 1.1), said("peak memory", 1.1, 1.0)] == ["more", "less"]
    assert [said("calls that recompiled", 2.0, 3.0), said("calls that recompiled", 3.0, 2.0)] == ["more", "fewer"]
    assert [said("energy per graph", 1.0, 1.1), said("energy per graph", 1.1, 1.0)] == ["more", "less"]
    assert said("time per step", 1.0, 1.0) == "same"
    assert said("time per step", 1.0, 1.004) == "within noise"  # under 0.5 %: never called a change
    assert said("time per step", 1.0, 0.996) == "within noise"
    assert said("time per step", 1.0, 1.006) == "slower"


def test_half_a_percent_is_a_change():
    """A change of exactly MIN_CHANGE (0.5 %) beyond its noise is called; just under it is not."""
    exact = Change(math.log1p(0.005), 0.0, math.inf, 0.0, False, "exact")
    assert exact.relative == 0.005 and of_change(exact, "time")["verdict"] == "slower"
    under = Change(math.log1p(0.005) - 1e-12, 0.0, math.inf, 0.0, False, "exact")
    assert of_change(under, "time")["verdict"] == "within noise"
    down = Change(math.log(0.99), 0.0, math.inf, 0.0, False, "exact")
    assert of_change(down, "memory")["verdict"] == "less"
    q = stats.norm.ppf(1 - 0.05)
    at_zero = Change(q * 0.01, 0.01, math.inf, 0.01, False, "normal")  # its lower bound exactly no change
    assert of_change(at_zero, "time")["low"] == 0.0 and of_change(at_zero, "time")["verdict"] == "within noise"
    at_zero = Change(-q * 0.01, 0.01, math.inf, 0.01, False, "normal")  # its upper bound exactly no change
    assert of_change(at_zero, "time")["high"] == 0.0 and of_change(at_zero, "time")["verdict"] == "within noise"
    noisy = Change(0.0, 0.01, 4.0, 0.01, True, "t")
    got = of_change(noisy, "time")
    assert got["verdict"] == "within noise" and got["df"] == 4.0
    assert (got["high"] == approx(math.expm1(stats.t.ppf(0.95, 4) * 0.01))
            and got["low"] == approx(-got["high"] / (1 + got["high"])))


def test_a_side_without_the_figure_or_at_zero():
    """A figure one side lacks is added or removed, never judged; a count or pause of 0 on either
    side has no ratio: the same, or changed from or to 0, shown with the sides' means."""
    added = line("all", "step", None, "time per step", [], [(2.0, 0.1), (8.0, 0.1)], "time")
    assert added["verdict"] == "added" and added["judged"] is None and added["base"] is None
    assert added["new"] == pytest.approx(4.0) and added["runs"] == [0, 2] and added["change"] is None
    removed = line("all", "step", None, "time per step", [(2.0, 0.1)], [], "time")
    assert removed["verdict"] == "removed" and removed["judged"] is None and removed["new"] is None
    zero = line("all", "step", None, "calls that recompiled", [(0.0, 0.0), (3.0, 0.0)], [(0.0, 0.0), (3.0, 0.0)],
                "time")
    assert zero["verdict"] == "same" and zero["judged"] is None and zero["base"] == 1.5 and zero["change"] is None
    moved = line("all", "step", None, "calls that recompiled", [(2.0, 0.0)], [(0.0, 0.0)], "time")
    assert moved["verdict"] == "changed (from or to 0)" and moved["judged"] is None
    assert moved["base"] == 2.0 and moved["new"] == 0.0 and moved["log"] is None and moved["unit"] == "calls"
    assert as_change(moved) is None


def test_a_lines_change_comes_back_from_its_fields():
    two = line("all", "step", None, "time per step", [(1.0, 0.0), (1.1, 0.0)], [(1.2, 0.0), (1.3, 0.0)])
    assert as_change(two) == Change(two["log"], two["se"], 2, two["spread"], True, "Student's t over 2 + 2 runs")
    one = line("all", "step", None, "time per step", [(1.0, 0.0)], [(1.2, 0.0)], None, 0.03)
    back = as_change(one)
    assert back is not None and back.df == math.inf and back.bound(0.05, upper=False) == pytest.approx(one["low"])
    assert back.log == pytest.approx(math.log(1.2)) and back.spread == pytest.approx(sigma(0.03)) and back.seen is False


# --- a label's lines --------------------------------------------------------------------------------------------


def test_the_time_judged():
    """One time line a label is judged: the step's CPU time where every run's step ran on one
    thread and recorded it, else its time; per 1,000 nodes and edges where every run has shapes."""
    both = {(None, "time per step"): (1.0, 0.0), (None, "time per 1,000 nodes+edges"): (1.0, 0.0),
            (None, "CPU time per step"): (1.0, 0.0), (None, "CPU time per 1,000 nodes+edges"): (1.0, 0.0)}
    steps_only = {(None, "time per step"): (1.0, 0.0), (None, "CPU time per step"): (1.0, 0.0)}
    no_cpu = {(None, "time per step"): (1.0, 0.0), (None, "time per 1,000 nodes+edges"): (1.0, 0.0)}
    assert lead([both], [both], True) == "CPU time per 1,000 nodes+edges"
    assert lead([both], [both], False) == "time per 1,000 nodes+edges"
    assert lead([both], [both, no_cpu], True) == "time per 1,000 nodes+edges"
    assert lead([both, steps_only], [both], True) == "CPU time per step"
    assert lead([no_cpu], [steps_only], False) == "time per step"


def steady_run(wall: float, label: str = "step", n: int = 7, **columns: list[Any]) -> list[dict[str, Any]]:
    """A run of ``n`` calls that took ``wall`` seconds each (CPU time alike where asked)."""
    return rows(label, wall_s=[wall] * n, t_start_ns=[10_000_000 * k for k in range(n)], **columns)


def test_a_labels_lines_in_order_with_the_one_judged():
    """Two runs a side, each call with CPU time, a phase, shapes, a GC pause, a peak and energy:
    the step's lines first (by figure), then each phase's, then the others by name; the step's CPU
    time per 1,000 nodes and edges judged (one thread), the peak judged against the memory limit."""
    def run(wall: float, peak: float) -> list[dict[str, Any]]:
        n = 7
        return steady_run(wall, n=n, thread_cpu_s=[wall / 2] * n, phase_opt_s=[wall / 4] * n,
                          phase_back_s=[wall / 4] * n, num_nodes=[1000] * n, num_edges=[3000] * n,
                          gc_pause_s=[1e-4] * n,
                          compile_frames=[1] + [0] * (n - 1), mem_peak_bytes=[peak] * n,
                          energy_cpu_j=[2.0] * n, num_graphs=[1] * n)

    base = [loop_of(run(4e-3, 100 * MiB)), loop_of(run(4.4e-3, 100 * MiB))]
    new = [loop_of(run(5e-3, 120 * MiB)), loop_of(run(5.4e-3, 120 * MiB))]
    got = compare_label("rank 3", "step", base, new, True, lambda label: [], 0.03)
    assert {(ln["scope"], ln["label"]) for ln in got} == {("rank 3", "step")}
    assert [(ln["phase"], ln["figure"]) for ln in got] == [
        (None, "CPU time per 1,000 nodes+edges"), (None, "CPU time per step"), (None, "time per 1,000 nodes+edges"),
        (None, "time per step"), ("back", "time per 1,000 nodes+edges"), ("back", "time per step"),
        ("opt", "time per 1,000 nodes+edges"), ("opt", "time per step"), (None, "GC pause per call"),
        (None, "calls that recompiled"), (None, "energy per graph"),
        (None, "peak memory")]
    assert [ln["judged"] for ln in got] == ["time"] + [None] * 10 + ["memory"]
    cpu = got[0]
    want = student([4e-3 / 2 / 4, 4.4e-3 / 2 / 4], [5e-3 / 2 / 4, 5.4e-3 / 2 / 4])
    assert cpu["change"] == approx(want["change"]) and cpu["low"] == approx(want["low"]) and cpu["df"] == 2
    assert cpu["base"] == approx(geomean([4e-3 / 8, 4.4e-3 / 8]))
    assert [ln["verdict"] for ln in got[8:]] == ["same", "same", "same", "more"]
    assert got[-1]["change"] == pytest.approx(0.2) and got[-1]["base"] == pytest.approx(100 * MiB)
    gc = got[8]
    assert gc["base"] == pytest.approx(1e-4) and gc["unit"] == "s" and gc["runs"] == [2, 2]
    # several threads: the step's time per 1,000 nodes and edges is judged instead
    judged = [ln["figure"] for ln in compare_label("all", "step", base, new, False, lambda label: [], 0.03)
              if ln["judged"] == "time"]
    assert judged == ["time per 1,000 nodes+edges"]


def test_assumed_spread_reaches_the_time_lines_not_the_others():
    base, new = [loop_of(steady_run(4e-3, gc_pause_s=[1e-3] * 7))], [loop_of(steady_run(4.2e-3, gc_pause_s=[2e-3] * 7))]
    got = {ln["figure"]: ln for ln in compare_label("all", "step", base, new, False, lambda label: [], 0.04)}
    assert got["time per step"]["spread"] == pytest.approx(sigma(0.04))
    assert got["time per step"]["high"] == approx(math.expm1(math.log(1.05) + Q95 * sigma(0.04) * math.sqrt(2)))
    assert got["GC pause per call"]["spread"] == 0.0 and got["GC pause per call"]["change"] == pytest.approx(1.0)


def test_a_peak_of_bigger_batches_is_shown_not_judged():
    """The new side's batches are twice as large (median 4,000 against 2,000 nodes and edges) and
    no memory model says what the same batch needs: the peak is shown, with why it is not judged."""
    def run(nodes: int, peak: float) -> list[dict[str, Any]]:
        return steady_run(1e-3, num_nodes=[nodes] * 7, num_edges=[nodes] * 7, mem_peak_bytes=[peak] * 7)

    base, new = [loop_of(run(1000, 100 * MiB))], [loop_of(run(2000, 130 * MiB))]
    (peak,) = [ln for ln in compare_label("all", "step", base, new, False, lambda label: [], 0.03)
               if ln["figure"] == "peak memory"]
    assert peak["judged"] is None and peak["verdict"] == "more " + NOT_JUDGED
    assert peak["change"] == pytest.approx(0.3)
    # a trusted model's judged line: the peak is shown without the note (the model's forecast is judged)
    forecast = {"figure": "peak forecast for the new run's largest batch", "judged": "memory"}
    got = compare_label("all", "step", base, new, False, lambda label: [forecast], 0.03)
    (peak,) = [ln for ln in got if ln["figure"] == "peak memory"]
    assert peak["judged"] is None and peak["verdict"] == "more" and got[-1] is forecast
    # batches the same size: judged
    same = [loop_of(run(1000, 130 * MiB))]
    (peak,) = [ln for ln in compare_label("all", "step", base, same, False, lambda label: [], 0.03)
               if ln["figure"] == "peak memory"]
    assert peak["judged"] == "memory" and peak["verdict"] == "more"
    # a model's lines that are not judged leave the peak judged
    shown = {"figure": "memory model: bytes", "judged": None}
    (peak,) = [ln for ln in compare_label("all", "step", base, same, False, lambda label: [shown], 0.03)
               if ln["figure"] == "peak memory"]
    assert peak["judged"] == "memory"


@pytest.mark.parametrize(("nodes", "resized"), [(1040, False), (960, False), (1060, True), (940, True)])
def test_batches_resized_by_more_than_five_percent(nodes, resized):
    """Median batch sizes of the sides' calls (all of them, each run's together) 4 % apart are the
    same work, 6 % apart they are not."""
    def run(n: int) -> list[dict[str, Any]]:
        return steady_run(1e-3, num_nodes=[n] * 7, mem_peak_bytes=[1e8] * 7)

    base = [loop_of(run(1000)), loop_of(run(1000))]
    new = [loop_of(run(nodes)), loop_of(run(nodes))]
    got = compare_label("all", "step", base, new, False, lambda label: [], 0.03)
    (peak,) = [ln for ln in got if ln["figure"] == "peak memory"]
    assert (peak["judged"] is None) == resized
    assert peak["verdict"] == ("same " + NOT_JUDGED if resized else "same")


def test_the_median_batch_is_every_call_of_the_sides_runs():
    """Base: one run of 1,000-node batches and one of 3,000 (median over their calls together:
    2,000); new: 2,000 in both. The medians are alike: the peak is judged. Where a base run has no
    shapes at all, its size is unknown and the peak judged whatever the other side's."""
    def run(n: int | None, calls: int = 7) -> list[dict[str, Any]]:
        return steady_run(1e-3, n=calls, num_nodes=[n] * calls, mem_peak_bytes=[1e8] * calls)

    base = [loop_of(run(1000, 6)), loop_of(run(3000, 6))]
    new = [loop_of(run(2000)), loop_of(run(2000))]
    (peak,) = [ln for ln in compare_label("all", "step", base, new, False, lambda label: [], 0.03)
               if ln["figure"] == "peak memory"]
    assert peak["judged"] == "memory"
    uneven = [loop_of(run(1000, 5)), loop_of(run(3000, 9))]  # median over the calls: 3,000
    (peak,) = [ln for ln in compare_label("all", "step", uneven, new, False, lambda label: [], 0.03)
               if ln["figure"] == "peak memory"]
    assert peak["judged"] is None
    unknown = [loop_of(run(None)), loop_of(run(1000))]
    for sides in ((unknown, [loop_of(run(4000))]), ([loop_of(run(4000))], unknown)):
        (peak,) = [ln for ln in compare_label("all", "step", *sides, False, lambda label: [], 0.03)
                   if ln["figure"] == "peak memory"]
        assert peak["judged"] == "memory"


# --- memory models ----------------------------------------------------------------------------------------------


def noisy(rows_: list[dict[str, Any]], extra: float = 0.0, seed: int = 0) -> list[dict[str, Any]]:
    """The planted peaks with ``extra`` bytes more and a few KiB of seeded noise (a fit has a spread)."""
    rng = np.random.default_rng(seed)
    for r in rows_:
        r["mem_peak_bytes"] = r["mem_peak_bytes"] + extra + float(rng.normal(0, 4096))
    return rows_


def test_both_trusted_models_forecast_the_new_runs_largest_batch():
    """Peaks planted as 100 MiB + 2 KiB a node + 512 B an edge (a few KiB of noise), the new side's
    constant 8 MiB more: the models' coefficients are shown side by side (not judged), and both
    models' forecast for the new run's largest batch is judged: its change is 8 MiB over what
    the base forecasts there, its error each model's spread over √rows, relative, the larger
    taken (one run a side, nothing assumed beyond it)."""
    base_rows, new_rows = noisy(steps(60, seed=1)), noisy(steps(60, seed=2), 8 * MiB, seed=1)
    failed = dict(new_rows[5], num_nodes=5000, num_edges=20000, error="OutOfMemoryError")
    del failed["mem_peak_bytes"]
    new_rows.insert(0, failed)  # a failed call: not a batch the run ran, nor a row of the model
    got = model_lines("all", Table(base_rows), Table(new_rows))("train_step")
    assert [ln["figure"] for ln in got] == ["memory model: bytes", "memory model: bytes per node",
                                            "memory model: bytes per edge",
                                            "peak forecast for the new run's largest batch"]
    ma, mb = fit(Table(base_rows), "train_step", "mem_peak_bytes"), fit(Table(new_rows), "train_step", "mem_peak_bytes")
    assert [ln["base"] for ln in got[:3]] == pytest.approx([ma.coefficients[t] for t in ("const", "num_nodes",
                                                                                       "num_edges")], rel=1e-9)
    assert [ln["new"] for ln in got[:3]] == pytest.approx([mb.coefficients[t] for t in ("const", "num_nodes",
                                                                                      "num_edges")], rel=1e-9)
    assert [ln["verdict"] for ln in got[:3]] == ["", "", ""] and [ln["judged"] for ln in got[:3]] == [None] * 3
    assert [(ln["se"], ln["test"]) for ln in got[:3]] == [(0.0, "one run a side: figures taken as exact")] * 3
    assert {(ln["scope"], ln["label"], ln["phase"], ln["unit"]) for ln in got} == {("all", "train_step", None, "bytes")}
    assert got[0]["new"] - got[0]["base"] == pytest.approx(8 * MiB, rel=0.01)
    assert got[1]["base"] == pytest.approx(2048, rel=0.01) and got[2]["new"] == pytest.approx(512, rel=0.05)
    forecast = got[3]
    largest = max((r for r in new_rows if r.get("error") is None), key=lambda r: r["num_nodes"])
    pa = sum(ma.coefficients[t] * (largest.get(t, 1.0) if t != "const" else 1.0) for t in ma.coefficients)
    pb = sum(mb.coefficients[t] * (largest.get(t, 1.0) if t != "const" else 1.0) for t in mb.coefficients)
    assert forecast["base"] == pytest.approx(pa, rel=1e-9) and forecast["new"] == pytest.approx(pb, rel=1e-9)
    assert forecast["change"] == pytest.approx(8 * MiB / (100 * MiB + 2048 * largest["num_nodes"]
                                                          + 512 * largest["num_edges"]), rel=0.01)
    own = max(ma.spread_bytes / math.sqrt(ma.rows) / pa, mb.spread_bytes / math.sqrt(mb.rows) / pb)
    assert own > 0 and ma.rows == mb.rows == 58
    assert forecast["spread"] == approx(sigma(own)) and forecast["se"] == approx(sigma(own) * math.sqrt(2))
    assert forecast["judged"] == "memory" and forecast["verdict"] == "more" and forecast["unit"] == "bytes"
    assert forecast["scope"] == "all" and forecast["label"] == "train_step" and forecast["phase"] is None
    assert forecast["runs"] == [1, 1] and forecast["df"] is None


def test_the_same_model_on_both_sides_says_same():
    """The same rows both sides: every coefficient the same, the forecast no change (within its noise)."""
    planted = noisy(steps(40, seed=3))
    got = model_lines("rank 0", Table(planted), Table([dict(r) for r in planted]))("train_step")
    assert [ln["verdict"] for ln in got] == ["same", "same", "same", "within noise"]
    assert got[3]["change"] == 0.0 and got[3]["scope"] == "rank 0"


def test_no_forecast_without_a_trusted_model_of_the_same_terms():
    """No lines where a side's model cannot be trusted (8 calls: too few rows), where the models'
    terms differ (the new side's edges never vary), or where the rows carry no peak."""
    base = Table(noisy(steps(40, seed=4)))
    assert model_lines("all", base, Table(noisy(steps(8, seed=5))))("train_step") == []
    assert model_lines("all", Table(noisy(steps(8, seed=5))), base)("train_step") == []
    fixed = steps(40, seed=6)
    for r in fixed:  # every batch 4,000 edges: a model of nodes alone, trusted
        r["num_edges"] = 4000
        r["mem_peak_bytes"] = 100 * MiB + 2048 * r["num_nodes"] + 512 * 4000
    fixed = noisy(fixed)
    assert fit(Table(fixed), "train_step", "mem_peak_bytes").terms == ("num_nodes",)
    assert model_lines("all", base, Table(fixed))("train_step") == []
    assert model_lines("all", Table(fixed), base)("train_step") == []
    bare = [{k: v for k, v in r.items() if k != "mem_peak_bytes"} for r in steps(40, seed=7)]
    assert model_lines("all", base, Table(bare))("train_step") == []
    assert model_lines("all", Table(bare), base)("train_step") == []


def test_a_model_that_forecasts_no_memory_is_no_ratio():
    """Both models trusted, one side's peaks all 0 (nothing measured on the device): its forecast is
    0, against which no ratio is said; a forecast of a fraction of a byte is still compared (peaks
    planted at 1 byte per 10,000 nodes and 100,000 edges)."""
    empty, tiny = steps(40, seed=13), steps(40, seed=14)
    for r in empty:
        r["mem_peak_bytes"] = 0
    for r in tiny:
        r["mem_peak_bytes"] = r["num_nodes"] / 10_000 + r["num_edges"] / 100_000
    normal = Table(noisy(steps(40, seed=15)))
    for sides in ((Table(empty), normal), (normal, Table(empty))):
        assert [ln["figure"] for ln in model_lines("all", *sides)("train_step")] == [
            "memory model: bytes", "memory model: bytes per node", "memory model: bytes per edge"]
    largest = max(steps(40, seed=15), key=lambda r: r["num_nodes"])
    small = largest["num_nodes"] / 10_000 + largest["num_edges"] / 100_000
    assert small < 1
    forecast = model_lines("all", Table(tiny), normal)("train_step")[-1]
    assert forecast["figure"] == "peak forecast for the new run's largest batch"
    assert forecast["base"] == pytest.approx(small, rel=1e-6) and forecast["verdict"] == "more"
    largest = max(tiny, key=lambda r: r["num_nodes"])
    forecast = model_lines("all", normal, Table(tiny))("train_step")[-1]
    assert forecast["new"] == pytest.approx(largest["num_nodes"] / 10_000 + largest["num_edges"] / 100_000, rel=1e-6)
    assert forecast["verdict"] == "less"


def test_coefficients_without_a_forecast():
    """Models of edges alone (no node counts) have no largest batch by nodes: their coefficients
    only. The new run's largest batch without its edge count is no shape to forecast: the same.
    Models that forecast no memory at all (every peak 0) give no forecast to compare."""
    def edges_only(seed: int) -> list[dict[str, Any]]:  # peaks of 100 MiB + 1 KiB an edge
        planted = [{k: v for k, v in r.items() if k != "num_nodes"} for r in steps(40, seed=seed)]
        for r in planted:
            r["mem_peak_bytes"] = 100 * MiB + 1024 * r["num_edges"]
        return noisy(planted, seed=seed)

    got = model_lines("all", Table(edges_only(8)), Table(edges_only(9)))("train_step")
    assert [ln["figure"] for ln in got] == ["memory model: bytes", "memory model: bytes per edge"]
    base, new = noisy(steps(40, seed=10)), noisy(steps(40, seed=11))
    largest = max(new, key=lambda r: r["num_nodes"])
    del largest["num_edges"]
    got = model_lines("all", Table(base), Table(new))("train_step")
    assert [ln["figure"] for ln in got] == ["memory model: bytes", "memory model: bytes per node",
                                            "memory model: bytes per edge"]
    empty = steps(40, seed=12)
    for r in empty:
        r["mem_peak_bytes"] = 0
    got = model_lines("all", Table(empty), Table([dict(r) for r in empty]))("train_step")
    assert [(ln["figure"], ln["verdict"], ln["base"]) for ln in got] == [
        ("memory model: bytes", "same", 0.0), ("memory model: bytes per node", "same", 0.0),
        ("memory model: bytes per edge", "same", 0.0)]


# --- sides of runs ----------------------------------------------------------------------------------------------


def test_sides_of_runs_by_label():
    """Each label of either side in the order first seen; a label on one side only gets one line:
    its runs' steady medians (4 and 16 ms: 8 ms their geometric mean), added or removed."""
    base = [Table(steady_run(4e-3, "train") + steady_run(1e-3, "old") + steady_run(2e-3, "val")),
            Table(steady_run(4.4e-3, "train") + steady_run(2e-3, "val"))]
    new = [Table(steady_run(5e-3, "train") + steady_run(4e-3, "eval", 5) + steady_run(2e-3, "val")),
           Table(steady_run(5.4e-3, "train") + rows("eval", wall_s=WARM + [16e-3, 16e-3, 17e-3]))]
    got = compare_sides("rank 2", base, new, False)
    assert [(ln["label"], ln["figure"]) for ln in got] == [("train", "time per step"), ("old", "time per step"),
                                                           ("val", "time per step"), ("eval", "time per step")]
    assert {ln["scope"] for ln in got} == {"rank 2"}
    train, old, val, evals = got
    assert val["runs"] == [2, 1] and val["verdict"] == "same"
    assert train["judged"] == "time" and train["runs"] == [2, 2] and train["change"] == approx(
        student([4e-3, 4.4e-3], [5e-3, 5.4e-3])["change"])
    assert old["verdict"] == "removed" and old["base"] == pytest.approx(1e-3) and old["new"] is None
    assert old["runs"] == [1, 0]
    assert evals["verdict"] == "added" and evals["new"] == pytest.approx(8e-3) and evals["base"] is None
    assert evals["runs"] == [0, 2] and evals["judged"] is None and evals["unit"] == "s"


def test_one_run_a_side_assumes_the_rerun_spread():
    """One run a side and no spread given: 3 % a run is assumed (gate.RERUN_SPREAD)."""
    (ln,) = compare_sides("all", [Table(steady_run(4e-3))], [Table(steady_run(4.4e-3))], False)
    assert ln["spread"] == pytest.approx(sigma(0.03)) and ln["se"] == approx(sigma(0.03) * math.sqrt(2))
    assert ln["test"] == "one run a side: a rerun spread of 3 % a run assumed (normal)"
    (ln,) = compare_sides("all", [Table(steady_run(4e-3))], [Table(steady_run(4.4e-3))], False, 0.01)
    assert ln["spread"] == pytest.approx(sigma(0.01))


def test_each_sides_runs_are_modelled_together():
    """Two runs a side, each of 30 calls: the models are fitted over each side's runs together
    (too few rows in one run alone would leave none trusted); the forecast's change is the new
    side's 8 MiB."""
    base = [Table(noisy(steps(30, seed=s), seed=s)) for s in (20, 21)]
    new = [Table(noisy(steps(30, seed=s), 8 * MiB, seed=s)) for s in (22, 23)]
    for t in (*base, *new):
        for r in t.rows():
            assert r["index"] < 30
    got = compare_sides("all", base, new, False)
    forecast = got[-1]
    assert forecast["figure"] == "peak forecast for the new run's largest batch" and forecast["judged"] == "memory"
    assert forecast["new"] - forecast["base"] == pytest.approx(8 * MiB, rel=0.01)
    (peak,) = [ln for ln in got if ln["figure"] == "peak memory"]
    assert peak["judged"] is None and peak["verdict"] == "more"  # the forecast is judged instead


def test_several_runs_in_one_table():
    a, b = Table(steady_run(1e-3, "x") + steady_run(2e-3, "y")), Table(steady_run(3e-3, "x", 4))
    assert merged([a]) is a
    both = merged([a, b])
    assert len(both) == 7 + 7 + 4 and both.labels() == ["x", "y"]
    assert [r["wall_s"] for r in both.rows() if r["label"] == "x"] == [1e-3] * 7 + [3e-3] * 4


def test_others_load_is_the_median_of_every_sampled_call():
    t = Table(rows("a", wall_s=[1e-3] * 3, others_cpu_pct=[10.0, 20.0, 30.0])
              + rows("b", wall_s=[1e-3] * 3, others_cpu_pct=[40.0, None, 90.0]) + rows("c", wall_s=[1e-3] * 2))
    assert others_load(t) == 30.0
    assert others_load(Table(rows("a", wall_s=[1e-3] * 3))) is None
    assert others_load(Table(rows("a", wall_s=[1e-3] * 2, others_cpu_pct=[None, None]))) is None
    assert ranks_of(Table(rows("a", wall_s=[1e-3] * 3, rank=[1, 0, None]))) == [0, 1]
    assert ranks_of(Table(rows("a", wall_s=[1e-3] * 3))) == []


def test_a_comparison_judges_the_cpu_time_of_one_threaded_runs():
    """Runs whose manifests say torch ran on one thread, recording the step's CPU time: that is
    judged; the same runs saying two threads: the time is."""
    def runs(wall: float, seeds: range, threads: int) -> list:
        return [result(steady_run(wall * (1 + s / 100), thread_cpu_s=[wall / 2] * 7), s, threads) for s in seeds]

    one = Comparison(runs(4e-3, range(3), 1), runs(5e-3, range(3, 6), 1), max_slowdown=0.05)
    assert [ln["figure"] for ln in one.lines if ln["judged"]] == ["CPU time per step"]
    two = Comparison(runs(4e-3, range(3), 2), runs(5e-3, range(3, 6), 2), max_slowdown=0.05)
    assert [ln["figure"] for ln in two.lines if ln["judged"]] == ["time per step"]
