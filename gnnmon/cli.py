"""The command line: ``gnnmon report RUN``, ``gnnmon export trace|tensorboard RUN -o OUT``,
``gnnmon forecast RUN --capacity 80GiB``. Behaves like a Unix tool: the report on stdout,
errors on stderr with exit status 2, quiet when its reader goes away (``| head``)."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from gnnmon._version import __version__
from gnnmon.data.load import load
from gnnmon.errors import ReportFileError
from gnnmon.figures import MEM_PEAK, reference
from gnnmon.report import Report
from gnnmon.report.csv_export import write_csv
from gnnmon.report.exports import EXPORTS

SIGPIPE_EXIT = 141  # 128 + SIGPIPE: what a shell reports for a tool whose reader closed the pipe

DESCRIPTION = "Read a gnnmon run (a JSON Lines file, or a distributed job's files) and print its report."


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gnnmon", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"gnnmon {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rep = sub.add_parser("report", help="print the report of a run", description=(
        "Print the report of a run: per-label figures, step analysis, GC, spikes, energy, and for a "
        "distributed job the cross-rank section."))
    rep.add_argument("path", metavar="RUN", help="a run's .jsonl file; for a distributed job the path its "
                     "ranks were given, any rank's file, a glob of them or their folder")
    rep.add_argument("--format", choices=("markdown", "csv"), default="markdown",
                     help="markdown: the report (default); csv: one line per row, lists and dicts as JSON")
    rep.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    rep.add_argument("--html", metavar="OUT", help="also write the report as one self-contained page to open in a "
                     "browser (timeline, memory per call, the whole report; works offline)")
    rep.add_argument("--by", metavar="MARKER", help="one report per value of a marker the rows carry (e.g. "
                     "config), in natural order; spikes judged within each")
    exp = sub.add_parser("export", help="write a run for another tool: " + ", ".join(EXPORTS),
                         description="Write a run for another tool or reader. " + " ".join(
                             f"{name}: {e.what}." for name, e in EXPORTS.items()))
    exp.add_argument("kind", choices=tuple(EXPORTS), help="what to write: " + "; ".join(
        f"{name}: {e.what}" for name, e in EXPORTS.items()))
    exp.add_argument("path", metavar="RUN", help="a run's .jsonl file, or a distributed job's files as for report")
    exp.add_argument("-o", "--output", required=True, metavar="OUT",
                     help="the file to write (the TensorBoard export: its log folder)")
    exp.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    fc = sub.add_parser("forecast", help="fit a run's memory model and print the batch budgets for a device",
                        description=(
        f"Fit the step's peak memory ({MEM_PEAK.name}) against its batches' nodes, edges and graphs, "
        "forecast the run's own batches, and with --capacity print the largest DynamicBatchSampler "
        "max_num and batch size whose worst batch stays under --fraction of it."))
    fc.add_argument("path", metavar="RUN", help="a run's .jsonl file, or a distributed job's files as for report")
    fc.add_argument("--capacity", metavar="SIZE", help="the device's memory: 80GiB, 80GB, bytes, or a device (cuda:0)")
    fc.add_argument("--label", help="the step to model (default: the label with most rows that carry a batch shape)")
    fc.add_argument("--fraction", type=float, default=0.9, help="share of the capacity a batch may use (0.9)")
    fc.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    sub.add_parser("fields", help="print the reference of every field a row can hold (markdown)",
                   description="Print every field a row can hold: its unit, meaning and logged name.")
    args, extra = parser.parse_known_args(argv)
    if extra:  # the command's own usage, and the option a typo was near
        command = sub.choices[args.command]
        options = [o for a in command._actions for o in a.option_strings]
        near = [f"{x}: did you mean {m[0]}?" for x in extra if (m := difflib.get_close_matches(x, options, 1))]
        command.error(f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(near)})" if near else ""))
    for stream in (sys.stdout, sys.stderr):  # a name the OS decoded with surrogateescape: shown escaped
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    formatted = warnings.formatwarning
    warnings.formatwarning = _one_line_warning  # how Python's own printing formats them, while the command runs
    try:
        return _command(args)
    finally:
        warnings.formatwarning = formatted


def _command(args: argparse.Namespace) -> int:
    if args.command == "fields":
        print(reference(), end="")
        return 0

    bar = _progress_bar(args.path)
    try:
        run = load(args.path, strict=not args.lenient, progress=bar.update if bar is not None else None)
    except (ReportFileError, OSError) as exc:
        print(f"gnnmon: {exc}", file=sys.stderr)
        return 2
    finally:
        if bar is not None:
            bar.close()
    report = Report(run)
    if args.command == "forecast":
        return _forecast(report, args)
    if args.command == "export":
        return _export(report, args.kind, args.output)
    if args.html is not None and _export(report, "html", args.html):
        return 2
    try:
        if args.by is not None:
            report.groups(args.by)  # a marker no row carries: a clear error before any output
    except ValueError as exc:
        print(f"gnnmon: {exc}", file=sys.stderr)
        return 2
    try:
        if args.format == "csv":
            write_csv(run, sys.stdout)
        else:
            sys.stdout.write(report.markdown(by=args.by))
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (``| head``): no traceback, and none at exit when Python flushes stdout.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return SIGPIPE_EXIT
    return 0


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      line: str | None = None) -> str:
    """A warning as the CLI's other messages say things: one line, no source path."""
    return f"gnnmon: warning: {message}\n"


def _progress_bar(path: str) -> Any:
    """A progress bar on stderr for reading ``path``, shown once reading has taken a second and
    only on a terminal (tqdm's ``delay``; None without tqdm)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    total = os.path.getsize(path) if os.path.isfile(path) else None
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="gnnmon: reading", delay=1.0,
                file=sys.stderr, leave=False, disable=None)


def _forecast(report: Any, args: argparse.Namespace) -> int:
    """``gnnmon forecast``: the model, the run's own batches forecast, the budgets."""
    from gnnmon.forecast import forecast

    try:
        model = report.memory_model(args.label, MEM_PEAK.name)
        if not model.trusted:
            print(model.summary())
            return 1
        part = report.table.parts[model.label]
        rows = [r for r in map(part.row, range(part.n)) if r.get("error") is None]
        print(forecast(rows, model, args.capacity, progress=False).summary(args.fraction))
    except ValueError as exc:
        print(f"gnnmon: {exc}", file=sys.stderr)
        return 2
    return 0


def _export(report: Any, kind: str, output: str) -> int:
    try:
        what = report.export(kind, output)
    except (OSError, ImportError) as exc:
        print(f"gnnmon: cannot write {output}: {exc}", file=sys.stderr)
        return 2
    print(f"gnnmon: wrote {what} to {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
