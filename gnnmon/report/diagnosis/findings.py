"""The answer first: what a run's time and memory went to, as a few findings ranked by the share of
the measured time (or of the memory) at stake — each with its evidence (the figure and where it was
measured) and the next thing to try. ``report.diagnosis()`` returns them as plain data; the
markdown report, ``gnnmon report`` and the notebook display open with them, and a run with
nothing to say says so in one line.

The measured time is the run's loops' (each label's top-level calls, and the waits for their
batches) and the garbage collections between calls; what ran between the calls, unmeasured, is
said beside the findings where it is 5 % of their span or more (:func:`unmeasured`). Findings about time are in
:mod:`gnnmon.report.diagnosis.time_findings` (the wait for data in
:mod:`gnnmon.report.diagnosis.input_finding`, garbage collection in
:mod:`gnnmon.report.diagnosis.gc_finding`), about memory in
:mod:`gnnmon.report.diagnosis.memory_findings` and :mod:`gnnmon.report.diagnosis.creep` (a leak, or
bigger graphs); for a distributed job the cross-rank report adds its stragglers and the steps a busy
machine held up (shares of the job's matched steps' time). Nothing is claimed within the noise the
run itself shows (:func:`gnnmon.report.loops.beyond_noise`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from gnnmon.data.result import RunResult
from gnnmon.data.table import Table
from gnnmon.report.diagnosis import creep, gc_finding, input_finding, machine_findings, memory_findings, time_findings
from gnnmon.report.diagnosis.gc_waits import gc_in_waits
from gnnmon.report.loops import MIN_SHARE, WARMUP, evidence, finding, loops, ms
from gnnmon.report.memory.model import host_resolution
from gnnmon.report.stats import median

STRAGGLER_NEXT = {
    "gc": "gnnmon.freeze_gc() after set-up and @gc_controlled on every rank's step: a pause on one rank holds up all",
    "larger batch": "batches of equal size on every rank (a DistributedSampler over shapes, DynamicBatchSampler)",
    "data loading": "more DataLoader workers on that rank (or persistent_workers=True)",
    "preempted": "free cores for every rank (one rank shared its cores with another process)",
}
"""What to try for a straggler, by its cause; anything else: look at that rank's machine and device."""


class Timed(Protocol):
    """What the run's measured time is read from (:class:`gnnmon.report.Report` has it)."""

    table: Table
    manifest: dict[str, Any]
    gc_events: list[dict[str, Any]]


class Diagnosed(Timed, Protocol):
    """What the diagnosis reads (:class:`gnnmon.report.Report` has all of it)."""

    result: RunResult  # the run's plain data: whether its steps ran on one thread

    def spikes(self, **options: Any) -> list[dict[str, Any]]: ...

    def cross_rank(self) -> dict[str, Any]: ...

    def oom(self) -> list[dict[str, Any]]: ...

    def memory_model(self, label: str | None = None, figure: str = ...) -> Any: ...


def loop_gc_events(report: Timed) -> list[dict[str, Any]]:
    """The GC events that can have paused the loop. A ``gnnmon run`` file's run covers the whole
    script, its imports and set-up included (an optimizer's first ``__init__`` imports
    ``torch._dynamo``: hundreds of collections): there, a collection between calls counts only
    inside the span of its rows (the first row's start to the last one's end). A ``collect`` run
    is the span its user chose: all of them count."""
    events = list(report.gc_events)
    if "gnnmon_run" not in ((report.manifest or {}).get("config") or {}):
        return events
    starts = [p.numbers("t_start_ns") for p in report.table.parts.values() if p.n]
    ends = [p.numbers("t_end_ns") for p in report.table.parts.values() if p.n]
    if not starts:
        return events
    first, last = min(float(np.nanmin(s)) for s in starts), max(float(np.nanmax(e)) for e in ends)
    return [e for e in events if e.get("row") or first <= float(e.get("t_start_ns") or 0) <= last]


def diagnose(report: Diagnosed) -> list[dict[str, Any]]:
    """The findings of a run, the largest share first (see the module doc); [] when nothing
    stands out."""
    found: list[dict[str, Any] | None] = []
    runs = loops(report.table)
    gc_events = loop_gc_events(report)
    total = _measured(runs, gc_events)
    if runs:
        spikes = report.spikes()
        host = ((report.manifest or {}).get("devices") or {})
        cores = host.get("cpu_usable") or host.get("cpu_count")
        resolution = _resolution(report.manifest)
        one_thread = report.result.one_thread  # the process's CPU time is then the step's work
        for loop in runs:
            nested = machine_findings.nested_rows(report.table, loop)  # the rows inside its calls
            found += [input_finding.input_bound(loop, total, cores, gc_events),
                      time_findings.recompilation(loop, total),
                      time_findings.warm_up(loop, total, one_thread),
                      machine_findings.busy_machine(loop, total, one_thread, nested),
                      machine_findings.off_cpu_wait(loop, total, one_thread, nested),
                      time_findings.slow_steps(loop, spikes, total, nested)]
            found += machine_findings.steady_wait(loop, total, one_thread, cores, nested)
            found += creep.creep(loop, resolution, memory_findings.host_retained(report.manifest))
        frozen = gc_finding.set_up_frozen(report.manifest or {})
        found.append(gc_finding.garbage_collection(runs, gc_events, total, frozen))
    found += across_ranks(report.cross_rank())
    found.append(memory_findings.out_of_memory(report.oom()))
    found += memory_findings.device_memory(report.table, report.manifest, report.memory_model)
    return sorted((f for f in found if f is not None), key=lambda f: -f["share"])


def _measured(runs: list[Any], gc_events: list[dict[str, Any]]) -> float:
    """The run's measured time (s): its loops' calls and waits for batches, and the collections
    between calls (the shares of time are of this), those inside a wait for a batch counted once
    (:func:`~gnnmon.report.diagnosis.gc_waits.gc_in_waits`: the wait holds them)."""
    in_waits = sum(float(gc_in_waits(loop, gc_events).sum()) for loop in runs)
    return sum(loop.total for loop in runs) + max(_gc_between(gc_events) - in_waits, 0.0)


def _gc_between(gc_events: list[dict[str, Any]]) -> float:
    """Seconds of the collections that ran between calls (those inside one are its time)."""
    return sum(float(e.get("duration_s") or 0.0) for e in gc_events if not e.get("row"))


def unjudged(report: Timed) -> list[dict[str, Any]]:
    """What the diagnosis could not look for: each label with too few calls to judge its time
    (:func:`few_calls`) that holds :data:`MIN_SHARE` of the measured time or more, so that no large
    share goes unsaid; each label whose calls record memory but mark no epochs, so no leak was
    judged (:func:`gnnmon.report.diagnosis.creep.unmarked`)."""
    runs = loops(report.table)
    return few_calls(runs, _measured(runs, loop_gc_events(report))) + [
        u for loop in runs if (u := creep.unmarked(loop)) is not None]


def few_calls(runs: list[Any], total: float) -> list[dict[str, Any]]:
    """The labels whose steady calls (after the first :data:`~gnnmon.report.loops.WARMUP`) are fewer
    than :data:`~gnnmon.report.diagnosis.machine_findings.MIN_CALLS`, which a busy machine, an
    off-CPU wait (in every call or beyond the level) and slow calls are read from, and whose time
    (their calls and waits for data) is :data:`MIN_SHARE` of the measured ``total`` (s) or more:
    ``{"check": "calls", "label", "calls", "steady", "time_s", "call_s" (the median call), "share"}``."""
    out = []
    for loop in runs:
        steady = int(np.count_nonzero(loop.index >= WARMUP))
        if steady < machine_findings.MIN_CALLS and total > 0 and loop.total >= MIN_SHARE * total:
            out.append({"check": "calls", "label": loop.label, "calls": int(loop.t.size), "steady": steady,
                        "time_s": loop.total, "call_s": median(np.sort(loop.t)), "share": loop.total / total})
    return out


def unmeasured(report: Timed) -> dict[str, float] | None:
    """The time between the measured calls, where it is :data:`MIN_SHARE` of their span or more:
    ``covered_s`` (the top-level calls' windows, each from its wait for data, as their union: calls
    of threads may overlap; and the collections between them), ``span_s`` (from the first call's
    wait to the last call's end) and ``between_s`` (the rest: the loop's own code, evaluation,
    logging, a wait outside the measured step). Windows, not the calls' times: an accelerator's
    step time is its device's, inside its host window. None where the calls leave less between
    them, or their windows are not recorded."""
    runs = loops(report.table)
    spans: list[tuple[float, float]] = []
    for loop in runs:
        if not (loop.has("t_start_ns") and loop.has("t_end_ns")):
            return None
        starts, ends = loop.column("t_start_ns") - loop.before * 1e9, loop.column("t_end_ns")
        keep = ~(np.isnan(starts) | np.isnan(ends))
        spans += zip(starts[keep].tolist(), ends[keep].tolist(), strict=True)
    if not spans:
        return None
    spans.sort()
    covered, reach = 0.0, -math.inf
    for start, end in spans:  # their union
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    span = (reach - spans[0][0]) / 1e9
    covered = min(covered / 1e9 + _gc_between(loop_gc_events(report)), span)
    between = span - covered
    if not span > 0 or between < MIN_SHARE * span:
        return None
    return {"covered_s": covered, "span_s": span, "between_s": between}


def _resolution(manifest: Mapping[str, Any] | None) -> float:
    """What the host's RSS cannot resolve on the machine that recorded the run (bytes)."""
    host = (manifest or {}).get("devices") or {}
    return host_resolution(host.get("cpu_count"), host.get("cpu_usable"))


def looked_for(report: Diagnosed) -> list[dict[str, Any]]:
    """What the diagnosis looked for and did not find, with what could hide in the run's noise:
    a wait for data in each loop that timed it (:func:`gnnmon.report.diagnosis.input_finding.looked_for`),
    a leak in each end-of-call figure over enough epochs (:func:`gnnmon.report.diagnosis.creep.looked_for`)."""
    resolution = _resolution(report.manifest)
    runs = loops(report.table)
    gc_events = loop_gc_events(report)
    total = _measured(runs, gc_events)
    return ([c for loop in runs for c in input_finding.looked_for(loop, total, gc_events)]
            + [c for loop in runs for c in creep.looked_for(loop, resolution)])


def across_ranks(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A distributed job's stragglers (the cross-rank report's verdict) and the steps a busy
    machine held up, as shares of its matched steps' time."""
    if not job or not job.get("steps"):
        return []
    total = sum(float(s["time_s"]) for s in job["steps"])
    out = []
    for s in job.get("stragglers") or ():
        cause = str(s["cause"]).split(" (")[0]
        words = (f"rank {s['rank']} held the job up in {s['steps']} of {s['of']} steps, {ms(s['delay_s'])} in all, "
                 f"mostly {cause}")
        proof = [evidence("delay_s", float(s["delay_s"]), "s", "the cross-rank report (rows matched by label and "
                          "index across ranks, on rank 0's clock)")]
        f = finding("straggler", s.get("label"), float(s["delay_s"]), total, words, proof,
                    STRAGGLER_NEXT.get(cause, f"look at rank {s['rank']}'s machine and device: it is slower at "
                                              f"every step"), rank=s["rank"])
        if f["share"] >= MIN_SHARE:
            out.append(f)
    held = job.get("preempted") or []
    delay = sum(float(s["delay_s"]) for s in held)
    if held and delay >= MIN_SHARE * total:
        ranks = sorted({s["slowest_rank"] for s in held})
        out.append(finding("busy machine", None, delay, total,
                           f"{len(held)} step(s) were held up by a rank the OS took off the CPU (rank(s) "
                           f"{', '.join(map(str, ranks))}), {ms(delay)} in all",
                           [evidence("thread_preempted", float(len(held)), "steps", "the rows' scheduler counters "
                                     "(collect(sched=)), the cross-rank report")],
                           STRAGGLER_NEXT["preempted"]))
    return out
