"""``gnnmon compare BASE... -- NEW...``: reruns of a change against reruns of its base, for CI; the
comparison on stdout, each line that regressed or cannot be decided on stderr, and its exit status
(:meth:`gnnmon.report.compare.comparison.Comparison.status`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gnnmon.cli.common import read, share, write
from gnnmon.report.compare.comparison import INCONCLUSIVE, RUNS_ADVISED, Comparison, run_name
from gnnmon.report.compare.comparison_markdown import decided
from gnnmon.report.compare.gate import RERUN_SPREAD

NEW_SIDE = "--new-side-runs"
"""The option ``--`` between two sides of ``gnnmon compare`` becomes (the runs after it)."""

EXIT = (f"Exit status: 0 passed (every judged line's upper bound under its limit, or no limit given); 1 regressed "
        f"(a lower bound over its limit: named); {INCONCLUSIVE} inconclusive (nothing regressed, but the runs cannot "
        "tell whether a line is within its limit: named, with the runs a side that would decide it; --inconclusive "
        "pass or fail makes this 0 or 1); 2 an error.")


def add(sub: Any, argv: list[str]) -> None:
    p = sub.add_parser("compare", help="compare two runs, per label and phase, for CI", epilog=EXIT,
                       usage="gnnmon compare [options] BASE NEW\n       gnnmon compare [options] BASE... -- NEW...",
                       description=(
                           "Compare two runs per label and phase: time per step and per 1,000 nodes and edges (bigger "
                           "batches are not a regression), peak memory and the memory models, GC, recompilations, "
                           "data wait, energy per graph; each change judged against both runs' noise."))
    p.add_argument("runs", metavar="RUN", nargs="+", help="BASE... -- NEW...: reruns of the code to compare "
                   f"against and of the code to judge ({RUNS_ADVISED} a side for CI: each run a .jsonl file or a "
                   "job's files), their spread measured between them; or BASE NEW, one run a side, whose spread "
                   "is assumed (--rerun-spread)")
    p.add_argument("--max-slowdown", metavar="PCT", type=share, help="exit 1 when a step is slower by more than "
                   "this (5%% or 0.05) beyond doubt: per 1,000 nodes and edges where every run has shapes (per "
                   "step where the change altered the graphs: as many graphs a step, other nodes and edges), on "
                   "its CPU time where every run's step ran on one thread and recorded it (collect(sched=True))")
    p.add_argument("--max-memory-growth", metavar="PCT", type=share, help="exit 1 when peak memory (the memory "
                   "models' forecast of the same batch where both can be trusted) grows by more than this")
    p.add_argument("--inconclusive", choices=("status", "pass", "fail"), default="status", help=(
        f"the exit status when the runs cannot decide: status (default) exits {INCONCLUSIVE}, pass 0, fail 1"))
    p.add_argument("--rerun-spread", metavar="PCT", type=share, default=RERUN_SPREAD, help=(
        "the spread between reruns assumed where each side has one run (default "
        f"{100 * RERUN_SPREAD:g}%%); with two runs or more a side it is measured instead"))
    p.add_argument("--format", choices=("markdown", "json"), default="markdown", help="markdown (default) or json")
    p.add_argument("--html", metavar="OUT", help="also write the comparison as one self-contained page")
    p.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    p.add_argument(NEW_SIDE, dest="new_runs", nargs="+", default=None, help=argparse.SUPPRESS)
    p.set_defaults(run=run)


def sides(argv: list[str]) -> list[str]:
    """``compare BASE... -- NEW...``: the runs after the marker made the new side's option."""
    if argv[:1] == ["compare"] and "--" in argv:
        at = argv.index("--")
        return argv[:at] + [NEW_SIDE] + argv[at + 1:]
    return argv


def run(args: argparse.Namespace) -> int:
    """1 when a judged line regressed (each named on stderr); when one is inconclusive (named, with
    the runs a side that would decide it), :data:`INCONCLUSIVE` or what ``--inconclusive`` says; 2
    when a run cannot be read or the page cannot be written."""
    if args.new_runs:
        bases, news = args.runs, args.new_runs
    elif len(args.runs) == 2:
        bases, news = args.runs[:1], args.runs[1:]
    else:
        print(f"gnnmon: compare takes BASE NEW, or BASE... -- NEW... (several runs a side, -- between them); "
              f"got {len(args.runs)} run(s) and no --", file=sys.stderr)
        return 2
    results = [read(path, args.lenient) for path in [*bases, *news]]
    if any(r is None for r in results):
        return 2
    base, new = results[:len(bases)], results[len(bases):]
    names = (run_name(base[0].manifest, "BASE") if len(base) == 1 else "BASE",
             run_name(new[0].manifest, "NEW") if len(new) == 1 else "NEW")
    comparison = Comparison(base, new, *names, max_slowdown=args.max_slowdown,
                            max_memory_growth=args.max_memory_growth, rerun_spread=args.rerun_spread)
    if args.html is not None:
        try:
            print(f"gnnmon: wrote {comparison.to_html(args.html)} to {args.html}", file=sys.stderr)
        except OSError as exc:
            print(f"gnnmon: cannot write {args.html}: {exc}", file=sys.stderr)
            return 2
    text = json.dumps(comparison.to_dict(), indent=1, default=str) + "\n" if args.format == "json" \
        else comparison.markdown()
    code = write(text)
    if code:
        return code
    for d in comparison.decisions():
        if d["decision"] != "pass":
            print(f"gnnmon: {d['decision']}: {decided(d)}", file=sys.stderr)
    return comparison.status(args.inconclusive)
