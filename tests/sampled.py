"""Holding a planted allocation until a polling thread has sampled it: where a peak is only sampled
(MPS, a host without an exact high-water mark), a fixed hold is slept through by a poller that a
busy machine descheduled, so the tests wait for the poller's reads instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def held_until_sampled(reads: Callable[[], int]) -> None:
    """Return once the polling thread has read the sampled figure twice from now (``reads``: how
    many reads so far): its first read then began after now, so what was allocated before is in
    it, and is folded into every open window (the thread reads again only after folding). Waited
    for, however late the thread runs (60 s at most)."""
    since = reads()
    deadline = time.monotonic() + 60
    while reads() < since + 2:
        assert time.monotonic() < deadline, "the polling thread never read the figure"
        time.sleep(0.001)


def count_rss_reads(monkeypatch: Any, pid: int | None = None) -> list[int]:
    """Count the host's sampled RSS reads (psutil's ``Process.memory_info``) for one test, of
    ``pid`` only if given (a sample of children's RSS reads each child in turn): the returned
    list's one item is the count so far."""
    import psutil

    reads = [0]
    memory_info = psutil.Process.memory_info

    def counted(self: Any) -> Any:
        if pid is None or self.pid == pid:
            reads[0] += 1
        return memory_info(self)

    monkeypatch.setattr(psutil.Process, "memory_info", counted)
    return reads
