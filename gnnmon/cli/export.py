"""``gnnmon export KIND RUN -o OUT``: a run written for another tool (the export registry's kinds,
a package's too)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gnnmon.cli.common import read, reader_gone
from gnnmon.report import Report
from gnnmon.report.exports import EXPORTS, STDOUT, find

EXIT = "Exit status: 0 written; 2 an error (a file missing or damaged, the output not writable)."


def add(sub: Any, argv: list[str]) -> None:
    kinds = list(EXPORTS)
    whats = {name: EXPORTS[name].what for name in kinds}
    p = sub.add_parser("export", help="write a run for another tool: " + ", ".join(kinds), epilog=EXIT,
                       description="Write a run for another tool or reader. " + " ".join(
                           f"{name}: {what}." for name, what in whats.items()))
    p.add_argument("kind", choices=kinds, help="what to write: " + "; ".join(
        f"{name}: {what}" for name, what in whats.items()))
    p.add_argument("path", metavar="RUN", help="a run's .jsonl file, or a distributed job's files as for report")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help=f"the file to write (the TensorBoard export: its log folder); {STDOUT}: the standard "
                   "output, for the exports that write streams (csv, trace)")
    p.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    result = read(args.path, args.lenient)
    return 2 if result is None else export(Report(result), args.kind, args.output)


def export(report: Report, kind: str, output: str) -> int:
    """Write the export ``kind`` to ``output`` (``-``: stdout, flushed; SIGPIPE_EXIT when its reader
    went away); what was written goes to stderr, or why not (2)."""
    to_stdout = output == STDOUT
    try:
        if to_stdout and not hasattr(find(kind), "write_stream"):
            raise ValueError(f"the {kind} export writes files only: give -o a path")
        what = report.export(kind, output)
        if to_stdout:
            sys.stdout.flush()
    except BrokenPipeError:
        return reader_gone()
    except (OSError, ImportError, ValueError) as exc:
        print(f"gnnmon: cannot write {output}: {exc}", file=sys.stderr)
        return 2
    if not to_stdout:  # on stdout the export is the output: a CSV's reader gets CSV only
        print(f"gnnmon: wrote {what} to {output}", file=sys.stderr)
    return 0
