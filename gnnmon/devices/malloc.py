"""glibc's allocator settings that decide whether freed host memory leaves the process."""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # glibc mallopt parameters
TRIM_THRESHOLD_BYTES = 128 * 1024
"""The free memory at the top of a glibc heap beyond which ``free`` gives it back (glibc's default,
which its dynamic threshold may have raised to 2 × a freed mapping, up to 64 MiB, before the call)."""
TOP_PAD_BYTES = 128 * 1024
"""What glibc adds to each heap extension and keeps when it trims (its default)."""
_mmap_threshold: int | None = None


def exact_host_memory(mmap_threshold: int = 64 * 1024) -> bool:
    """Make freed host memory leave the process at once, so RSS follows the tensors alive.

    glibc keeps freed memory for reuse (and raises its mmap threshold up to 32 MiB as it goes), so
    after a first step the process's RSS stops moving: later steps reuse the same pages and their
    peaks read as zero growth. This fixes glibc's mmap threshold (``mallopt(M_MMAP_THRESHOLD)``):
    every allocation of ``mmap_threshold`` bytes or more gets its own mapping and is returned on
    free, as CUDA's ``memory_allocated`` would show it. Process-wide and lasting (child processes
    forked later inherit it); it costs a page fault per new page. Call it first thing, before
    loading data: large blocks freed into the heap before the call can still be reused without
    touching RSS (it also asks glibc to release free heap memory now, ``malloc_trim(0)``). It sets
    the trim threshold and top pad too (:data:`TRIM_THRESHOLD_BYTES`, :data:`TOP_PAD_BYTES`): fixing
    the mmap threshold freezes glibc's dynamic trim threshold wherever frees before the call raised
    it (up to 64 MiB kept free at the heap's top), so at most their sum stays free on each heap. The
    same from the shell, for a whole run: ``MALLOC_MMAP_THRESHOLD_=65536 MALLOC_TRIM_THRESHOLD_=131072
    python train.py``. Returns False where it cannot be set (not glibc).

    Its cost, measured on issue 42's GraphSAGE loop (``benchmarks/host_memory.py``, 2-core VM, paired
    against glibc's defaults in alternating processes): 1.77x the wall time and 1.63x the CPU time
    of a step, from 5.3x the page faults. A 1 or 4 MiB threshold costs about as much and under-reads
    blocks below it (16 MiB planted as 256 KiB tensors read 0.79 and 0.68 of it); see
    ``docs/memory.md``; the trim threshold and top pad add nothing measurable to it (1.52x against
    1.62x wall for the mmap threshold alone, the same page faults: ``docs/performance.md``). Call it
    where per-step and per-layer peaks are wanted, not in a run timed for speed."""
    global _mmap_threshold
    if isinstance(mmap_threshold, bool) or not isinstance(mmap_threshold, int) or mmap_threshold < 4096:
        raise ValueError(f"mmap_threshold must be an int of bytes >= 4096, got {mmap_threshold!r}")
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1
        ok = ok and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
        ok = ok and libc.mallopt(_M_TOP_PAD, TOP_PAD_BYTES) == 1
        if ok:
            libc.malloc_trim(0)
    except (OSError, AttributeError):
        return False
    if ok:
        _mmap_threshold = mmap_threshold
    return ok


def mmap_threshold() -> int | None:
    """The threshold :func:`exact_host_memory` set, else the one the environment gave glibc as the
    process started (``MALLOC_MMAP_THRESHOLD_``, the shell's route), else None (glibc's dynamic
    default)."""
    if _mmap_threshold is not None:
        return _mmap_threshold
    try:
        given = int(os.environ.get("MALLOC_MMAP_THRESHOLD_", ""))
    except ValueError:  # unset or not a number: glibc ignores it too
        return None
    return given if given >= 0 and sys.platform.startswith("linux") else None
