"""The calling thread's CPU time, context switches and run-queue time, as the OS scheduler counts
them: what tells a step the OS descheduled (another process took its core) from one that computed
or slept longer.

Three system calls (Linux; their cost in a decorated call: ``benchmarks/sched_cost.py``):

* CPU time, user + system, in seconds: ``CLOCK_THREAD_CPUTIME_ID``, the kernel's exact runtime
  (``getrusage``'s user/system split is scaled from ticks and kept monotonic, so its sum can lag
  by milliseconds). Wall time minus it is the time the thread was off the CPU;
* involuntary context switches: the OS took the CPU from the thread while it could run
  (preemption); voluntary context switches: the thread gave the CPU up (a sleep, I/O, a lock, a
  blocking wait). Both from ``getrusage(RUSAGE_THREAD)``;
* run-queue time, in seconds: how long the thread waited for a core while it could run (the
  second figure of ``/proc/thread-self/schedstat``, kept open per thread and read with ``pread``).
  Off-CPU time minus it is the time the thread gave the CPU up of its own accord: counts of
  switches say how often, this says how long.

Where the OS has no per-thread usage (macOS, Windows), :data:`AVAILABLE` is False; where it keeps
no run-queue time (a kernel without ``CONFIG_SCHED_INFO``), :data:`QUEUED_AVAILABLE` is False and
the run-queue figure is None.
"""

from __future__ import annotations

import os
import resource
import threading
import time

_THREAD = getattr(resource, "RUSAGE_THREAD", None)
_getrusage = resource.getrusage
_thread_ns = time.thread_time_ns
_pread = getattr(os, "pread", None)
_SCHEDSTAT = "/proc/thread-self/schedstat"

AVAILABLE = _THREAD is not None
"""Whether the calling thread's scheduler counters can be read here."""

Times = tuple[float, int, int, "float | None"]
"""``(cpu_s, preempted, waits, queued_s)``: see :func:`thread_times`."""


class _Schedstat:
    """One thread's open ``schedstat`` file, closed when the thread's locals go (at its end)."""

    __slots__ = ("fd",)

    def __init__(self) -> None:
        self.fd = os.open(_SCHEDSTAT, os.O_RDONLY | os.O_CLOEXEC)

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except (OSError, AttributeError):  # closed already, or the interpreter is shutting down
            pass


def _read_queued_s(fd: int) -> float:
    """The run-queue figure of an open ``schedstat`` file (its second, in ns), in seconds."""
    return int(_pread(fd, 96, 0).split(None, 2)[1]) / 1e9  # type: ignore[misc]


def _probe() -> bool:
    """Whether this kernel keeps per-thread run-queue time that this process can read."""
    if _pread is None:
        return False
    try:
        stat = _Schedstat()
        _read_queued_s(stat.fd)
    except (OSError, ValueError, IndexError):
        return False
    return True


QUEUED_AVAILABLE = AVAILABLE and _probe()
"""Whether the calling thread's run-queue time can be read here."""

_local = threading.local()


def sched_state() -> threading.local:
    """The calling thread's scheduler state (its open ``schedstat``; the counters at its last
    top-level row's end): forgotten in a forked child, whose thread counts from zero and whose
    files are its own."""
    return _local


def _forget_after_fork() -> None:
    global _local
    _local = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def thread_queued_s() -> float | None:
    """Seconds the calling thread has waited on a run queue (runnable, no core) since it started;
    None where :data:`QUEUED_AVAILABLE` is False or the read fails."""
    if not QUEUED_AVAILABLE:
        return None
    try:
        fd = _local.fd
    except AttributeError:
        try:
            _local.stat = stat = _Schedstat()  # held by the thread's locals: closed at its end
        except OSError:
            return None
        fd = _local.fd = stat.fd
    try:
        return _read_queued_s(fd)
    except (OSError, ValueError, IndexError):  # closed under it (a user's closerange): open anew next time
        _local.stat.fd = -1  # not ours to close any more: the number may be another file's now
        del _local.stat, _local.fd
        return None


def thread_times() -> Times:
    """``(cpu_s, preempted, waits, queued_s)`` of the calling thread since it started: CPU seconds
    (user + system), involuntary and voluntary context switches, seconds on a run queue (None where
    the kernel keeps none). ``OSError`` where not :data:`AVAILABLE`."""
    if _THREAD is None:
        raise OSError("per-thread resource usage (RUSAGE_THREAD) is not available on this OS")
    r = _getrusage(_THREAD)
    return _thread_ns() / 1e9, r.ru_nivcsw, r.ru_nvcsw, thread_queued_s()
