"""How finely the CPU backend's peaks resolve on this machine: planted allocations of 64 KiB to
4 MiB, each filled by 1 thread or by every core, read through ``memory_scope`` in a fresh process
with ``exact_host_memory()``.

    python benchmarks/rss_resolution.py [--repeats 30]

Since Linux 6.2 a process's RSS counters are per-CPU and folded into the total in batches of
max(32, 2 × online CPUs) pages per CPU (``lib/percpu_counter.c``); VmHWM is taken from that total.
A reading therefore lags the truth by up to (CPUs that touched pages) × batch pages: the
resolution coarsens with the number of cores, and with the number of threads that fill memory.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KiB = 1024
SIZES = [64 * KiB, 256 * KiB, 1024 * KiB, 4096 * KiB]


def bound_bytes(cpus: int, touching: int) -> int:
    """The kernel's worst lag: ``touching`` CPUs each holding up to one batch of pages unfolded."""
    return touching * max(32, 2 * cpus) * os.sysconf("SC_PAGE_SIZE")


def measure(repeats: int) -> list[dict[str, float]]:
    import torch

    import gnnmon

    gnnmon.exact_host_memory()
    cores = os.cpu_count() or 1
    out = []
    for threads in sorted({1, cores}):
        torch.set_num_threads(threads)
        for size in SIZES:
            errors = []
            for _ in range(repeats):
                with gnnmon.collect():
                    with gnnmon.memory_scope(device="cpu") as f:
                        t = torch.empty(size, dtype=torch.uint8)
                        t.fill_(1)  # touched by up to `threads` threads
                        del t
                errors.append((f["mem_peak_delta_bytes"] - size) / KiB)
            out.append({"threads": threads, "size_kib": size / KiB, "min": min(errors),
                        "median": statistics.median(errors), "max": max(errors)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    print(f"Command: `python benchmarks/rss_resolution.py --repeats {args.repeats}` · {platform.platform()}, "
          f"{cores} cores, Python {platform.python_version()}\n")
    print("| threads filling | planted KiB | error min KiB | median | max |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for r in measure(args.repeats):
        print(f"| {r['threads']} | {r['size_kib']:.0f} | {r['min']:+.0f} | {r['median']:+.0f} | {r['max']:+.0f} |")
    print("\n| online CPUs | batch (pages) | worst lag, 1 CPU touching | worst lag, every CPU touching |")
    print("| ---: | ---: | ---: | ---: |")
    for n in (2, 4, 8, 16, 32, 64, 128):
        one, every = bound_bytes(n, 1), bound_bytes(n, n)
        print(f"| {n} | {max(32, 2 * n)} | {one / KiB:,.0f} KiB | {every / 2**20:,.1f} MiB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
