"""What ``collect(sched=True)`` (each top-level row reads its thread's CPU time, context switches
and run-queue time at its start and end) adds to a decorated call: paired and interleaved, the
full stack on an identity function: rounds of three calls inside one active run, with the counters
off, on, and on without the run-queue read, in a shuffled order; the figures are the medians of
the differences within a round.

    python benchmarks/sched_cost.py [--rounds 20000]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device
from gnnmon.devices import sched


@monitor_memory_device
@cuda_timed
@gc_controlled
def step(x: torch.Tensor) -> torch.Tensor:
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    args = parser.parse_args()
    x, pc = torch.ones(8), time.perf_counter_ns
    with tempfile.TemporaryDirectory() as d, gnnmon.collect(os.path.join(d, "run.jsonl"), sched=True) as run:
        for _ in range(2000):
            step(x)
        has_queue = sched.QUEUED_AVAILABLE
        settings = {"off": (False, has_queue), "on": (True, has_queue), "no queue": (True, False)}
        order, diffs, queued = list(settings), [], []
        for _ in range(args.rounds):
            random.shuffle(order)  # no call always first or last in its round
            took = {}
            for name in order:
                run.sched, sched.QUEUED_AVAILABLE = settings[name]
                t0 = pc()
                step(x)
                took[name] = pc() - t0
            diffs.append(took["on"] - took["off"])
            queued.append(took["on"] - took["no queue"])
        sched.QUEUED_AVAILABLE = has_queue
    print(f"Command: `python benchmarks/sched_cost.py --rounds {args.rounds}` · {platform.platform()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"sched on minus off, per decorated call (full stack): median {statistics.median(diffs) / 1e3:.2f} µs "
          f"over {len(diffs)} rounds")
    if has_queue:
        print(f"of which the run-queue read (schedstat), on minus on without it: median "
              f"{statistics.median(queued) / 1e3:.2f} µs")
    else:
        print("no run-queue time on this kernel (/proc/thread-self/schedstat)")


if __name__ == "__main__":
    main()
