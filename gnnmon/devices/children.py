"""Memory of this process's child processes (DataLoader workers): sampled RSS, and exact USS/PSS.

Children can only be sampled (no peak counter covers another process); psutil reads them.
"""

from __future__ import annotations

import os
from typing import Any

OWN: set[int] = set()
"""Pids of gnnmon's own processes (the timeline's sampler): children, but never counted as workers."""

PYTHON_HELPERS = ("from multiprocessing.resource_tracker import", "from multiprocessing.forkserver import")
"""How the helper processes Python's multiprocessing starts begin their command line (its resource
tracker and its forkserver, ``python -c "from multiprocessing.... import main; main(...)"``): a
process's children that outlive every worker, hold no tensors and are never counted as workers.
The workers a forkserver forks inherit its command line; they are told apart by their parent."""

_helper_of: dict[int, bool] = {}
"""pid -> whether it is one of Python's helpers, read once per process (its command line is fixed
once it has run exec; a process under a second old is asked again)."""


def _helper_cmdline(proc: Any) -> bool:
    import psutil

    try:
        cmdline = proc.cmdline()
    except psutil.Error:  # exited, or not ours to read: a worker as far as anyone can tell
        return False
    return "-c" in cmdline[:-1] and cmdline[cmdline.index("-c") + 1].startswith(PYTHON_HELPERS)


def is_python_helper(proc: Any) -> bool:
    """Whether a psutil Process is multiprocessing's resource tracker or forkserver, not a worker
    the forkserver forked (cached by pid)."""
    known = _helper_of.get(proc.pid)
    if known is not None:
        return known
    helper = _helper_cmdline(proc)
    if helper:
        import psutil

        try:
            parent = proc.parent()
        except psutil.Error:
            parent = None
        helper = parent is None or not _helper_cmdline(parent)
    if not helper and _young(proc):  # perhaps between its fork and its exec: ask again next time
        return False
    if len(_helper_of) > 4096:  # pids of long-gone processes
        _helper_of.clear()
    _helper_of[proc.pid] = helper
    return helper


def _young(proc: Any) -> bool:
    """Whether a process started under a second ago (or its start cannot be read)."""
    import time

    import psutil

    try:
        return time.time() - proc.create_time() < 1.0
    except psutil.Error:
        return True


def _descendants() -> list[Any]:
    """psutil Processes of this process's live descendants, gnnmon's own and Python's helpers left out."""
    import psutil

    pids = descendant_pids(os.getpid())
    if pids is None:
        return [c for c in psutil.Process().children(recursive=True) if c.pid not in OWN and not is_python_helper(c)]
    out = []
    for pid in pids:
        if pid in OWN:
            continue
        try:
            proc = psutil.Process(pid)
        except psutil.NoSuchProcess:
            continue
        if not is_python_helper(proc):
            out.append(proc)
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
