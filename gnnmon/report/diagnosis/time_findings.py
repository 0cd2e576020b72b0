"""The diagnosis's findings about time: what took the loop's time that the step's own work did not
(the wait for data is :mod:`gnnmon.report.diagnosis.input_finding`'s, garbage collection
:mod:`gnnmon.report.diagnosis.gc_finding`'s).

Each reads a label's :class:`~gnnmon.report.loops.Loop` (its top-level calls) and returns a finding
(:func:`~gnnmon.report.loops.finding`) or None; a cost is said only beyond the run's own noise
(:func:`~gnnmon.report.loops.beyond_noise`):

* ``recompilation`` — compiling in calls that recompiled (``compile_recompiles``, ``compile_s`` of
  ``@track_compile``); a label's first compilation is its warm-up;
* ``warm-up`` — the first calls' excess over the steady level, and a first epoch clearly slower than
  the later ones; said from :data:`WARMUP_SHARE` of the measured time (a first call is expected to
  be slow);
* ``busy machine`` and ``off-CPU wait`` — calls slowed by other processes or waiting off the CPU:
  :mod:`gnnmon.report.diagnosis.machine_findings`; never counted in warm-up here;
* ``slow steps`` — the spikes nothing recorded explains (``report.spikes()``'s ``unexplained``),
  with the phase or nested row their excess grew in; spikes that computed are sent to find their
  work, not to the scheduler's counters.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnmon.report import busy
from gnnmon.report.analysis import WAITING_BELOW
from gnnmon.report.diagnosis import machine_findings
from gnnmon.report.loops import NOISE_K, WARMUP, Loop, beyond_noise, evidence, finding, ms
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
    garbage collection finding counts."""
    crowd = busy.crowded_calls(loop, one_thread)
    n = loop.t.size
    first = (loop.index < min(WARMUP, (n - 1) // 2)) & ~crowd
    paused = loop.zeros("gc_pause_s")  # the collector's, said by the GC finding: never counted twice
    excess = np.maximum(loop.t - loop.level, 0.0)
    collected = float(np.minimum(paused[first], excess[first]).sum())
    cost = float(np.maximum(excess[first] - paused[first], 0.0).sum())
    m = int(first.sum())
    words = f"the first {m} call(s) of {loop.label} took {ms(float(loop.t[first].sum()))} against " \
            f"{ms(loop.level)} per call after them" if m else ""
    epochs = loop.column("epoch")
    known = ~np.isnan(epochs) & loop.steady & ~crowd
    values = np.unique(epochs[known])
    if values.size >= 2:
        in_first = known & (epochs == values[0])
        later = median(loop.t[known & (epochs != values[0])])
        level = median(loop.t[in_first])
        if 2 * int(in_first.sum()) < n and level > max(1.2 * later, later + NOISE_K * loop.noise):
            over = np.maximum(loop.t[in_first] - later, 0.0)
            collected += float(np.minimum(paused[in_first], over).sum())
            cost += float(np.maximum(over - paused[in_first], 0.0).sum())
            m += int(in_first.sum())
            words += (("; " if words else "")
                      + f"its first epoch's calls took {ms(level)} (median) against {ms(later)} later")
    if not m or not beyond_noise(cost, m, loop.noise, total, WARMUP_SHARE):
        return None
    if collected > 0:
        words += f"; {ms(collected)} of that excess was garbage collection, counted there, not here"
    if busy.load(loop) is None and busy.work(loop, one_thread) is None:
        words += ("; the load beside the run was not sampled and torch's threads' CPU time cannot show a wait, so a "
                  "busy machine would read the same (collect(sample=0.5), or torch on one thread, tells them apart)")
    return finding("warm-up", loop.label, cost, total, words,
                   [evidence("wall_s/device_s", cost, "s", f"the excess of those {m} call(s) over the steady level")],
                   "nothing to fix in the loop: first calls fill caches (allocator, kernels, compiled graphs, a "
                   "dataset's first pass); time after them (the report's statistics leave the first 2 out)")


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
