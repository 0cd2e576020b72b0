"""The diagnosis's findings about calls that did not compute while they were slow: a busy machine
(other processes crowded the run's cores, or the calls' thread waited on the run queue) and an
off-CPU wait (the calls gave the CPU up: I/O, a lock, a sleep, or a cause the rows cannot tell).

Each reads a label's :class:`~gnnmon.report.loops.Loop` and the calls :mod:`gnnmon.report.busy`
names (so that the spikes and warm-up leave the same calls to them), and returns a finding or
None; a cost is said only beyond the run's own noise (:func:`~gnnmon.report.loops.beyond_noise`):

* ``busy machine`` — calls on crowded cores against the other calls (with torch on one thread and
  its run queue recorded, those that queued for half their excess); where the load was not
  sampled, calls slowed while their own work (CPU time, torch on one thread) was not, and whose
  thread's run-queue time says they waited for a core: a loaded first epoch is the machine's;
* ``off-CPU wait`` — the calls that waited where nothing recorded says the machine made them wait:
  I/O, a lock or a sleep in the step (the run queue recorded and under half the wait, or the
  sampled load not accounting for it), or unknown; each call is one finding's or the other's;
* either, ``every_call`` (:func:`steady_wait`) — the level itself spent off the CPU: a host step
  that waits the same in every call has no excess for the two above to read.

Each names the phase or the row timed inside the step (``gnnmon.timed``, a decorated call: their
``parent`` is the call) that holds its time where one does: the one whose time grew by half the
calls' excess (:func:`part_holding`), or, for a wait in every call, the one whose time less the
CPU time it could have held still holds a share of the wait (:func:`wait_holding`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gnnmon.data.table import Table
from gnnmon.figures import nested_phases, phase_field
from gnnmon.report import busy
from gnnmon.report.diagnosis.input_finding import loader_workers
from gnnmon.report.loops import NOISE_K, Loop, beyond_noise, cost_beyond_noise, evidence, finding, ms
from gnnmon.report.stats import median, spread

MIN_CALLS = 5
"""The least steady calls (after a label's first :data:`~gnnmon.report.loops.WARMUP`) the findings
here read: a busy machine and an off-CPU wait are held against 5 quiet ones, a wait in every call
is read over 5, as ``report.spikes()`` judges a label from 5 (its ``min_rows``)."""


def busy_machine(loop: Loop, total: float, one_thread: bool = False,
                 nested: Nested | None = None) -> dict[str, Any] | None:
    """Calls slowed while other processes crowded the run's cores (:mod:`gnnmon.report.busy`: their
    rate rose above its usual), the first calls among them (their excess is the machine's, not
    warm-up's), unless torch ran on one thread whose own work grew to account for their excess
    (they computed) or whose run queue, recorded, says they did not wait for a core; the words say
    the calls' median and longest time and their excess in all (a few long calls among many short
    ones do not hide behind the median); where the load was not
    sampled, calls slowed while computing no more (:func:`~gnnmon.report.busy.idle_calls`) whose
    thread's run-queue time says they waited for a core (the others are :func:`off_cpu_wait`'s).
    ``nested``: the rows inside the calls (:func:`nested_rows`), one of which may hold the excess."""
    load = busy.load(loop)
    if load is None:
        waits = busy.machine_calls(loop, None, one_thread)  # the calls that waited (busy.idle_calls)
        waited = busy.off_cpu(loop, one_thread)
        if waited is None:
            return None
        return _waited(loop, total, one_thread, waits & (busy.causes(waited, busy.queued_more(loop)) == busy.CAUSE),
                       busy.CAUSE, None, nested)
    others, idle, usual = load[0], load[1], load[2]
    crowd = busy.machine_calls(loop, load, one_thread)
    quiet = loop.steady & ~crowd & ~busy.own_waits(loop, load, one_thread)  # the waits are off_cpu_wait's
    m = int(crowd.sum())
    if not m or quiet.sum() < MIN_CALLS:
        return None
    level, noise = median(loop.t[quiet]), spread(loop.t[quiet])
    cost = float(np.maximum(loop.t[crowd] - level, 0.0).sum())
    slowed = median(loop.t[crowd])
    if slowed <= level + NOISE_K * noise or not beyond_noise(cost, m, noise, total):
        return None
    rate = float(np.mean(others[crowd]))
    extra = float(np.mean(busy.others_extra_s(others, loop.t, usual)[crowd]))
    longest = float(np.max(loop.t[crowd]))
    proof = [evidence("others_cpu_pct", rate, "%", f"sampled (psutil, the cores this process may run on), mean "
                      f"over {m} call(s); usually {usual:.0f} % (median over the steady calls)"),
             evidence("others' extra CPU per call", extra, "s", "(others_cpu_pct - usual) x the call's time, mean "
                      "over those calls"),
             evidence("idle_cpu_pct", float(np.mean(idle[crowd])), "%", "sampled, those calls")]
    words = (f"{m} call(s) of {loop.label} ran on full cores while other processes took {rate:.0f} % of a core "
             f"on them (usually {usual:.0f} %), {ms(extra)} of CPU more per call: {ms(slowed)} (median"
             f"{'' if m == 1 else f', longest {ms(longest)}'}) against {ms(level)} otherwise, "
             f"{ms(cost)} over it in all")
    words += _phase_said(loop, crowd, quiet, proof, nested)
    return finding("busy machine", loop.label, cost, total, words, proof, BUSY_NEXT)


BUSY_NEXT = ("not the job's cost: run where these cores are free (pin the job to cores nothing else uses: taskset -c, "
             "os.sched_setaffinity), and compare timings from a quiet run")


def off_cpu_wait(loop: Loop, total: float, one_thread: bool = False,
                 nested: Nested | None = None) -> dict[str, Any] | None:
    """Calls that waited rather than computed where nothing recorded pins the wait on the machine
    (:func:`~gnnmon.report.busy.own_waits`): I/O, a lock or a sleep in the step, or unknown where
    neither the load nor the run queue says; the phase or nested row (``nested``:
    :func:`nested_rows`) that holds it named."""
    load = busy.load(loop)
    return _waited(loop, total, one_thread, busy.own_waits(loop, load, one_thread), busy.WAITED, load, nested)


def steady_wait(loop: Loop, total: float, one_thread: bool = False, cores: int | None = None,
                nested: Nested | None = None) -> list[dict[str, Any]]:
    """The steps' own level spent off the CPU, as findings that say ``every_call`` (a step that
    waits the same in every call has no excess over its level for the findings above to read).

    Each steady host call that did not compile counts the time no thread of its process ran, at
    least: its time less the process's CPU time (``cpu_s``, read over the row's window, which holds
    the call and gnnmon's bookkeeping around it, where a preemption is no wait of the step's), so a
    step that waits on another thread of the process computing is not off the CPU; less its excess
    over the level (the other findings' or a spike's, :func:`_levels`, as if all of it were off the
    CPU); at most the median call's, so that a few calls' long waits are not said to be in every
    call. Torch on one thread with its run queue recorded (``collect(sched=True)``), that time
    is split by the thread's run-queue time (``thread_queued_s``) as a share of the thread's own
    time off the CPU (all of it, where the thread never gave the CPU up: no ``thread_waits``): a
    wait for a core (``busy machine``) and the rest, which the step gave up (``off-CPU wait``:
    I/O, a lock, a sleep), each said on its own. Otherwise one ``off-CPU wait``: the step's own
    where its sampled cores had :data:`~gnnmon.report.busy.IDLE_FULL` idle or more, else of a
    cause the rows cannot tell. Each is a cost measured at each step
    (:func:`~gnnmon.report.loops.cost_beyond_noise`). Rows on an accelerator wait for it (a
    sync): only the host's (``backend`` ``cpu``) are read. ``cores``: the cores the process may
    use (the manifest's), said beside the loader's workers, which may be what holds them. The
    phase or nested row (``nested``: :func:`nested_rows`) that holds at least a share of the wait
    the step gave up is named (:func:`wait_holding`): the wait for a core may lie anywhere."""
    if not loop.has("cpu_s"):
        return []
    cpu = loop.column("cpu_s")
    host = np.array([b == "cpu" for b in loop.part.pick("backend", loop.at.tolist())], dtype=bool)
    calls = loop.steady & host & (loop.zeros("compile_frames") <= 0) & ~np.isnan(cpu)
    m = int(calls.sum())
    if m < MIN_CALLS:
        return []
    span = (loop.column("t_end_ns") - loop.column("t_start_ns")) / 1e9  # the window the thread's times are read in
    span = np.where(np.isnan(span), loop.t, span)
    load = busy.load(loop)
    # the call's time less the CPU time read over its row's window, which holds the call and gnnmon's
    # bookkeeping around it (where a preemption is no wait of the step's: the least the step waited);
    # less its excess over the level it is read from (all of it off the CPU at most: another
    # finding's, or a spike's); then at most the median call's
    excess = np.maximum(loop.t - _levels(loop, load, one_thread), 0.0)
    off = np.clip(loop.t - np.nan_to_num(cpu) - excess, 0.0, None)
    off = np.minimum(off, median(np.sort(off[calls])))
    t = median(np.sort(loop.t[calls]))
    proof = [evidence("cpu_s", median(np.sort(cpu[calls])), "s", f"the process's CPU time, median of {m} steady "
                      "call(s)"),
             evidence("wall_s/device_s", t, "s", f"median of those {m} call(s)"),
             evidence("off the CPU", median(np.sort(off[calls])), "s", "the call's time less its process's CPU time "
                      "and its excess over the level, median of those calls")]
    core = _core_share(loop, span) if one_thread else None
    if core is not None:
        return [f for f in (_core_wait(loop, total, calls, core * off, t, proof, cores),
                            _given_up(loop, total, calls, (1.0 - core) * off, t, proof, nested, core * off))
                if f is not None]
    if not cost_beyond_noise(off[calls], total):
        return []
    cost = float(off[calls].sum())
    waited = median(np.sort(off[calls]))
    head = (f"{loop.label} spent {100 * waited / t:.0f} % of each call off the CPU: {ms(waited)} of {ms(t)} (median "
            f"of {m} steady calls), no thread of the process running, {ms(cost)} in all; a wait in every call, not an "
            "excess over the level")
    head += _wait_said(loop, calls, off, total, proof, nested)
    if load is not None:
        idle = load[1][calls]
        spare = median(np.sort(idle[~np.isnan(idle)])) if (~np.isnan(idle)).any() else math.nan
        if not math.isnan(spare):
            proof = [*proof, evidence("idle_cpu_pct", spare, "%", "sampled (psutil, the cores this process may run "
                                      "on), median of those calls")]
        if spare >= busy.IDLE_FULL:
            return [finding(busy.WAITED, loop.label, cost, total, f"{head}; its cores had {spare:.0f} % of a core "
                            f"idle (sampled), so the machine did not hold it: {GAVE_UP}", proof, OWN_WAIT_NEXT,
                            every_call=True)]
        why = ("the load was not sampled while these calls ran" if math.isnan(spare) else
               "its cores were full while sampled, and the thread's run queue was not recorded")
    elif loop.has("thread_queued_s"):
        why = ("the thread's CPU time was not recorded beside its run queue" if one_thread else
               "torch runs on several threads, whose run queues are not the one recorded")
    else:
        why = "neither the machine's load nor the thread's run queue was recorded"
    # what was recorded cannot tell; torch on one thread already (the manifest's torch_threads): the run queue alone
    next_step = (UNKNOWN_WAIT_NEXT if why.startswith("neither") else SCHED_NEXT if one_thread else ONE_THREAD_NEXT)
    return [finding(busy.WAITED, loop.label, cost, total, f"{head}: waiting for a core (other processes' load) or "
                    f"on I/O, a lock or a sleep in the step; which, the rows cannot say ({why})", proof, next_step,
                    every_call=True)]


def _levels(loop: Loop, load: busy.Load | None, one_thread: bool) -> np.ndarray:
    """Per call, the most of its time a wait in every call counts: the steps' level, and for a call
    whose excess another finding reads (:func:`~gnnmon.report.busy.machine_calls`, the ``load``
    sampled or not: :func:`~gnnmon.report.busy.load`), the lowest level such a finding reads it
    from (the busy machine's quiet calls' median), so that the two never count one second twice."""
    slowed = busy.machine_calls(loop, None, one_thread)
    level = loop.level
    if load is not None:
        crowd = busy.machine_calls(loop, load, one_thread)
        slowed = slowed | crowd
        quiet = loop.steady & ~crowd & ~busy.own_waits(loop, load, one_thread)  # as busy_machine reads its level
        if quiet.any():
            level = min(level, median(np.sort(loop.t[quiet])))
    return np.where(slowed, level, loop.level)


def _core_share(loop: Loop, span: np.ndarray) -> np.ndarray | None:
    """Per call, the share of its time off the CPU that its one thread spent ready to run: its
    run-queue time, read over the row's window (``span``), less the window's excess over the call
    (gnnmon's bookkeeping around it, where a preemption is not the call's), over the thread's own
    time off the CPU in the call (its time less ``thread_cpu_s``); 1 where the thread never gave the
    CPU up (no ``thread_waits``: every moment off was a wait for a core); None where the run queue
    or the thread's CPU time is not recorded."""
    if not loop.has("thread_queued_s") or not loop.has("thread_cpu_s"):
        return None
    thread_off = np.maximum(loop.t - np.nan_to_num(loop.column("thread_cpu_s")), 0.0)
    inside = np.nan_to_num(loop.column("thread_queued_s")) - np.maximum(span - loop.t, 0.0)
    queued = np.clip(inside, 0.0, thread_off)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(thread_off > 0, queued / thread_off, 0.0)
    if loop.has("thread_waits"):
        share = np.where(loop.column("thread_waits") == 0, 1.0, share)
    return share


def _core_wait(loop: Loop, total: float, calls: np.ndarray, core: np.ndarray, t: float,
               proof: list[dict[str, Any]], cores: int | None) -> dict[str, Any] | None:
    """The part of every call's time off the CPU that its thread was ready to run (:func:`steady_wait`)."""
    if not cost_beyond_noise(core[calls], total):
        return None
    m, cost, each = int(calls.sum()), float(core[calls].sum()), median(np.sort(core[calls]))
    queued = float(np.nan_to_num(loop.column("thread_queued_s"))[calls].sum())
    proof = [*proof, evidence("thread_queued_s", queued, "s", f"the thread's run-queue time, summed over those {m} "
                              "call(s) (the scheduler's count: collect(sched=True)); all of a call's time off the "
                              "CPU where the thread never gave it up (thread_waits 0)")]
    workers = loader_workers(loop)  # none (0) or not recorded: not said
    who = "other processes, or this process's other threads"
    next_step = STEADY_BUSY_NEXT
    if workers:
        who += f", or its DataLoader's {workers} worker(s)" + (f" on its {cores} usable core(s)" if cores else "")
        next_step = (f"fewer DataLoader workers than usable cores (num_workers={workers}"
                     + (f" on {cores} core(s)" if cores else "") + ") may free them; else " + STEADY_BUSY_NEXT)
    words = (f"{loop.label} waited for a core in every call: {ms(each)} of {ms(t)} (median of {m} steady calls), its "
             f"thread ready to run while the cores ran other work ({who}), {ms(cost)} in all; not an excess over the "
             "level")
    return finding("busy machine", loop.label, cost, total, words, proof, next_step, every_call=True)


def _given_up(loop: Loop, total: float, calls: np.ndarray, own: np.ndarray, t: float,
              proof: list[dict[str, Any]], nested: Nested | None = None,
              queued: np.ndarray | None = None) -> dict[str, Any] | None:
    """The rest of every call's time off the CPU: its thread gave the CPU up (:func:`steady_wait`);
    the phase or nested row that holds it named, less the call's wait for a core (``queued``, s per
    call), which may have lain there too."""
    if not cost_beyond_noise(own[calls], total):
        return None
    m, cost, each = int(calls.sum()), float(own[calls].sum()), median(np.sort(own[calls]))
    proof = list(proof)
    held = _wait_said(loop, calls, own, total, proof, nested, queued)
    words = (f"{loop.label} gave the CPU up in every call: {ms(each)} of {ms(t)} (median of {m} steady calls), no "
             f"thread of the process running and its thread not waiting for a core, {ms(cost)} in all; not an excess "
             f"over the level{held}: {GAVE_UP}")
    return finding(busy.WAITED, loop.label, cost, total, words, proof, OWN_WAIT_NEXT, every_call=True)


ONE_THREAD_NEXT = ("a run with torch on one thread (torch.set_num_threads(1)) and collect(sched=True): its thread's "
                   "run-queue time then tells a busy machine (free cores, a quiet run to compare) from the step's own "
                   "wait (find the call it blocks in: py-spy dump --pid PID while it waits)")
SCHED_NEXT = ("a run with collect(sched=True), recording the thread's run-queue and CPU time (torch ran on one thread "
              "already: torch_threads 1 as the run ended): they then tell a busy machine (free cores, a quiet run to "
              "compare) from the step's own wait (find the call it blocks in: py-spy dump --pid PID while it waits)")
STEADY_BUSY_NEXT = ("free cores for the step: other processes' (run where these cores are free: taskset -c, "
                    "os.sched_setaffinity; compare timings from a quiet run) or this job's own (fewer threads and "
                    "workers than its usable cores)")
GAVE_UP = "the step gave the CPU up, on I/O, a lock (the GIL: another thread of the process) or a sleep in the step"


def _waited(loop: Loop, total: float, one_thread: bool, mine: np.ndarray, kind: str,
            load: busy.Load | None, nested: Nested | None = None) -> dict[str, Any] | None:
    """The calls ``mine`` of ``kind`` among those that waited rather than computed: the time they
    waited beyond what their own work took (:func:`~gnnmon.report.busy.idle_calls`,
    :func:`~gnnmon.report.busy.off_cpu`): a busy machine (the load not sampled) where their thread's
    extra run-queue time holds half their wait or more; else an ``off-CPU wait``: I/O, a lock or a
    sleep in the step where the run queue (torch on one thread) or the sampled ``load`` says the
    machine did not make them wait, or either, unknown."""
    waited = busy.off_cpu(loop, one_thread)
    waits = busy.machine_calls(loop, None, one_thread)  # the calls that waited, less the compile's and the collector's
    if load is not None:
        waits |= busy.machine_calls(loop, load, one_thread)  # the crowded cores' too: not the quiet calls
    quiet = loop.steady & ~waits
    if waited is None or not mine.any() or quiet.sum() < MIN_CALLS:
        return None
    more = busy.queued_more(loop)
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
    head += _phase_said(loop, mine, quiet, proof, nested)
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
    if load is not None:
        why = "" if queued is None else f", and waiting for a core holds only {ms(queued)} of it"
        words = (f"{head}; the machine's sampled load does not account for it (its cores had time to spare, or other "
                 f"processes took less than half of it beyond their usual CPU{why}): the thread gave the CPU up, on "
                 "I/O, a lock (the GIL: another thread of the process) or a sleep in the step, not warm-up")
        return finding(busy.WAITED, loop.label, cost, total, words, proof, OWN_WAIT_NEXT)
    why = ("its thread's run-queue time holds only " + ms(queued) + " of it, torch's other threads' is not recorded"
           if queued is not None else "neither the machine's load nor the thread's run queue was recorded")
    words = (f"{head}: waiting for a core (other processes' load) or on I/O, a lock or a sleep in the step, not "
             f"warm-up; which, the rows cannot say ({why})")
    return finding(busy.WAITED, loop.label, cost, total, words, proof, UNKNOWN_WAIT_NEXT)


Nested = dict[str, tuple[np.ndarray, np.ndarray]]
"""Per label of the rows run inside a loop's calls (their ``parent`` is the call's
``<label>#<index>``): per call, those rows' time summed (s; 0 where the call ran none) and their own
CPU time (``cpu_s``) summed (s; NaN where one of them has none)."""


def nested_rows(table: Table, loop: Loop) -> Nested:
    """The rows each of ``loop``'s calls holds, by label (:data:`Nested`): a ``gnnmon.timed`` block
    or a decorated call inside the step, whose time is the step's too. A job's rows are matched
    within their rank (each rank numbers its calls)."""
    names = [f"{loop.label}#{int(i)}" if not math.isnan(i) else None for i in loop.column("index").tolist()]
    ranked = "rank" in loop.part.cols
    keys: list[Any] = list(zip(loop.part.pick("rank", loop.at.tolist()), names, strict=True)) if ranked else names
    at = {key: k for k, (key, name) in enumerate(zip(keys, names, strict=True)) if name is not None}
    out: Nested = {}
    for label, part in table.parts.items():
        if part.nulls("parent").all():
            continue
        parents: Any = part.objects("parent")
        if ranked:
            parents = zip(part.objects("rank"), parents, strict=True)
        found = np.fromiter((at.get(p, -1) for p in parents), dtype=np.int64, count=part.n)
        rows = np.flatnonzero(found >= 0)
        if not rows.size:
            continue
        calls = found[rows]
        t, cpu = part.time()[rows], part.numbers("cpu_s")[rows]
        keep = ~np.isnan(t)
        times, own = np.zeros(loop.t.size), np.zeros(loop.t.size)
        np.add.at(times, calls[keep], t[keep])
        np.add.at(own, calls[keep], cpu[keep])  # NaN where one of a call's rows has no CPU time
        out[label] = (times, own)
    return out


Held = tuple[str, str, float, float]
"""What holds a finding's time: ``"phase"`` or ``"row"`` (a nested row's label,
:func:`nested_rows`), its name, and two seconds (what each finding says they are)."""


def _phase_said(loop: Loop, calls: np.ndarray, others: np.ndarray, proof: list[dict[str, Any]],
                nested: Nested | None = None) -> str:
    """The words a finding about ``calls`` adds for the phase or nested row that holds their
    excess (:func:`part_holding`), its evidence appended to ``proof``; "" where none does."""
    return held_said(loop, part_holding(loop, calls, others, nested), int(calls.sum()), proof)


def held_said(loop: Loop, held: Held | None, m: int, proof: list[dict[str, Any]]) -> str:
    """The words for what :func:`part_holding` found in ``m`` calls, its evidence appended to
    ``proof``; "" for None."""
    if held is None:
        return ""
    kind, name, grew, usual = held
    if kind == "row":
        proof.append(evidence(name, usual + grew, "s", f"the time of its rows inside each call (parent "
                              f"{loop.label}#index), summed per call: median of those {m} call(s); {ms(usual)} in "
                              "the others"))
        return (f"; {name}, timed inside each call, took {ms(grew)} more of it (median {ms(usual + grew)} against "
                f"{ms(usual)})")
    proof.append(evidence(f"phase_{name}_s", usual + grew, "s", f"median of those {m} call(s); {ms(usual)} in the "
                          "others"))
    return f"; phase {name} took {ms(grew)} more of it (median {ms(usual + grew)} against {ms(usual)})"


def part_holding(loop: Loop, calls: np.ndarray, others: np.ndarray, nested: Nested | None = None) -> Held | None:
    """The phase or nested row (``nested``, :func:`nested_rows`) that holds the ``calls``' excess:
    of those whose time (median, 0 s in a call that did not run it) grew from the ``others`` calls
    to ``calls`` by at least half of their median excess over the others', the innermost phases
    (one that ran inside another that grew as much is the more precise: the outer one's time holds
    it) and the nested rows, and of those the one that grew most (a tie: the first phase recorded):
    its kind, its name, that growth and its median in the others, s; None where none did (the
    excess lies outside every phase and nested row, or the run has none)."""
    excess = median(np.sort(loop.t[calls])) - median(np.sort(loop.t[others]))
    if not excess > 0:  # none slower, or no calls on either side (NaN)
        return None

    def grown(values: np.ndarray) -> tuple[float, float] | None:
        usual = median(np.sort(values[others]))
        grew = median(np.sort(values[calls])) - usual
        return (grew, usual) if grew >= busy.EXPLAINS * excess else None

    phases: dict[str, tuple[float, float]] = {}
    for field in loop.part.cols:
        name = phase_field(field)
        if name is not None and (g := grown(loop.zeros(field))) is not None:
            phases[name] = g
    inside = _inside(loop)
    found: list[Held] = [("phase", name, *g) for name, g in phases.items()
                         if not any(inside.get(other) == name for other in phases)]
    found += [("row", name, *g) for name, (times, _) in (nested or {}).items() if (g := grown(times)) is not None]
    return max(found, key=lambda g: g[2]) if found else None


def _inside(loop: Loop) -> dict[str, str]:
    """Phase -> the phase it ran inside, for the loop's nested phases."""
    return nested_phases(loop.part.cols, lambda f: next((v for v in loop.part.objects(f) if isinstance(v, str)),
                                                         None))


def wait_holding(loop: Loop, calls: np.ndarray, wait: np.ndarray, total: float, nested: Nested | None = None,
                 other: np.ndarray | None = None) -> tuple[str, str, np.ndarray, np.ndarray] | None:
    """The phase or nested row that holds the most of each call's ``wait`` (s, the time off the CPU a
    finding counts in it), at least: a span of a call can hold no more CPU time than the call's
    (``cpu_s``; a nested row's own, where each of its rows records one), so of its time, at least
    that less the CPU time lay off the CPU; less ``other`` (s per call: time off the CPU the finding
    does not count, such as a wait for a core, which may have lain in it too); at most the call's
    ``wait``. Said where that least part, over the steady ``calls``, is a cost measured at each step
    (:func:`~gnnmon.report.loops.cost_beyond_noise`): the innermost such phase (an outer one's time
    holds the inner one's) or nested row whose least part is the largest. Its kind (``"phase"`` or
    ``"row"``), name, time per call and least part of the wait per call (s); None where none
    holds that much (phases record no CPU time of their own: a phase beside much CPU time cannot be
    told to hold a wait)."""
    cpu = loop.zeros("cpu_s")
    spans: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    for field in loop.part.cols:
        name = phase_field(field)
        if name is not None:
            spans["phase", name] = (loop.zeros(field), cpu)
    for name, (times, own) in (nested or {}).items():
        spans["row", name] = (times, np.where(np.isnan(own), cpu, own))
    least: dict[tuple[str, str], np.ndarray] = {}
    for key, (times, most) in spans.items():
        held = np.clip(times - most - (0.0 if other is None else other), 0.0, None)
        held = np.minimum(held, wait)
        if cost_beyond_noise(held[calls], total):
            least[key] = held
    inside = _inside(loop)
    inner = [k for k in least if not (k[0] == "phase" and any(o[0] == "phase" and inside.get(o[1]) == k[1]
                                                                for o in least))]
    if not inner:
        return None
    kind, name = max(inner, key=lambda k: float(least[k][calls].sum()))
    return kind, name, spans[kind, name][0], least[kind, name]


def _wait_said(loop: Loop, calls: np.ndarray, wait: np.ndarray, total: float, proof: list[dict[str, Any]],
               nested: Nested | None, other: np.ndarray | None = None) -> str:
    """The words a wait in every call adds for the phase or nested row that holds it
    (:func:`wait_holding`), its evidence appended to ``proof``; where none does and the step has
    phases, that they cannot say which holds it; else ""."""
    held = wait_holding(loop, calls, wait, total, nested, other)
    m = int(calls.sum())
    if held is None:
        if any(phase_field(f) is not None for f in loop.part.cols):
            return ("; its phases record no CPU time of their own, so which of them holds it the rows cannot say (a "
                    "block timed inside the step with gnnmon.timed(label=...) records its own cpu_s)")
        return ""
    kind, name, times, least = held
    each, took = median(np.sort(least[calls])), median(np.sort(times[calls]))
    less = "the call's whole CPU time" if kind == "phase" else "its own CPU time"
    if other is not None:
        less += " and the call's wait for a core"
    where = f"phase {name}" if kind == "phase" else f"{name}, timed inside the step"
    proof.append(evidence(f"phase_{name}_s" if kind == "phase" else name, took, "s",
                          (f"median of those {m} call(s)" if kind == "phase" else
                           f"the time of its rows inside each call (parent {loop.label}#index), summed per call: "
                           f"median of those {m} call(s)")
                          + f"; at least {ms(each)} of it off the CPU (its time less {less}), median"))
    return f"; at least {ms(each)} of it a call lay in {where} (median: its {ms(took)} less {less})"


OWN_WAIT_NEXT = ("the step's own wait, the job's cost: find the call it blocks in (py-spy dump --pid PID while it "
                 "waits, or torch.profiler's CPU trace); a wait for the next batch is watch_loader's data_wait_s")
UNKNOWN_WAIT_NEXT = ("collect(sample=0.5) samples the load beside the run and collect(sched=True) the thread's "
                     "run-queue time: either tells a busy machine (free cores, a quiet run to compare) from the "
                     "step's own wait (find the call it blocks in: py-spy dump --pid PID while it waits)")
