"""How often ``gnnmon compare``'s gate passes, regresses or cannot tell, on planted reruns: each cell
is ``--pairs`` comparisons of fresh planted runs (tests/report/compare/planted.py: 200 calls, 3 %
noise a call, each run's level drawn from N(1, spread)), through the package's own Comparison at a
5 % limit. Nothing depends on the machine; the counts are the same on every one.

    python benchmarks/compare_gate.py                  # 200 pairs a cell, about 4 minutes on 2 cores
    python benchmarks/compare_gate.py --pairs 20       # a quick look

Prints a markdown table: per cell (runs a side, rerun spread, planted change) the comparisons that
passed, regressed and were inconclusive.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.report.compare.planted import cell

CELLS = [(runs, spread, slower) for runs in (5, 1) for slower in (1.0, 1.10)
         for spread in (0.01, 0.02, 0.03, 0.05, 0.10)]
"""(runs a side, spread between reruns, planted factor on the new side)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=200, help="comparisons a cell (200)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    print(f"| runs a side | rerun spread | planted | passed | regressed | inconclusive |  ({args.pairs} pairs a cell, "
          "limit 5 %)")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for runs, spread, slower in CELLS:
        c = cell(runs, spread, slower, args.pairs)
        print(f"| {runs} | {100 * spread:g} % | {100 * (slower - 1):+g} % | {c['pass']} | {c['regressed']} | "
              f"{c['inconclusive']} |", flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
