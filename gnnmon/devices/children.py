"""Memory of this process's child processes (DataLoader workers): sampled RSS, and exact USS/PSS.

Children can only be sampled (no peak counter covers another process); psutil reads them.
"""

from __future__ import annotations

import os
from typing import Any

OWN: set[int] = set()
"""Pids of gnnmon's own processes (the timeline's sampler): children, but never counted as workers."""


def _descendants() -> list[Any]:
    """psutil Processes of this process's live descendants, gnnmon's own left out."""
    import psutil

    pids = descendant_pids(os.getpid())
    if pids is None:
        return [c for c in psutil.Process().children(recursive=True) if c.pid not in OWN]
    out = []
    for pid in pids:
        if pid in OWN:
            continue
        try:
            out.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    return out


def children_rss() -> tuple[int, int]:
    """(sum of RSS, count) over this process's live descendants, in bytes."""
    import psutil

    total = 0
    count = 0
    for child in _descendants():
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
    for child in _descendants():
        try:
            info = child.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        uss += info.uss
        pss += getattr(info, "pss", 0)
        count += 1
    return {"uss_bytes": uss, "pss_bytes": pss, "processes": count}


def descendant_pids(pid: int) -> list[int] | None:
    """The pids of a process's live descendants, from Linux's ``/proc/<pid>/task/<tid>/children``
    (a few files: ~50 µs, where psutil's ``children(recursive=True)`` reads every process's
    ``stat``: ~1.3 ms with 64 processes). None where the kernel does not offer these files."""
    out: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            if parent == pid:
                return None
            continue  # exited meanwhile
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", "rb") as f:
                    kids = f.read().split()
            except FileNotFoundError:
                if parent == pid and tid == tids[0]:
                    return None  # no CONFIG_PROC_CHILDREN
                continue
            except OSError:
                continue
            for kid in kids:
                out.append(int(kid))
                todo.append(int(kid))
    return out
