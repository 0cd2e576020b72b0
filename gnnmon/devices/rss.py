"""This process's resident memory (RSS) now, and its high-water mark, read cheaply on Linux.

* now: ``/proc/self/statm`` (its second number, in pages), from a descriptor kept open (1-2 µs);
* high-water mark: ``getrusage(RUSAGE_SELF).ru_maxrss`` (about 1 µs). On Linux it is
  ``max(VmHWM, signal->maxrss)``: VmHWM is the mark that writing ``5`` to
  ``/proc/self/clear_refs`` resets to the current RSS (Linux >= 4.0), and ``signal->maxrss`` holds
  the mark of the image this process was ``exec``-ed from (and of thread groups that died), which
  no reset lowers. After the first reset :class:`RssCounter` compares the two once; where that
  floor lies above VmHWM, a reading at or under the floor is taken from ``/proc/self/status``
  instead (exact, about 8 µs);
* reset: one ``write`` of ``5`` on a kept-open ``/proc/self/clear_refs`` (about 1 µs).

Descriptors are reopened in a forked child (``/proc/self`` is resolved when a file is opened, so
the parent's descriptors would describe the parent): ``os.register_at_fork`` marks them stale,
so no read has to ask for the pid.

The reads and the reset keep the GIL (libc's ``pread``/``write`` called through ``ctypes.PyDLL``,
where ``os.pread`` releases it): a call that releases the GIL on the step's path waits, when
another thread is busy in Python (gnnmon's writer encoding rows, a loader thread), until that
thread gives the GIL back — up to ``sys.getswitchinterval()`` (5 ms) for a 2 µs read. Measured on
the 2-core VM (Python 3.11): a reading with a thread spinning beside it, median 5.2 ms through
``os.pread``, 6 µs here; with nothing beside it, 1.5 µs here against 1.0 µs through ``os.pread``.
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import threading
import weakref
from collections.abc import Callable

_getrusage = resource.getrusage
_SELF = resource.RUSAGE_SELF


def _gil_holding_io() -> tuple[Callable[[int], Callable[[int], bytes]], Callable[[int, bytes], int]]:
    """``reader(n)`` -> ``read(fd)``, up to ``n`` bytes of a text file from offset 0, and
    ``write(fd, data)``, both keeping the GIL: libc's through ``ctypes.PyDLL``; ``os.pread`` /
    ``os.write`` where libc cannot be loaded that way."""
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
        c_pread, c_write = libc.pread, libc.write
    except (OSError, AttributeError):
        return (lambda n: lambda fd: os.pread(fd, n, 0)), os.write
    c_pread.restype = c_write.restype = ctypes.c_ssize_t
    # No argtypes for pread: converting four arguments through them costs 0.3 µs of a 1.5 µs
    # read. The fd goes as a C int; the size and the offset as ready-made c_size_t / c_long.
    c_write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    zero = ctypes.c_long(0)

    def reader(n: int) -> Callable[[int], bytes]:
        buffer = ctypes.c_char * (n + 1)  # one byte more than is read: the text's end stays a NUL
        size = ctypes.c_size_t(n)

        def read(fd: int) -> bytes:
            """Up to ``n`` bytes of a text file from offset 0, into a buffer of this call's own (a
            signal handler that reads in between has its own)."""
            buf = buffer()
            got = c_pread(fd, buf, size, zero)
            if got < 0:
                err = ctypes.get_errno() or 5  # EIO when libc left no errno
                raise OSError(err, os.strerror(err))
            return buf.value  # up to the first NUL: the zeroed buffer's, at ``got``

        return read

    def write(fd: int, data: bytes) -> int:
        got = c_write(fd, data, len(data))
        if got < 0:
            err = ctypes.get_errno() or 5
            raise OSError(err, os.strerror(err))
        return int(got)

    return reader, write


reader_holding_gil, write_holding_gil = _gil_holding_io()
read_statm = reader_holding_gil(64)
STATUS_BYTES = 8191
"""What a status reading reads first (its text is about 1.5 KiB on Linux)."""
read_status = reader_holding_gil(STATUS_BYTES)


def _mark_stale(ref: weakref.ref[RssCounter]) -> None:
    counter = ref()
    if counter is not None:
        counter._stale = True

STATM = "/proc/self/statm"
STATUS = "/proc/self/status"
CLEAR_REFS = "/proc/self/clear_refs"


def status_figures(fd: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in bytes from an open ``/proc/self/status`` descriptor: each figure found by
    one search of the text (a reading on the step's path where :class:`RssCounter` has a floor)."""
    text = read_status(fd)
    if len(text) >= STATUS_BYTES:  # a longer text (a Groups line of hundreds of groups): read whole
        text = os.pread(fd, 1 << 20, 0)
    hwm = _STATUS_HWM.search(text)
    rss = _STATUS_RSS.search(text)
    if rss is None or hwm is None:
        raise OSError("VmRSS/VmHWM missing from /proc/self/status")
    return int(rss[1]) * 1024, int(hwm[1]) * 1024


_STATUS_HWM = re.compile(rb"^VmHWM:\s*(\d+) kB$", re.MULTILINE)  # whole lines: a text cut short never gives a number
_STATUS_RSS = re.compile(rb"^VmRSS:\s*(\d+) kB$", re.MULTILINE)


class RssCounter:
    """RSS and its resettable high-water mark, in bytes, as a peak counter for
    :class:`~gnnmon.devices.peaks.CounterPeaks`: ``read()`` -> ``((rss,), (hwm,))``, ``reset()``.
    Opening it checks that the files exist and that ``clear_refs`` can be written (``OSError``)."""

    def __init__(self) -> None:
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._pid = -1
        self._statm = self._clear = self._status = -1
        self._stale = True
        self._lock = threading.RLock()
        self.floor: int | None = None  # getrusage's floor above VmHWM, known after the first reset
        self.status_reads = 0  # readings that needed /proc/self/status (the floor case)
        self._open()
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _mark_stale(ref))

    def _open(self) -> None:
        with self._lock:
            pid = os.getpid()
            if pid == self._pid:
                return
            for fd in (self._statm, self._clear, self._status):
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self._statm = os.open(STATM, os.O_RDONLY)
            self._status = os.open(STATUS, os.O_RDONLY)
            self._clear = os.open(CLEAR_REFS, os.O_WRONLY)
            self._pid = pid
            self._stale = False

    def read(self) -> tuple[tuple[int], tuple[int]]:
        """``((rss,), (high-water mark,))`` in bytes."""
        rss, hwm = self.now()
        return (rss,), (hwm,)

    def now(self) -> tuple[int, int]:
        """``(rss, high-water mark)`` in bytes: one read of ``statm`` and one ``getrusage``."""
        if self._stale:
            self._open()
        rss = int(read_statm(self._statm).split()[1]) * self._page
        hwm = _getrusage(_SELF).ru_maxrss * 1024
        floor = self.floor
        if floor and hwm <= floor:  # getrusage cannot see below its floor: ask the kernel's VmHWM
            self.status_reads += 1
            hwm = status_figures(self._status)[1]
        return rss, hwm if hwm > rss else rss

    def reset(self) -> None:
        """Set the high-water mark to the current RSS."""
        if self._stale:
            self._open()
        write_holding_gil(self._clear, b"5")
        if self.floor is None:
            ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            vm = status_figures(self._status)[1]
            self.floor = ru if ru > vm else 0


def psutil_rss() -> tuple[int]:
    """RSS in bytes through psutil (any OS; about 10 µs)."""
    import psutil

    return (psutil.Process().memory_info().rss,)
