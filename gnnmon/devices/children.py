"""Memory of this process's child processes (DataLoader workers): sampled RSS, and exact USS/PSS.

Children can only be sampled (no peak counter covers another process); psutil reads them.
"""

from __future__ import annotations


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
