"""The diagnosis's findings about time: what took the loop's time that the step's own work did not
(the wait for data is :mod:`gnnmon.report.diagnosis.input_finding`'s, garbage collection
:mod:`gnnmon.report.diagnosis.gc_finding`'s).

Each reads a label's :class:`~gnnmon.report.loops.Loop` (its top-level calls) and returns a finding
(:func:`~gnnmon.report.loops.finding`) or None; a cost is said only beyond the run's own noise
(:func:`~gnnmon.report.loops.beyond_noise`):

* ``recompilation`` — compiling in calls that recompiled (``compile_recompiles``, ``compile_s`` of
  ``@track_compile``); a label's first compilation is its warm-up;
* ``warm-up`` — the first calls' excess over the steady level, and a first epoch clearly slower than
  the later ones; said from :data:`WARMUP_SHARE` of the run's time (a first call is expected to
  be slow);
* ``busy machine`` — calls on crowded cores (:mod:`gnnmon.report.busy`) against the other calls;
  where the load was not sampled, calls slowed while their own work (CPU time, torch on one
  thread) was not, and whose thread's run-queue time says they waited for a core: a loaded first
  epoch is the machine's, and warm-up is calls slow in their own work;
* ``off-CPU wait`` — the same calls where nothing recorded says the machine made them wait: I/O, a
  lock or a sleep in the step (the run queue recorded and under half the wait), or unknown; each
  call is one finding's or the other's, by its own run queue;
* ``slow steps`` — the spikes nothing recorded explains (``report.spikes()``'s ``unexplained``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnmon.report import busy
from gnnmon.report.loops import NOISE_K, WARMUP, Loop, beyond_noise, evidence, finding, ms
from gnnmon.report.stats import median, spread

WARMUP_SHARE = 0.10
"""The least share of the run's time warm-up must take to be said."""

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


def busy_machine(loop: Loop, total: float, one_thread: bool = False) -> dict[str, Any] | None:
    """Calls slowed while other processes crowded the run's cores (:mod:`gnnmon.report.busy`), the
    first calls among them (their excess is the machine's, not warm-up's); where the load was not
    sampled, calls slowed while computing no more (:func:`~gnnmon.report.busy.idle_calls`) whose
    thread's run-queue time says they waited for a core (the others are :func:`off_cpu_wait`'s)."""
    load = busy.load(loop)
    if load is None:
        return _waited(loop, total, one_thread, busy.CAUSE)
    others, idle, usual = load
    crowd = busy.crowded_calls(loop, one_thread)
    quiet = loop.steady & ~crowd
    m = int(crowd.sum())
    if not m or quiet.sum() < 5:
        return None
    level, noise = median(loop.t[quiet]), spread(loop.t[quiet])
    cost = float(np.maximum(loop.t[crowd] - level, 0.0).sum())
    slowed = median(loop.t[crowd])
    if slowed <= level + NOISE_K * noise or not beyond_noise(cost, m, noise, total):
        return None
    took = float(np.mean(busy.others_s(others, loop.t)[crowd]))
    proof = [evidence("others_cpu_pct", float(np.mean(others[crowd])), "%", f"sampled (psutil, the cores this "
                      f"process may run on), mean over {m} call(s)"),
             evidence("others' CPU per call", took, "s", f"others_cpu_pct x the call's time, mean over those calls; "
                      f"usually {ms(usual)}"),
             evidence("idle_cpu_pct", float(np.mean(idle[crowd])), "%", "sampled, those calls")]
    words = (f"{m} call(s) of {loop.label} ran on full cores while other processes took {ms(took)} of CPU "
             f"on them per call (usually {ms(usual)}): {ms(slowed)} (median) against {ms(level)} otherwise")
    return finding("busy machine", loop.label, cost, total, words, proof, BUSY_NEXT)


BUSY_NEXT = ("not the job's cost: run where these cores are free (pin the job to cores nothing else uses: taskset -c, "
             "os.sched_setaffinity), and compare timings from a quiet run")


def off_cpu_wait(loop: Loop, total: float, one_thread: bool = False) -> dict[str, Any] | None:
    """Calls that waited rather than computed, the load not sampled, where nothing recorded pins the
    wait on the machine (:func:`~gnnmon.report.busy.cause`): I/O, a lock or a sleep in the step, or
    unknown."""
    return _waited(loop, total, one_thread, busy.WAITED) if busy.load(loop) is None else None


def _waited(loop: Loop, total: float, one_thread: bool, kind: str) -> dict[str, Any] | None:
    """The calls of ``kind`` among those that waited rather than computed, the load not sampled:
    the time they waited beyond what their own work took (:func:`~gnnmon.report.busy.idle_calls`,
    :func:`~gnnmon.report.busy.off_cpu`), each call's cause its own (:func:`~gnnmon.report.busy.cause`):
    a busy machine where its thread's extra run-queue time holds half its wait or more; else an
    ``off-CPU wait``: I/O, a lock or a sleep in the step (its thread's run queue recorded and
    under half, torch on one thread), or either, unknown."""
    idle = busy.crowded_calls(loop, one_thread)  # not sampled: the calls that waited (busy.idle_calls) less the
    # compile's and the collector's
    waited = busy.off_cpu(loop, one_thread)
    quiet = loop.steady & ~idle
    if waited is None or not idle.any() or quiet.sum() < 5:
        return None
    more = busy.queued_more(loop)
    causes = np.array([busy.cause(float(w), None if more is None else float(q))
                       for w, q in zip(waited, more if more is not None else waited, strict=True)])
    mine = idle & (causes == kind)
    m = int(mine.sum())
    if not m:
        return None
    level, noise = median(np.sort(loop.t[quiet])), spread(loop.t[quiet])
    cost = float(waited[mine].sum())
    if not beyond_noise(cost, m, noise, total):
        return None
    done = busy.work(loop, one_thread)
    name = "thread_cpu_s" if done is not None and loop.has("thread_cpu_s") else "cpu_s"
    cpu_all = done if done is not None else loop.column("cpu_s")
    cpu, cpu_level = median(np.sort(cpu_all[mine])), median(np.sort(cpu_all[quiet]))
    slowed = median(np.sort(loop.t[mine]))
    proof = [evidence(name, cpu, "s", f"the {'thread' if name == 'thread_cpu_s' else 'process'}'s CPU time, median "
                      f"of those {m} call(s); {ms(cpu_level)} in the others"),
             evidence("wall_s/device_s", slowed, "s", f"median of those {m} call(s)")]
    head = (f"{m} call(s) of {loop.label} took {ms(slowed)} (median) against {ms(level)} otherwise, and their CPU "
            f"time ({ms(cpu)} a call against {ms(cpu_level)}) accounts for at most half of each one's excess: "
            f"{ms(cost)} off the CPU")
    queued = None if more is None else float(more[mine].sum())
    if queued is not None:
        proof.append(evidence("thread_queued_s", queued, "s", f"the thread's run-queue time beyond the usual call's, "
                              f"summed over those {m} call(s) (the scheduler's count: collect(sched=True))"))
    if kind == busy.CAUSE:
        words = (f"{head}, {ms(queued or 0.0)} of it waiting for a core while the thread could run (other processes' "
                 "load), not warm-up")
        return finding("busy machine", loop.label, cost, total, words, proof, BUSY_NEXT)
    if queued is not None and one_thread:
        words = (f"{head}, of which waiting for a core holds only {ms(queued)}: the thread gave the CPU up, on I/O, a "
                 "lock (the GIL: another thread of the process) or a sleep in the step, not warm-up")
        return finding(busy.WAITED, loop.label, cost, total, words, proof, OWN_WAIT_NEXT)
    why = ("its thread's run-queue time holds only " + ms(queued) + " of it, torch's other threads' is not recorded"
           if queued is not None else "neither the machine's load nor the thread's run queue was recorded")
    words = (f"{head}: waiting for a core (other processes' load) or on I/O, a lock or a sleep in the step, not "
             f"warm-up; which, the rows cannot say ({why})")
    return finding(busy.WAITED, loop.label, cost, total, words, proof, UNKNOWN_WAIT_NEXT)


OWN_WAIT_NEXT = ("the step's own wait, the job's cost: find the call it blocks in (py-spy dump --pid PID while it "
                 "waits, or torch.profiler's CPU trace); a wait for the next batch is watch_loader's data_wait_s")
UNKNOWN_WAIT_NEXT = ("collect(sample=0.5) samples the load beside the run and collect(sched=True) the thread's "
                     "run-queue time: either tells a busy machine (free cores, a quiet run to compare) from the "
                     "step's own wait (find the call it blocks in: py-spy dump --pid PID while it waits)")


def slow_steps(loop: Loop, spikes: list[dict[str, Any]], total: float) -> dict[str, Any] | None:
    """The spikes of this label nothing recorded explains."""
    mine = [s for s in spikes if s["label"] == loop.label and s["cause"] == "unexplained"]
    cost = float(sum(s["excess_s"] for s in mine))
    if not mine or not beyond_noise(cost, len(mine), loop.noise, total):
        return None
    waiting = sum("waiting" in s["detail"] for s in mine)
    words = f"{len(mine)} call(s) of {loop.label} were slow with no recorded cause, {ms(cost)} over its level"
    if waiting:
        words += f"; in {waiting} of them the process waited rather than computed"
    sampled = loop.has("others_cpu_pct")
    return finding("slow steps", loop.label, cost, total, words,
                   [evidence("excess_s", cost, "s", "report.spikes(): cause unexplained")],
                   "collect(sched=True) records the thread's scheduler counters (preempted or waiting)" if sampled
                   else "collect(sample=0.5) records the machine's load beside the run (a busy machine is then named)")
