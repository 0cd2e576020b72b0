"""The host process's resident memory (RSS): current, and an exact peak where Linux allows it.

On Linux the peak is exact: ``VmHWM`` in ``/proc/self/status`` is the kernel's high-water mark of
RSS, and writing ``5`` to ``/proc/self/clear_refs`` resets it to the current RSS (Linux >= 4.0).
Where that file cannot be written, or off Linux, the peak is sampled with psutil and labelled so.
Child processes (DataLoader workers) can only be sampled: their RSS is read with psutil.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Any

from gnnmon.devices.peaks import CounterPeaks, PolledPeaks

_M_MMAP_THRESHOLD = -3  # glibc mallopt parameter
_mmap_threshold: int | None = None

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


class _ProcStatus:
    """Reads VmRSS and VmHWM from one kept-open ``/proc/self/status`` descriptor (reopened after fork)."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._pid = -1
        self._lock = threading.Lock()

    def read(self) -> tuple[tuple[int], tuple[int]]:
        with self._lock:
            pid = os.getpid()
            if self._fd is None or self._pid != pid:
                self._fd = os.open(_STATUS, os.O_RDONLY)
                self._pid = pid
            data = os.pread(self._fd, 8192, 0)
        rss = hwm = -1
        for line in data.split(b"\n"):
            if line.startswith(b"VmHWM:"):
                hwm = int(line.split()[1]) * 1024
            elif line.startswith(b"VmRSS:"):
                rss = int(line.split()[1]) * 1024
                break  # VmRSS follows VmHWM
        if rss < 0 or hwm < 0:
            raise OSError("VmRSS/VmHWM missing from /proc/self/status")
        return (rss,), (hwm,)


def _reset_hwm() -> None:
    with open(_CLEAR_REFS, "w") as f:
        f.write("5")


def _psutil_rss() -> tuple[int]:
    import psutil

    return (psutil.Process().memory_info().rss,)


def children_rss() -> tuple[int, int]:
    """(sum of RSS, count) over this process's live descendants, in bytes."""
    import psutil

    total = 0
    count = 0
    for child in psutil.Process().children(recursive=True):
        try:
            total += child.memory_info().rss
            count += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total, count


def children_private_memory() -> dict[str, int]:
    """USS and PSS of this process's live descendants, summed (bytes), and how many there are.

    RSS counts every page a process maps, so forked DataLoader workers that share the parent's
    pages each show most of the parent's RSS; USS is what a child alone holds (what its exit would
    free) and PSS shares every page among the processes mapping it. Exact, but slow: the kernel
    walks each child's page tables (~20 ms for a 550 MiB worker here), so read it once per phase of
    a run, not per step."""
    import psutil

    uss = pss = count = 0
    for child in psutil.Process().children(recursive=True):
        try:
            info = child.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        uss += info.uss
        pss += getattr(info, "pss", 0)
        count += 1
    return {"uss_bytes": uss, "pss_bytes": pss, "processes": count}


class HostMemory:
    """Peak windows over this process's RSS, exact (VmHWM) where possible, else sampled."""

    def __init__(self) -> None:
        self._exact: CounterPeaks | None = None
        self._polled: dict[float, PolledPeaks] = {}
        self._children: dict[float, PolledPeaks] = {}
        self._mode: str | None = None
        self._why_sampled = ""
        self._lock = threading.Lock()

    def _choose(self) -> str:
        with self._lock:
            if self._mode is not None:
                return self._mode
            if sys.platform.startswith("linux"):
                try:
                    status = _ProcStatus()
                    (rss,), (hwm,) = status.read()
                    if rss == hwm:  # a reset now changes nothing a reader could see
                        _reset_hwm()
                    else:  # probe write access without resetting the user's high-water mark
                        open(_CLEAR_REFS, "w").close()
                    self._exact = CounterPeaks(status.read, _reset_hwm)
                    self._mode = "exact"
                    return self._mode
                except OSError as exc:
                    self._why_sampled = f"VmHWM reset unavailable ({exc.__class__.__name__}: {exc})"
            else:
                self._why_sampled = f"no VmHWM on {sys.platform}"
            self._mode = "sampled"
            return self._mode

    @property
    def exact(self) -> bool:
        return self._choose() == "exact"

    def _polled_for(self, table: dict[float, PolledPeaks], interval: float, read: Any, name: str) -> PolledPeaks:
        with self._lock:
            peaks = table.get(interval)
            if peaks is None:
                peaks = table[interval] = PolledPeaks(read, interval, name=name)
            return peaks

    def open(self, include_children: bool, interval: float) -> tuple[Any, ...]:
        """Start a window over RSS (and children's RSS if asked); returns a token for :meth:`close`."""
        own: tuple[Any, ...]
        if self._choose() == "exact" and self._exact is not None:
            own = ("exact", self._exact.open())
        else:
            peaks = self._polled_for(self._polled, interval, _psutil_rss, "gnnmon-rss")
            own = ("sampled", peaks, peaks.open())
        kids = None
        if include_children:
            peaks = self._polled_for(
                self._children, interval, lambda: (children_rss()[0],), "gnnmon-children-rss"
            )
            kids = (peaks, peaks.open())
        return own, kids, interval

    def close(self, token: tuple[Any, ...]) -> dict[str, Any]:
        """End a window: ``rss_start_bytes``, ``rss_peak_bytes``, ``rss_end_bytes`` and their source."""
        own, kids, interval = token
        if own[0] == "exact" and self._exact is not None:
            (end,), (peak,) = self._exact.close(own[1])
            (start,) = own[1].start
            source = "measured:VmHWM"
        else:
            (end,), (peak,) = own[1].close(own[2])
            (start,) = own[2].start
            source = f"sampled:psutil@{interval * 1000:g}ms"
        fields: dict[str, Any] = {}
        if kids is not None:
            (k_end,), (k_peak,) = kids[0].close(kids[1])
            (k_start,) = kids[1].start
            fields.update(
                rss_children_start_bytes=k_start,
                rss_children_peak_bytes=k_peak,
                rss_children_end_bytes=k_end,
            )
            # Own and children's peaks may fall at different times: their sum is an upper bound.
            start, peak, end = start + k_start, peak + k_peak, end + k_end
            source += f"+sampled:children@{interval * 1000:g}ms"
        fields.update(
            rss_start_bytes=start,
            rss_peak_bytes=peak,
            rss_end_bytes=end,
            rss_peak_bytes_source=source,
        )
        return fields

    @property
    def why_sampled(self) -> str:
        self._choose()
        return self._why_sampled


HOST = HostMemory()


def exact_host_memory(mmap_threshold: int = 64 * 1024) -> bool:
    """Make freed host memory leave the process at once, so RSS follows the tensors alive.

    glibc keeps freed memory for reuse (and raises its mmap threshold up to 32 MiB as it goes), so
    after a first step the process's RSS stops moving: later steps reuse the same pages and their
    peaks read as zero growth. This fixes glibc's mmap threshold (``mallopt(M_MMAP_THRESHOLD)``):
    every allocation of ``mmap_threshold`` bytes or more gets its own mapping and is returned on
    free, as CUDA's ``memory_allocated`` would show it. Process-wide and lasting (child processes
    forked later inherit it); it costs a page fault per new page. Call it first thing, before
    loading data: large blocks freed into the heap before the call can still be reused without
    touching RSS (it also asks glibc to release free heap memory now, ``malloc_trim(0)``). The same
    from the shell, for a whole run: ``MALLOC_MMAP_THRESHOLD_=65536 python train.py``. Returns
    False where it cannot be set (not glibc)."""
    global _mmap_threshold
    if isinstance(mmap_threshold, bool) or not isinstance(mmap_threshold, int) or mmap_threshold < 4096:
        raise ValueError(f"mmap_threshold must be an int of bytes >= 4096, got {mmap_threshold!r}")
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1
        if ok:
            libc.malloc_trim(0)
    except (OSError, AttributeError):
        return False
    if ok:
        _mmap_threshold = mmap_threshold
    return ok


def mmap_threshold() -> int | None:
    """The threshold :func:`exact_host_memory` set, or None (glibc's dynamic default)."""
    return _mmap_threshold
