"""``gnnmon report FILE``: print a run's report; exit 2 with a clear message on a bad file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gnnmon.errors import ReportFileError
from gnnmon.record.load import load


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gnnmon", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="print the summary of a run's JSON Lines file")
    rep.add_argument("path")
    rep.add_argument("--format", choices=("markdown", "csv"), default="markdown")
    rep.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    args = parser.parse_args(argv)
    try:
        run = load(args.path, strict=not args.lenient)
    except (ReportFileError, FileNotFoundError) as exc:
        print(f"gnnmon: {exc}", file=sys.stderr)
        return 2
    report = run.report()
    if args.format == "csv":
        report.to_frame().to_csv(sys.stdout, index=False)
    else:
        sys.stdout.write(report.markdown())
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
