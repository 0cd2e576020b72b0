"""A busy machine, as the rows' sampled load says it (``others_cpu_pct`` and ``idle_cpu_pct``, see
:mod:`gnnmon.timeline.machine_load`), or, not sampled, their CPU time (:func:`idle_calls`): which
calls were slowed by the machine (:func:`crowded_calls`), for the diagnosis and ``report.spikes()``
alike, so that the two name the same calls. Not sampled, a call that waited rather than computed
is the machine's only where its thread's run-queue time says so (:func:`causes`); else it is an
off-CPU wait (:data:`WAITED`): a core, or I/O, a lock or a sleep in the step. Sampled, a call on
crowded cores (below) is the machine's, unless torch ran on one thread and that thread's run
queue, recorded, holds under half its excess; a call that waited otherwise, with a sample of its
own, is an off-CPU wait (:func:`own_waits`).

On cores with no idle time left, a call's wall time is its own CPU time plus the time the cores
gave to other processes: a call slowed by a busy machine is one during which other processes took
the cores at a higher rate than usual, and whose own work did not grow. So a call ran on
**crowded** cores when the cores the process may run on had less than :data:`IDLE_FULL` idle (they
were full), and other processes' rate on them (``others_cpu_pct``, % of one core) rose during it
above their usual rate (the median over the label's steady calls), by enough that the CPU the
rise took over the call's time (``(others_cpu_pct - usual) / 100 × t``), at the usual call's pace
(:func:`pace`: a process that gets a fifth of its core loses five wall seconds to each CPU second
taken from it), holds at least :data:`EXPLAINS` of its excess over the label's level, an excess
beyond the noise of the steady calls the rise did not touch (:data:`~gnnmon.report.loops.NOISE_K`
robust standard deviations of their times: a call at the level whose sampled rate jittered up
was not slowed). The pace exceeds 1 only where the rows say the usual call lost its time to
sharing: its thread's run queue, where recorded (its runnable time per CPU second), else cores
full during the steady calls. A step that computes a tenth of its time because it waits on the
GPU, I/O or a sleep, on cores with idle time, loses no more wall time than the CPU taken from it
(pace 1), so a small rise in the others' load beside its slow calls does not name them (at the
usual call's level over its CPU time, 10, a rise of 2.5 % of a core would name a call twice the
level's). The rate, not the seconds:
at a steady load the others' seconds during a call grow with the call's length, whatever made it
long, so a call that computed 150 ms more at the usual 130 % collects 195 ms of others' CPU
without the machine having changed. This holds whatever the machine's usual load: on a quiet
64-core machine the others' share of a pinned core rises from 0 to a half with one busy process
beside it; on a 2-core machine already shared with three processes it rises only from 3/4 to 4/5,
yet that rise over the slowed call's time still adds up to its excess (the CPU the call lost).
A call whose own work (:func:`work`, torch on one thread) grew enough to account for
:data:`EXPLAINS` of its excess at the usual call's pace computed (:func:`computed`): it is never
the machine's, whatever the load beside it. A slow call on crowded cores that did not compute was
slowed by the machine, not by the job (unless its one thread's run queue says it did not wait for
a core): the spikes' cause ``busy machine``, and the diagnosis's finding of that name.
"""

from __future__ import annotations

import math

import numpy as np

from gnnmon.report.loops import NOISE_K, Loop
from gnnmon.report.stats import median, spread

IDLE_FULL = 25.0
"""% of one core: less idle time than this on the process's cores, and they were full."""

EXPLAINS = 0.5
"""The least share of a call's excess that other processes' extra CPU seconds must match."""

CAUSE = "busy machine"
WAITED = "off-CPU wait"
"""Calls that waited rather than computed where nothing recorded says a busy machine made them
wait (:func:`causes`): a core, or I/O, a lock or a sleep in the step, as far as the rows can tell."""


def usual_others(others: np.ndarray, steady: np.ndarray) -> float:
    """Other processes' usual rate on the run's cores, % of one core: the median of ``others`` over
    the ``steady`` calls that have it (0 where none does)."""
    known = others[steady & ~np.isnan(others)]
    return float(np.median(known)) if known.size else 0.0


def others_extra_s(others: np.ndarray, t: np.ndarray, usual: float) -> np.ndarray:
    """Per call: the CPU seconds other processes took on the run's cores during it beyond their
    ``usual`` rate (% of one core) over its time ``t`` (s), negative where they took less; NaN
    where not sampled."""
    return (others - usual) / 100.0 * t


def crowded(others: np.ndarray, idle: np.ndarray, t: np.ndarray, level: float, usual: float,
            pace: float = 1.0, least: float = 0.0) -> np.ndarray:
    """Per call: whether its cores were crowded (see the module doc) against the label's ``level``
    (seconds per call), the others' ``usual`` rate (% of one core, :func:`usual_others`) and the
    usual call's ``pace`` (:func:`pace`); False where not sampled or not slower than the level by
    more than ``least`` (s: the steps' noise)."""
    extra = others_extra_s(others, t, usual)
    excess = t - level
    with np.errstate(invalid="ignore"):
        return (~np.isnan(extra) & ~np.isnan(idle) & (idle < IDLE_FULL) & (excess > max(least, 0.0))
                & (others > usual) & (extra * pace >= EXPLAINS * excess))


def pace(cpu: np.ndarray | None, steady: np.ndarray, level: float, idle: np.ndarray | None = None,
         queued: np.ndarray | None = None) -> float:
    """The usual call's wall seconds lost to each CPU second other processes take from it, where the
    rows say it lost its time to sharing its cores; 1 where they say it did not, or CPU time
    (``cpu``, s per call) is not recorded. A process that gets a fifth of its core loses a second of
    wall time to each 0.2 s of CPU the others take from it; one that computes a tenth of its time
    because it waits on the GPU, I/O or a sleep does not. In order, over the ``steady`` calls:

    * the thread's run queue recorded (``queued``, ``thread_queued_s``; ``cpu`` then that thread's
      ``thread_cpu_s``): the median of each call's ``(cpu + queued) / cpu``, its runnable wall time
      per CPU second (the time it waited by its own choice is no cost of sharing), at least 1;
    * else, their cores full (the median ``idle``, ``idle_cpu_pct``, under :data:`IDLE_FULL`; None:
      not given, taken as full): the ``level`` (s) over their median ``cpu``;
    * else 1: the cores had idle time during the usual call, so its low CPU share was its own
      waiting."""
    if cpu is None:
        return 1.0
    if queued is not None:
        known = steady & ~np.isnan(queued) & (cpu > 0)
        if known.any():
            return max(median((cpu[known] + queued[known]) / cpu[known]), 1.0)
    if idle is not None:
        sampled = idle[steady & ~np.isnan(idle)]
        if not (sampled.size and median(sampled) < IDLE_FULL):
            return 1.0
    known = cpu[steady & ~np.isnan(cpu)]
    usual = median(np.sort(known)) if known.size else math.nan
    return level / usual if usual > 0 and level > 0 else 1.0


def crowded_words(others: float, idle: float, t: float, level: float, usual: float) -> str:
    """A crowded call's detail: other processes' rate during it against their usual rate, and the
    CPU the rise took over its time against its excess."""
    extra = (others - usual) / 100.0 * t
    return (f"other processes took {others:.0f} % of a core on this process's cores during it (usually "
            f"{usual:.0f} %): {extra * 1e3:.1f} ms of CPU more over its {t * 1e3:.1f} ms, against "
            f"{(t - level) * 1e3:.1f} ms over the level; {idle:.0f} % idle left")


def computed(done: np.ndarray | None, steady: np.ndarray, t: np.ndarray, level: float,
             idle: np.ndarray | None = None, queued: np.ndarray | None = None) -> np.ndarray:
    """Per call: its own work ``done`` (s, :func:`work`; None: not known, no call computed) grew
    over the ``steady`` calls' median by enough that, at the usual call's pace (:func:`pace` of
    ``done`` against the ``level``, s, the cores' ``idle`` and the thread's run queue ``queued``, at
    least 1: a second of work takes longer than a second only on a shared core), it accounts for
    :data:`EXPLAINS` of its excess over the level: the call computed, whatever the load beside it.
    False where its work is not recorded or it is not slower than the level."""
    if done is None:
        return np.zeros(t.shape, dtype=bool)
    known = steady & ~np.isnan(done)
    usual = median(np.sort(done[known])) if known.any() else math.nan
    if not usual > 0:
        return np.zeros(t.shape, dtype=bool)
    paced = max(pace(done, steady, level, idle, queued), 1.0)  # at least 1 on one thread
    excess = t - level
    with np.errstate(invalid="ignore"):
        return ~np.isnan(done) & (excess > 0) & ((done - usual) * paced >= EXPLAINS * excess)


GC_SHARE = 0.5
"""A call whose collections paused it for at least this share of its excess over the level is the
collector's, not the machine's (``report.spikes()``'s ``gc_share``)."""


def crowded_calls(loop: Loop, one_thread: bool = False) -> np.ndarray:
    """Per call: slowed by the machine (:func:`machine_calls`) or, the load sampled, waiting off the
    CPU (:func:`own_waits`; not sampled, the machine's calls are every call that waited), its load
    read here (:func:`load`): the calls warm-up leaves to those findings."""
    sampled = load(loop)
    slowed = machine_calls(loop, sampled, one_thread)
    return slowed if sampled is None else slowed | own_waits(loop, sampled, one_thread)


Load = tuple[np.ndarray, np.ndarray, float, float]
"""The sampled ``others_cpu_pct`` and ``idle_cpu_pct`` of each call, the others' usual rate, % of
one core (:func:`load`, :func:`usual_others`), and the usual call's pace (:func:`pace`)."""


def machine_calls(loop: Loop, sampled: Load | None, one_thread: bool = False,
                  gc_share: float = GC_SHARE) -> np.ndarray:
    """Per call: slowed while other processes crowded the run's cores (above; ``sampled``, the
    loop's :func:`load`) and, torch on one thread, not by its own work (:func:`computed`); where
    the machine's load was not sampled (None), slowed while computing no more
    (:func:`idle_calls`); in neither case a call that compiled (the compile's: its workers
    are other processes) or one its collections explain (``gc_share`` of its excess). Such a
    call's excess is the busy machine's alone, never warm-up's, recompilation's or the
    collector's. Sampled, where the thread's run queue was recorded (``thread_queued_s``) and torch
    ran on one thread (``one_thread``: the thread's queue is the step's), a call on crowded cores is
    the machine's only where its extra run-queue time holds :data:`EXPLAINS` of its excess
    (:func:`queued_enough`): other processes take the cores a sleeping call leaves, and that is no
    evidence that they delayed it. The diagnosis's findings and ``report.spikes()`` all read
    this, so each call's time is shared out once."""
    if sampled is None:
        slowed = idle_calls(loop, one_thread)
    else:
        others, idle, usual, paced = sampled
        with np.errstate(invalid="ignore"):
            untouched = loop.t[loop.steady & (others <= usual)]  # the steady calls' own noise, the load's not in it
        least = NOISE_K * spread(untouched) if untouched.size else 0.0
        queued = loop.column("thread_queued_s") if loop.has("thread_queued_s") else None
        slowed = crowded(others, idle, loop.t, loop.level, usual, paced, least)
        slowed &= ~computed(work(loop, one_thread), loop.steady, loop.t, loop.level, idle, queued)
        if one_thread:  # the thread's run queue is the step's own (torch's other threads' is not recorded)
            slowed &= queued_enough(queued, loop.steady, loop.t - loop.level)
    compiled = loop.zeros("compile_frames") > 0
    collected = loop.zeros("gc_pause_s") >= gc_share * np.maximum(loop.t - loop.level, 0.0)
    return slowed & ~compiled & ~collected


def load(loop: Loop) -> Load | None:
    """The sampled ``others_cpu_pct`` and ``idle_cpu_pct`` of each call, the others' usual rate
    over the steady calls (:func:`usual_others`) and the usual call's pace (:func:`pace`); None
    where the load was not sampled."""
    if not loop.has("others_cpu_pct") or not loop.has("idle_cpu_pct"):
        return None
    others, idle = loop.column("others_cpu_pct"), loop.column("idle_cpu_pct")
    queued = loop.column("thread_queued_s") if loop.has("thread_queued_s") else None
    names = ("cpu_s", "thread_cpu_s") if queued is None else ("thread_cpu_s", "cpu_s")  # the queue's thread's own
    cpu = next((loop.column(f) for f in names if loop.has(f)), None)
    return others, idle, usual_others(others, loop.steady), pace(cpu, loop.steady, loop.level, idle, queued)


OFF_CPU = 0.5
"""A slow call whose own work (CPU time) grew by less than this share of its excess over the
steps' level waited rather than computed."""


def work(loop: Loop, one_thread: bool) -> np.ndarray | None:
    """Each call's own work, s: its thread's CPU time (``collect(sched=True)``), else the process's
    (``cpu_s``); only where torch ran on one thread (``one_thread``: the manifest's
    ``torch_threads``): threads that spin while they wait for a core inflate a multi-threaded
    step's CPU time under load. None where not recorded."""
    if not one_thread:
        return None
    for name in ("thread_cpu_s", "cpu_s"):
        if loop.has(name):
            return loop.column(name)
    return None


def off_cpu(loop: Loop, one_thread: bool) -> np.ndarray | None:
    """Each call's time over the steps' level that its own work does not account for, s (0 where
    none): what it waited for a core, I/O or a lock. Torch on one thread: the excess less what its
    CPU time (:func:`work`) grew by. On more threads (whose spinning inflates CPU time under load),
    only the plain case: a call whose process computed under :data:`OFF_CPU` of its wall time had
    no thread running for at least its wall time less its CPU time, and the usual call, which may
    have waited as much of its own time, for at most the level: it waited at least
    ``t - cpu - level`` more (on a loaded machine every call may wait half its time: a call ten
    times as long in CPU time too computed more, it did not wait more). None where no CPU time is
    recorded."""
    excess = loop.t - loop.level
    done = work(loop, one_thread)
    if done is not None:
        known = loop.steady & ~np.isnan(done)
        usual = median(np.sort(done[known])) if known.any() else math.nan
        return np.nan_to_num(np.maximum(excess - np.maximum(done - usual, 0.0), 0.0), nan=0.0)
    if not loop.has("cpu_s"):
        return None
    cpu = loop.column("cpu_s")
    plain = ~np.isnan(cpu) & (cpu < OFF_CPU * loop.t)
    return np.where(plain, np.clip(loop.t - np.nan_to_num(cpu) - loop.level, 0.0, None), 0.0)  # under the excess


def queued_more(loop: Loop) -> np.ndarray | None:
    """Each call's run-queue time beyond the steady calls' usual (their median), s: how much longer
    its thread waited for a core while it could run (``thread_queued_s``, ``collect(sched=True)``
    on Linux); None where not recorded."""
    if not loop.has("thread_queued_s"):
        return None
    return extra_queue(loop.column("thread_queued_s"), loop.steady)


def extra_queue(queued: np.ndarray, steady: np.ndarray) -> np.ndarray:
    """Each call's ``queued`` run-queue time beyond the ``steady`` calls' median, s (0 where unknown)."""
    known = steady & ~np.isnan(queued)
    usual = median(np.sort(queued[known])) if known.any() else 0.0
    return np.nan_to_num(np.maximum(queued - usual, 0.0), nan=0.0)


def queued_enough(queued: np.ndarray | None, steady: np.ndarray, excess: np.ndarray) -> np.ndarray:
    """Per call: its thread's extra run-queue time (:func:`extra_queue`, against the ``steady``
    calls) holds :data:`EXPLAINS` of its ``excess`` over the level, so it waited for a core; all
    True where the run queue was not recorded (``queued`` None: nothing says otherwise)."""
    if queued is None:
        return np.ones(excess.shape, dtype=bool)
    return extra_queue(queued, steady) >= EXPLAINS * np.maximum(excess, 0.0)


def causes(waited: np.ndarray, queued: np.ndarray | None) -> np.ndarray:
    """Per call that waited ``waited`` s off the CPU (:func:`off_cpu`), what it
    waited for: a core (:data:`CAUSE`) where its thread's extra run-queue time ``queued``
    (:func:`queued_more`) holds at least :data:`EXPLAINS` of a wait over 0; else :data:`WAITED`, a
    wait the rows cannot pin on the machine, as every call's where the run queue was not recorded
    (None). The diagnosis and ``report.spikes()`` both read this, so each call has one cause."""
    if queued is None:
        return np.full(waited.shape, WAITED)
    return np.where((waited > 0) & (queued >= EXPLAINS * waited), CAUSE, WAITED)


def own_waits(loop: Loop, sampled: Load | None, one_thread: bool, gc_share: float = GC_SHARE) -> np.ndarray:
    """Per call: waited rather than computed (:func:`idle_calls`, less the compile's and the
    collector's) where nothing recorded pins the wait on the machine: its thread's run queue (where
    recorded) holds under :data:`EXPLAINS` of the wait (:func:`causes`), and, the load sampled
    (``sampled``, :func:`load`), it is not the machine's by :func:`machine_calls` (its cores were
    not crowded, or its one thread did not queue) and has a sample of its own: an off-CPU wait
    (:data:`WAITED`)."""
    waits = machine_calls(loop, None, one_thread, gc_share)
    waited = off_cpu(loop, one_thread)
    if waited is None or not waits.any():
        return np.zeros(loop.t.size, dtype=bool)
    if sampled is not None:  # a call with no sample of its own (the first window): not the sampled load's to judge
        others, idle = sampled[0], sampled[1]
        waits &= ~machine_calls(loop, sampled, one_thread, gc_share) & ~np.isnan(others) & ~np.isnan(idle)
    return waits & (causes(waited, queued_more(loop)) == WAITED)


def idle_calls(loop: Loop, one_thread: bool) -> np.ndarray:
    """Per call: slower than the steps' level by more than their noise in time its own work does
    not account for (:func:`off_cpu`), and that time at least :data:`OFF_CPU` of its excess: it
    waited for a core (or on I/O, a lock) rather than computed. All False where no CPU time is
    recorded."""
    waited = off_cpu(loop, one_thread)
    if waited is None:
        return np.zeros(loop.t.size, dtype=bool)
    return (waited > NOISE_K * loop.noise) & (waited >= OFF_CPU * (loop.t - loop.level))
