"""``gnnmon report RUN``: the report on stdout (markdown or CSV), the page with ``--html``, one
report per value of a marker with ``--by``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gnnmon.cli.common import read, write
from gnnmon.cli.export import export
from gnnmon.report import Report
from gnnmon.report.exports import STDOUT

EXIT = "Exit status: 0 the report printed; 2 an error (a file missing or damaged, bad options)."


def add(sub: Any, argv: list[str]) -> None:
    p = sub.add_parser("report", help="print the report of a run", epilog=EXIT, description=(
        "Print the report of a run: per-label figures, step analysis, GC, spikes, energy, and for a "
        "distributed job the cross-rank section."))
    p.add_argument("path", metavar="RUN", help="a run's .jsonl file; for a distributed job the path its "
                   "ranks were given, any rank's file, a glob of them or their folder")
    p.add_argument("--format", choices=("markdown", "csv"), default="markdown",
                   help="markdown: the report (default); csv: one line per row, lists and dicts as JSON "
                   "(the same as gnnmon export csv RUN -o -)")
    p.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    p.add_argument("--html", metavar="OUT", help="also write the report as one self-contained page to open in a "
                   "browser (timeline, memory per call, the whole report; works offline)")
    p.add_argument("--by", metavar="MARKER", help="one report per value of a marker the rows carry (e.g. "
                   "config), in natural order; spikes judged within each")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    result = read(args.path, args.lenient)
    if result is None:
        return 2
    report = Report(result)
    if args.html is not None and export(report, "html", args.html):
        return 2
    try:
        if args.by is not None:
            report.groups(args.by)  # a marker no row carries: a clear error before any output
    except ValueError as exc:
        print(f"gnnmon: {exc}", file=sys.stderr)
        return 2
    if args.format == "csv":
        return export(report, "csv", STDOUT)
    return write(report.markdown(by=args.by))
