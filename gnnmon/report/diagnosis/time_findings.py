"""The diagnosis's findings about time: what took the loop's time that the step's own work did not
(the wait for data is :mod:`gnnmon.report.diagnosis.input_finding`'s, garbage collection
:mod:`gnnmon.report.diagnosis.gc_finding`'s).

Each reads a label's :class:`~gnnmon.report.loops.Loop` (its top-level calls) and returns a finding
(:func:`~gnnmon.report.loops.finding`) or None; a cost is said only beyond the run's own noise
(:func:`~gnnmon.report.loops.beyond_noise`):

* ``recompilation`` — compiling in calls that recompiled (``compile_recompiles``, ``compile_s`` of
  ``@track_compile``); a label's first compilation is its warm-up;
* ``warm-up`` — the first calls' excess over the steady level, and a first epoch clearly slower than
  the later ones; a larger batch than usual held against the time its nodes and edges predict
  (:func:`_by_shape`); said from :data:`WARMUP_SHARE` of the measured time (a first call is
  expected to be slow);
* ``busy machine`` and ``off-CPU wait`` — calls slowed by other processes or waiting off the CPU:
  :mod:`gnnmon.report.diagnosis.machine_findings`; never counted in warm-up here;
* ``slow steps`` — the spikes nothing recorded explains (``report.spikes()``'s ``unexplained``),
  with the phase or nested row their excess grew in; spikes that computed are sent to find their
  work, not to the scheduler's counters.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from gnnmon.report import busy
from gnnmon.report.analysis import SHAPE_TOL, WAITING_BELOW, unusual_shape, usual_shapes
from gnnmon.report.diagnosis import machine_findings
from gnnmon.report.loops import NOISE_K, WARMUP, Loop, beyond_noise, evidence, finding, ms
from gnnmon.report.memory.least_squares import lstsq, varies
from gnnmon.report.stats import median

WARMUP_SHARE = 0.10
"""The least share of the measured time warm-up must take to be said."""

def recompilation(loop: Loop, total: float) -> dict[str, Any] | None:
    """Compiling in calls that recompiled (a label's first compilation is warm-up)."""
    if not loop.has("compile_frames"):
        return None
    frames = loop.zeros("compile_frames")
    compiled = frames > 0
    if loop.has("compile_recompiles"):
        again = loop.zeros("compile_recompiles") > 0
    else:  # no compilation records: every compilation after the first
        again = compiled & (np.cumsum(compiled) > 1)
    m = int(again.sum())
    if not m:
        return None
    seconds = loop.zeros("compile_s")[again]
    cost = float(seconds.sum()) if seconds.any() else float(np.maximum(loop.t[again] - loop.level, 0.0).sum())
    if not beyond_noise(cost, m, loop.noise, total):
        return None
    shapes = loop.column("num_nodes")[again]
    distinct = len(np.unique(shapes[~np.isnan(shapes)]))
    proof = [evidence("compile_recompiles", float(loop.zeros("compile_recompiles")[again].sum()), "count",
                      f"@track_compile (torch._dynamo's records), in {m} call(s)"),
             evidence("compile_s", cost, "s", "@track_compile: compiling in those calls, the backward's included")]
    words = f"{m} call(s) of {loop.label} recompiled, {ms(cost)} compiling"
    if distinct:
        words += f", at {distinct} distinct batch size(s) (num_nodes)"
    return finding("recompilation", loop.label, cost, total, words, proof,
                   "give the batches a few fixed shapes (pad to buckets), or compile with dynamic=True (or "
                   "torch._dynamo.mark_dynamic on the node dimension) so one graph serves every shape")


def warm_up(loop: Loop, total: float, one_thread: bool = False) -> dict[str, Any] | None:
    """The first calls' excess over the steady level, and a slow first epoch's: calls slow for
    reasons of their own (compiling, caches and the allocator filling), not crowded ones, and never
    most of the loop (at most its first :data:`~gnnmon.report.loops.WARMUP` calls, fewer than half
    of them; a first epoch of fewer than half of them); less their collections' pauses, which the
    garbage collection finding counts. A call of an unusual shape is held against the time its
    shape predicts, where that is above the level (:func:`_by_shape`): a first batch of the largest
    graphs takes their time, not warm-up's; one larger than any later call's is said to be
    undecided between the two."""
    crowd = busy.crowded_calls(loop, one_thread)
    n = loop.t.size
    first = (loop.index < min(WARMUP, (n - 1) // 2)) & ~crowd
    epochs = loop.column("epoch")
    known = ~np.isnan(epochs) & loop.steady & ~crowd
    values = np.unique(epochs[known])
    in_first = known & (epochs == values[0]) if values.size >= 2 else np.zeros(n, dtype=bool)
    shaped = _by_shape(loop, loop.steady & ~crowd & ~in_first, first | in_first)
    paused = loop.zeros("gc_pause_s")  # the collector's, said by the GC finding: never counted twice
    baseline = np.full(n, loop.level)
    expected = np.fmax(baseline, shaped.predicted)
    excess = np.maximum(loop.t - expected, 0.0)
    collected = float(np.minimum(paused[first], excess[first]).sum())
    cost = float(np.maximum(excess[first] - paused[first], 0.0).sum())
    m = int(first.sum())
    counted = first.copy()
    words = f"the first {m} call(s) of {loop.label} took {ms(float(loop.t[first].sum()))} against " \
            f"{ms(loop.level)} per call after them" if m else ""
    if values.size >= 2:
        later = median(loop.t[known & (epochs != values[0])])
        level = median(loop.t[in_first])
        if 2 * int(in_first.sum()) < n and level > max(1.2 * later, later + NOISE_K * loop.noise):
            baseline[in_first] = later
            expected[in_first] = np.fmax(later, shaped.predicted[in_first])
            over = np.maximum(loop.t[in_first] - expected[in_first], 0.0)
            collected += float(np.minimum(paused[in_first], over).sum())
            cost += float(np.maximum(over - paused[in_first], 0.0).sum())
            m += int(in_first.sum())
            counted |= in_first
            words += (("; " if words else "")
                      + f"its first epoch's calls took {ms(level)} (median) against {ms(later)} later")
    if not m or not beyond_noise(cost, m, loop.noise, total, WARMUP_SHARE):
        return None
    by_size = counted & (shaped.predicted > baseline)  # NaN: False
    proof = [evidence("wall_s/device_s", cost, "s", f"the excess of those {m} call(s) over the steady level"
                      + (" or, where above it, the time their shapes predict" if by_size.any() else ""))]
    words += _shape_words(shaped, by_size, counted & shaped.beyond, proof)
    if collected > 0:
        words += f"; {ms(collected)} of that excess was garbage collection, counted there, not here"
    if busy.load(loop) is None and busy.work(loop, one_thread) is None:
        words += ("; the load beside the run was not sampled and torch's threads' CPU time cannot show a wait, so a "
                  "busy machine would read the same (collect(sample=0.5), or torch on one thread, tells them apart)")
    next_step = ("nothing to fix in the loop: first calls fill caches (allocator, kernels, compiled graphs, a "
                 "dataset's first pass); time after them (the report's statistics leave the first 2 out)")
    if (counted & shaped.beyond).any():
        next_step = ("shuffle the batches (or run another epoch) so later calls carry the largest shapes too: their "
                     "time then tells the shapes' cost from warm-up; warm-up itself is " + next_step)
    return finding("warm-up", loop.label, cost, total, words, proof, next_step)


class _Shaped(NamedTuple):
    """What each call's batch shape says of its time (:func:`_by_shape`)."""

    size: np.ndarray
    """Nodes + edges (whichever the rows record; NaN where missing)."""
    predicted: np.ndarray
    """Seconds its shape predicts where that shape is unusual and the fit reaches it; NaN elsewhere."""
    beyond: np.ndarray
    """Unusual and over :data:`~gnnmon.report.analysis.SHAPE_TOL` larger than every call fitted."""
    unusual: dict[int, str]
    """The calls asked about whose shape is unusual (by position): their index and fields in words."""
    fit: tuple[float, float, int] | None
    """Seconds at no size, seconds per node or edge, and the calls fitted; None where unfitted."""


def _by_shape(loop: Loop, later: np.ndarray, asked: np.ndarray) -> _Shaped:
    """For the calls ``asked`` about: whose batch shape is unusual (nodes, edges or seed nodes
    over :data:`~gnnmon.report.analysis.SHAPE_TOL` from the steady calls' median, as a spike's
    ``shape`` cause is judged: :func:`~gnnmon.report.analysis.unusual_shape`), and for those larger
    than the usual call the seconds their nodes + edges predict: a least-squares line of the
    ``later`` calls' time (steady, not crowded, not of a first epoch warm-up may hold) on their nodes
    + edges, read only up to that tolerance beyond the largest call fitted (a step's time need not
    grow in proportion to a batch far larger than any it was fitted on). A smaller batch keeps the
    level, which its own time is not above."""
    n = loop.t.size
    fields = [f for f in ("num_nodes", "num_edges") if loop.has(f)]
    size = np.sum([loop.column(f) for f in fields], axis=0) if fields else np.full(n, np.nan)
    predicted, beyond = np.full(n, np.nan), np.zeros(n, dtype=bool)
    shapes = usual_shapes(loop.column, loop.steady)
    columns = {f: loop.column(f) for f in shapes}
    unusual = {i: f"call {loop.index[i]:.0f} ({said})" for i in np.flatnonzero(asked).tolist()
               if (said := unusual_shape({f: float(v[i]) for f, v in columns.items()}, shapes))}
    fitted = later & ~np.isnan(size)
    if not unusual or not fitted.any():
        return _Shaped(size, predicted, beyond, unusual, None)
    odd = np.isin(np.arange(n), list(unusual)) & ~np.isnan(size)
    beyond = odd & (size > (1 + SHAPE_TOL) * float(np.max(size[fitted])))
    if int(fitted.sum()) < 3 or not varies(size[fitted]):
        return _Shaped(size, predicted, beyond, unusual, None)
    at_none, per = lstsq(np.column_stack([np.ones(int(fitted.sum())), size[fitted]]), loop.t[fitted])
    reached = odd & ~beyond & (size > median(size[fitted]))
    predicted[reached] = at_none + per * size[reached]
    return _Shaped(size, predicted, beyond, unusual, (float(at_none), float(per), int(fitted.sum())))


def _shape_words(shaped: _Shaped, by_size: np.ndarray, beyond: np.ndarray,
                 proof: list[dict[str, Any]]) -> str:
    """What the counted calls' shapes say: those held against their shapes' time (``by_size``),
    whether they were the run's largest graphs, what their shapes predict (its fit added to
    ``proof``); those larger than any call fitted (``beyond``), which the run cannot tell from
    warm-up."""
    words = ""
    if by_size.any() and shaped.fit is not None:  # predicted: fitted
        at_none, per, calls = shaped.fit
        largest = bool(np.nanmin(shaped.size[by_size]) >= np.nanmax(shaped.size[~by_size], initial=-np.inf))
        one = int(by_size.sum()) == 1
        were = (("was the run's largest graph" if one else "were the run's largest graphs") if largest
                else "was a larger graph than usual" if one else "were larger graphs than usual")
        predicted = float(shaped.predicted[by_size].sum())
        words += (f"; {_calls(shaped, by_size)} {were}, whose shapes predict {ms(predicted)} at the later "
                  "calls' time per node and edge: only the excess over that is warm-up")
        proof.append(evidence("num_nodes+num_edges", per, "s", f"the later calls' time per node or edge: a least-"
                              f"squares line over {calls} call(s), {ms(at_none)} at none"))
    if beyond.any():
        were, its = ("was", "its") if int(beyond.sum()) == 1 else ("were", "their")
        words += (f"; {_calls(shaped, beyond)} {were} larger than any later call, so the run cannot tell the time "
                  f"of {its} size from warm-up")
    return words


def _calls(shaped: _Shaped, which: np.ndarray) -> str:
    """The calls ``which`` and their unusual shapes, in words."""
    return " and ".join(shaped.unusual[i] for i in np.flatnonzero(which).tolist())


def slow_steps(loop: Loop, spikes: list[dict[str, Any]], total: float,
               nested: machine_findings.Nested | None = None) -> dict[str, Any] | None:
    """The spikes of this label nothing recorded explains, and the phase or nested row (``nested``:
    :func:`~gnnmon.report.diagnosis.machine_findings.nested_rows`) that holds their excess over
    the other steady calls (:func:`~gnnmon.report.diagnosis.machine_findings.part_holding`). Their
    own ``computed`` says whether each computed or waited (its CPU time against :data:`WAITING_BELOW`
    of its time; None where not recorded): where every one computed, the next step is to find the
    work they did more, not the scheduler's counters or the load, which count time off the CPU."""
    mine = [s for s in spikes if s["label"] == loop.label and s["cause"] == "unexplained"]
    cost = float(sum(s["excess_s"] for s in mine))
    if not mine or not beyond_noise(cost, len(mine), loop.noise, total):
        return None
    waiting = sum(s["computed"] is False for s in mine)
    computing = sum(s["computed"] is True for s in mine)
    words = f"{len(mine)} call(s) of {loop.label} were slow with no recorded cause, {ms(cost)} over its level"
    if waiting:
        words += f"; in {waiting} of them the process waited rather than computed"
    elif computing == len(mine):
        words += (f"; each computed rather than waited (its process's CPU time {100 * WAITING_BELOW:.0f} % of its time "
                  "or more)")
    proof = [evidence("excess_s", cost, "s", "report.spikes(): cause unexplained")]
    slow = np.isin(loop.column("index"), [s["index"] for s in mine if s.get("index") is not None])
    held = machine_findings.part_holding(loop, slow, loop.steady & ~slow, nested)
    words += machine_findings.held_said(loop, held, int(slow.sum()), proof)
    sampled = loop.has("others_cpu_pct")
    if computing == len(mine):
        where = "" if held is None else f" in phase {held[1]}" if held[0] == "phase" else f" in {held[1]}"
        next_step = (f"find the work the slow calls did more{where}: torch.profiler over a slow call (its CPU trace), "
                     "the batch it got, a branch its data takes")
        if not sampled:
            next_step += "; " + SAMPLE_NEXT
    else:
        next_step = SCHED_NEXT if sampled else SAMPLE_NEXT
    return finding("slow steps", loop.label, cost, total, words, proof, next_step)


SCHED_NEXT = "collect(sched=True) records the thread's scheduler counters (preempted or waiting)"
SAMPLE_NEXT = "collect(sample=0.5) records the machine's load beside the run (a busy machine is then named)"
