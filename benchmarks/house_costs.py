"""What reading a live run and a row's probes cost, for before/after comparisons of the house.

Run: ``.venv/bin/python benchmarks/house_costs.py`` (about a minute on 2 CPU cores; ``--quick``:
seconds). ``--before PATH`` also measures the gnnmon under ``PATH`` (a checkout of an earlier
commit: ``git worktree add /tmp/before <commit>``), each side in its own fresh interpreter, the
sides alternating round by round; the figures are the medians over the rounds.

* Reading: a run of ``--rows`` rows kept in memory, then ``run.records`` (median of 5 reads) and
  ``run.report().summary()``, in ms.
* A row's cost: the full stack ``@monitor_memory_device @cuda_timed @gc_controlled`` on the CPU,
  bare and decorated calls alternating, the median of the differences, in µs; with default
  options and with ``sched=True`` (the scheduler probe), rows kept in memory; and as users write
  it (no device argument) with its rows streamed to a file (issue 65's figure).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import gnnmon
rows, calls = int(sys.argv[2]), int(sys.argv[3])

@gnnmon.cuda_timed(label="step", device="cpu")
def step(i):
    gnnmon.current_row().fields["k"] = i
    return i

with gnnmon.collect(sample=None) as run:
    for i in range(rows):
        step(i)
reads = []
for _ in range(5):
    t = time.perf_counter()
    got = run.records
    reads.append(time.perf_counter() - t)
    assert len(got) == rows and got[-1]["k"] == rows - 1
t = time.perf_counter()
run.report().summary()
report_s = time.perf_counter() - t

def bare(i):
    return i

full = gnnmon.monitor_memory_device(device="cpu")(gnnmon.cuda_timed(device="cpu")(gnnmon.gc_controlled(bare)))
row_us = {}
for sched in (False, True):
    diffs = []
    with gnnmon.collect(sample=None, sched=sched, max_records=1000):
        for _ in range(calls // 10):
            full(0)
        for i in range(calls):
            t0 = time.perf_counter_ns(); bare(i); t1 = time.perf_counter_ns(); full(i); t2 = time.perf_counter_ns()
            diffs.append((t2 - t1) - (t1 - t0))
    row_us["sched" if sched else "default"] = statistics.median(diffs) / 1e3
import tempfile  # the stack as users write it (no device argument), its rows streamed to a file
plain = gnnmon.monitor_memory_device(gnnmon.cuda_timed(gnnmon.gc_controlled(bare)))
with tempfile.TemporaryDirectory() as tmp:
    diffs = []
    with gnnmon.collect(tmp + "/rows.jsonl", sample=None):
        for _ in range(calls // 10):
            plain(0)
        for i in range(calls):
            t0 = time.perf_counter_ns(); bare(i); t1 = time.perf_counter_ns(); plain(i); t2 = time.perf_counter_ns()
            diffs.append((t2 - t1) - (t1 - t0))
    row_us["file"] = statistics.median(diffs) / 1e3
print(json.dumps({"records_ms": statistics.median(reads) * 1e3, "report_ms": report_s * 1e3, "row_us": row_us}))
"""


def measure(package: Path, rows: int, calls: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(package), str(rows), str(calls)],
                          capture_output=True, text=True, timeout=600, cwd=package)
    if done.returncode != 0:
        raise SystemExit(f"{package}: {done.stderr[-2000:]}")
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tiny size, one round")
    parser.add_argument("--before", metavar="PATH", help="a checkout of an earlier gnnmon to measure beside this one")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    rows, calls, rounds = (500, 500, 1) if args.quick else (30_000, 20_000, args.rounds)
    sides = {"this": ROOT} | ({"before": Path(args.before).resolve()} if args.before else {})
    got: dict[str, list[dict]] = {name: [] for name in sides}
    started = time.perf_counter()
    for _ in range(rounds):
        for name, package in sides.items():
            got[name].append(measure(package, rows, calls))
    print(f"{rows:,} rows read, {calls:,} calls a side per round, {rounds} round(s), medians over the rounds "
          f"({time.perf_counter() - started:.0f} s):")
    print("| side | run.records, ms | run.report().summary(), ms | row, default options, µs | row, sched=True, µs "
          "| row, no device argument, to a file, µs |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, runs in got.items():
        def med(key: str, sub: str | None = None, runs: list[dict] = runs) -> float:
            return statistics.median(r[key][sub] if sub else r[key] for r in runs)
        print(f"| {name} | {med('records_ms'):.0f} | {med('report_ms'):.0f} | {med('row_us', 'default'):.1f} | "
              f"{med('row_us', 'sched'):.1f} | {med('row_us', 'file'):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
