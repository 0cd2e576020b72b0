"""The calling thread's CPU time and context switches, as the OS scheduler counts them: what tells a
step the OS descheduled (another process took its core) from one that computed or slept longer.

Two system calls (Linux; about 1 µs together on the 2-core VM):

* CPU time, user + system, in seconds: ``CLOCK_THREAD_CPUTIME_ID``, the kernel's exact runtime
  (``getrusage``'s user/system split is scaled from ticks and kept monotonic, so its sum can lag
  by milliseconds). Wall time minus it is the time the thread was off the CPU;
* involuntary context switches: the OS took the CPU from the thread while it could run
  (preemption); the time it then waited for a core is off-CPU time;
* voluntary context switches: the thread gave the CPU up (a sleep, I/O, a lock, a blocking wait).

Both counts come from ``getrusage(RUSAGE_THREAD)``.

Where the OS has no per-thread usage (macOS, Windows), :data:`AVAILABLE` is False.
"""

from __future__ import annotations

import resource
import time

_THREAD = getattr(resource, "RUSAGE_THREAD", None)
_getrusage = resource.getrusage
_thread_ns = time.thread_time_ns

AVAILABLE = _THREAD is not None
"""Whether the calling thread's scheduler counters can be read here."""


def thread_times() -> tuple[float, int, int]:
    """``(cpu_s, preempted, waits)`` of the calling thread since it started: CPU seconds (user +
    system), involuntary and voluntary context switches. ``OSError`` where not :data:`AVAILABLE`."""
    if _THREAD is None:
        raise OSError("per-thread resource usage (RUSAGE_THREAD) is not available on this OS")
    r = _getrusage(_THREAD)
    return _thread_ns() / 1e9, r.ru_nivcsw, r.ru_nvcsw
