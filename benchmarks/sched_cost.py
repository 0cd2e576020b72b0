"""What ``collect(sched=True)`` (each top-level row reads its thread's CPU time and context
switches at its start and end) adds to a decorated call: paired and interleaved, the full stack
on an identity function, one call with the counters off and one with them on, alternating inside
one active run; the figure is the median of the differences.

    python benchmarks/sched_cost.py [--pairs 20000]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device


@monitor_memory_device
@cuda_timed
@gc_controlled
def step(x: torch.Tensor) -> torch.Tensor:
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    args = parser.parse_args()
    x, pc = torch.ones(8), time.perf_counter_ns
    with tempfile.TemporaryDirectory() as d, gnnmon.collect(os.path.join(d, "run.jsonl"), sched=True) as run:
        for _ in range(2000):
            step(x)
        diffs = []
        for _ in range(args.pairs):
            run.sched = False
            t0 = pc()
            step(x)
            t1 = pc()
            run.sched = True
            step(x)
            t2 = pc()
            diffs.append((t2 - t1) - (t1 - t0))
    print(f"Command: `python benchmarks/sched_cost.py --pairs {args.pairs}` · {platform.platform()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"sched on minus off, per decorated call (full stack): median {statistics.median(diffs) / 1e3:.2f} µs "
          f"over {len(diffs)} pairs")


if __name__ == "__main__":
    main()
