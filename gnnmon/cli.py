"""The command line: ``gnnmon report RUN``, ``gnnmon export trace|tensorboard RUN -o OUT``,
``gnnmon forecast RUN --capacity 80GiB``, ``gnnmon compare BASE NEW --max-slowdown 5%``. Behaves like a Unix tool: the report on stdout,
errors on stderr with exit status 2, quiet when its reader goes away (``| head``)."""

from __future__ import annotations

import argparse
import difflib
import json
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
from gnnmon.report.compare.comparison import RUNS_ADVISED, Comparison, run_name
from gnnmon.report.compare.gate import RERUN_SPREAD
from gnnmon.report.compare.text import decided
from gnnmon.report.exports import EXPORTS, STDOUT, find, names

SIGPIPE_EXIT = 141  # 128 + SIGPIPE: what a shell reports for a tool whose reader closed the pipe

DESCRIPTION = "Read a gnnmon run (a JSON Lines file, or a distributed job's files) and print its report."

NEW_SIDE = "--new-side-runs"
"""The option ``--`` between two sides of ``gnnmon compare`` becomes (the runs after it)."""

NO_MODEL = 3
"""``gnnmon forecast``'s exit status when the run's memory model cannot be trusted: it says why and
what would make one, and forecasts nothing (not an error of the command: 2 is)."""
INCONCLUSIVE = 4
"""``gnnmon compare``'s exit status when nothing regressed but a judged line's bounds straddle its
limit: the runs cannot tell (it says which, and how many runs a side would decide it);
``--inconclusive pass|fail`` makes it 0 or 1."""

EXITS = {
    "report": "Exit status: 0 the report printed; 2 an error (a file missing or damaged, bad options).",
    "export": "Exit status: 0 written; 2 an error (a file missing or damaged, the output not writable).",
    "forecast": f"Exit status: 0 the forecast printed; {NO_MODEL} no trusted memory model (the run's batches do not "
                "vary enough, or too few: it says what to measure); 2 an error.",
    "compare": f"Exit status: 0 passed (every judged line's upper bound under its limit, or no limit given); 1 "
               f"regressed (a lower bound over its limit: named); {INCONCLUSIVE} inconclusive (nothing regressed, "
               "but the runs cannot tell whether a line is within its limit: named, with the runs a side that "
               "would decide it; --inconclusive pass or fail makes this 0 or 1); 2 an error.",
    "fields": "Exit status: 0.",
}
"""What each command's exit status means, shown at the end of its ``--help``."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gnnmon", description=DESCRIPTION,
                                     epilog="Each command's --help ends with what its exit status means.")
    parser.add_argument("--version", action="version", version=f"gnnmon {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rep = sub.add_parser("report", help="print the report of a run", epilog=EXITS["report"], description=(
        "Print the report of a run: per-label figures, step analysis, GC, spikes, energy, and for a "
        "distributed job the cross-rank section."))
    rep.add_argument("path", metavar="RUN", help="a run's .jsonl file; for a distributed job the path its "
                     "ranks were given, any rank's file, a glob of them or their folder")
    rep.add_argument("--format", choices=("markdown", "csv"), default="markdown",
                     help="markdown: the report (default); csv: one line per row, lists and dicts as JSON "
                     "(the same as gnnmon export csv RUN -o -)")
    rep.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    rep.add_argument("--html", metavar="OUT", help="also write the report as one self-contained page to open in a "
                     "browser (timeline, memory per call, the whole report; works offline)")
    rep.add_argument("--by", metavar="MARKER", help="one report per value of a marker the rows carry (e.g. "
                     "config), in natural order; spikes judged within each")
    argv = list(sys.argv[1:] if argv is None else argv)
    # packages' exports are read from their metadata (tens of ms) only where they are listed or run
    kinds = names() if argv[:1] in ([], ["export"], ["-h"], ["--help"]) else list(EXPORTS)
    whats = {name: EXPORTS[name].what if name in EXPORTS else "a package's export" for name in kinds}
    exp = sub.add_parser("export", help="write a run for another tool: " + ", ".join(kinds), epilog=EXITS["export"],
                         description="Write a run for another tool or reader. " + " ".join(
                             f"{name}: {what}." for name, what in whats.items()))
    exp.add_argument("kind", choices=kinds, help="what to write: " + "; ".join(
        f"{name}: {what}" for name, what in whats.items()))
    exp.add_argument("path", metavar="RUN", help="a run's .jsonl file, or a distributed job's files as for report")
    exp.add_argument("-o", "--output", required=True, metavar="OUT",
                     help=f"the file to write (the TensorBoard export: its log folder); {STDOUT}: the standard "
                     "output, for the exports that write streams (csv, trace)")
    exp.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    fc = sub.add_parser("forecast", help="fit a run's memory model and print the batch budgets for a device",
                        epilog=EXITS["forecast"], description=(
        f"Fit the step's peak memory ({MEM_PEAK.name}) against its batches' nodes, edges and graphs, "
        "forecast the run's own batches, and with --capacity print the largest DynamicBatchSampler "
        "max_num and batch size whose worst batch stays under --fraction of it."))
    fc.add_argument("path", metavar="RUN", help="a run's .jsonl file, or a distributed job's files as for report")
    fc.add_argument("--capacity", metavar="SIZE", help="the device's memory: 80GiB, 80GB, bytes, or a device (cuda:0)")
    fc.add_argument("--label", help="the step to model (default: the label with most rows that carry a batch shape)")
    fc.add_argument("--fraction", type=float, default=0.9, help="share of the capacity a batch may use (0.9)")
    fc.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    cmp = sub.add_parser("compare", help="compare two runs, per label and phase, for CI", epilog=EXITS["compare"],
                         usage="gnnmon compare [options] BASE NEW\n       gnnmon compare [options] BASE... -- NEW...",
                         description=(
        "Compare two runs per label and phase: time per step and per 1,000 nodes and edges (bigger batches are "
        "not a regression), peak memory and the memory models, GC, recompilations, data wait, energy per "
        "graph; each change judged against both runs' noise."))
    cmp.add_argument("runs", metavar="RUN", nargs="+", help="BASE... -- NEW...: reruns of the code to compare "
                     f"against and of the code to judge ({RUNS_ADVISED} a side for CI: each run a .jsonl file or a "
                     "job's files), their spread measured between them; or BASE NEW, one run a side, whose spread "
                     "is assumed (--rerun-spread)")
    cmp.add_argument("--max-slowdown", metavar="PCT", type=share, help="exit 1 when a step is slower by more than "
                     "this (5%% or 0.05) beyond doubt: per 1,000 nodes and edges where every run has shapes, on its "
                     "CPU time where every run's step ran on one thread and recorded it (collect(sched=True))")
    cmp.add_argument("--max-memory-growth", metavar="PCT", type=share, help="exit 1 when peak memory (the memory "
                     "models' forecast of the same batch where both can be trusted) grows by more than this")
    cmp.add_argument("--inconclusive", choices=("status", "pass", "fail"), default="status", help=(
        f"the exit status when the runs cannot decide: status (default) exits {INCONCLUSIVE}, pass 0, fail 1"))
    cmp.add_argument("--rerun-spread", metavar="PCT", type=share, default=RERUN_SPREAD, help=(
        "the spread between reruns assumed where each side has one run (default "
        f"{100 * RERUN_SPREAD:g}%%); with two runs or more a side it is measured instead"))
    cmp.add_argument("--format", choices=("markdown", "json"), default="markdown", help="markdown (default) or json")
    cmp.add_argument("--html", metavar="OUT", help="also write the comparison as one self-contained page")
    cmp.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    cmp.add_argument(NEW_SIDE, dest="new_runs", nargs="+", default=None, help=argparse.SUPPRESS)
    sub.add_parser("fields", help="print the reference of every field a row can hold (markdown)", epilog=EXITS["fields"],
                   description="Print every field a row can hold: its unit, meaning and logged name.")
    if argv[:1] == ["compare"] and "--" in argv:  # BASE... -- NEW...: the runs after the marker are the new side
        at = argv.index("--")
        argv = argv[:at] + [NEW_SIDE] + argv[at + 1:]
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


def share(text: str) -> float:
    """A limit as a share: ``5%`` or ``0.05`` (a bare number is a share, and must be under 1)."""
    percent = text.strip().endswith("%")
    try:
        value = float(text.strip()[:-1]) / 100 if percent else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (e.g. 5%) or a share (0.05)") from None
    if not percent and value >= 1:
        raise argparse.ArgumentTypeError(f"{text!r} reads as {100 * value:g} %; write {text}% to mean {text} %")
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a limit is 0 or more")
    return value


def _command(args: argparse.Namespace) -> int:
    if args.command == "fields":
        print(reference(), end="")
        return 0
    if args.command == "compare":
        return _compare(args)
    run = _read(args.path, args.lenient)
    if run is None:
        return 2
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
    if args.format == "csv":
        return _export(report, "csv", STDOUT)
    return _write(report.markdown(by=args.by))


def _read(path: str, lenient: bool) -> Any:
    """A run read for a command; prints the error and returns None where it cannot be read."""
    bar = _progress_bar(path)
    try:
        return load(path, strict=not lenient, progress=bar.update if bar is not None else None)
    except (ReportFileError, OSError) as exc:
        print(f"gnnmon: {exc}", file=sys.stderr)
        return None
    finally:
        if bar is not None:
            bar.close()


def _write(text: str) -> int:
    """Print ``text`` (and flush); SIGPIPE_EXIT when the reader went away (``| head``): no
    traceback, and none at exit when Python flushes stdout."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        return _reader_gone()
    return 0


def _reader_gone() -> int:
    """stdout's reader left: what is left to flush goes nowhere; SIGPIPE_EXIT."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return SIGPIPE_EXIT


def _compare(args: argparse.Namespace) -> int:
    """``gnnmon compare``: 1 when a judged line regressed (each named on stderr); when one is
    inconclusive (named, with the runs a side that would decide it), :data:`INCONCLUSIVE` or what
    ``--inconclusive`` says; 2 when a run cannot be read or the page cannot be written."""
    if args.new_runs:
        bases, news = args.runs, args.new_runs
    elif len(args.runs) == 2:
        bases, news = args.runs[:1], args.runs[1:]
    else:
        print(f"gnnmon: compare takes BASE NEW, or BASE... -- NEW... (several runs a side, -- between them); "
              f"got {len(args.runs)} run(s) and no --", file=sys.stderr)
        return 2
    read = [_read(path, args.lenient) for path in [*bases, *news]]
    if any(r is None for r in read):
        return 2
    base, new = read[:len(bases)], read[len(bases):]
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
    code = _write(text)
    if code:
        return code
    for d in comparison.decisions():
        if d["decision"] != "pass":
            print(f"gnnmon: {d['decision']}: {decided(d)}", file=sys.stderr)
    verdict = comparison.verdict()
    if verdict == "inconclusive":
        return {"status": INCONCLUSIVE, "pass": 0, "fail": 1}[args.inconclusive]
    return 1 if verdict == "regressed" else 0


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
    from gnnmon.forecast.forecast import next_steps

    try:
        model = report.memory_model(args.label, MEM_PEAK.name)
        if not model.trusted:
            print(model.summary())
            for step in next_steps(model):
                print(f"next: {step}")
            return NO_MODEL
        part = report.table.parts[model.label]
        rows = [r for r in map(part.row, range(part.n)) if r.get("error") is None]
        print(forecast(rows, model, args.capacity, progress=False).summary(args.fraction))
    except ValueError as exc:
        print(f"gnnmon: {exc}", file=sys.stderr)
        return 2
    return 0


def _export(report: Any, kind: str, output: str) -> int:
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
        return _reader_gone()
    except (OSError, ImportError, ValueError) as exc:
        print(f"gnnmon: cannot write {output}: {exc}", file=sys.stderr)
        return 2
    if not to_stdout:  # on stdout the export is the output: a CSV's reader gets CSV only
        print(f"gnnmon: wrote {what} to {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
