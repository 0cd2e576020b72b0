"""The command line, a module a command (:mod:`.report`, :mod:`.export`, :mod:`.forecast`,
:mod:`.compare`, :mod:`.fields`, :mod:`.run`; what they share, :mod:`.common`): each adds its parser and runs
it. Behaves like a Unix tool: its output on stdout, errors on stderr with exit status 2, quiet
when its reader goes away (``| head``); each command's ``--help`` ends with its exit statuses.
Part of the package's face: it may import every stage."""

from __future__ import annotations

import argparse
import difflib
import sys
import warnings
from collections.abc import Sequence

from gnnmon._version import __version__
from gnnmon.cli import compare, export, fields, forecast, report, run
from gnnmon.cli.common import SIGPIPE_EXIT, one_line_warnings, share
from gnnmon.cli.forecast import NO_MODEL
from gnnmon.report.compare.comparison import INCONCLUSIVE

__all__ = ["INCONCLUSIVE", "NO_MODEL", "SIGPIPE_EXIT", "main", "share"]

COMMANDS = (report, export, forecast, compare, fields, run)

DESCRIPTION = ("Read a gnnmon run (a JSON Lines file, or a distributed job's files) and print its report; or run a "
               "training script unmodified and record its steps (gnnmon run).")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gnnmon", description=DESCRIPTION,
                                     epilog="Each command's --help ends with what its exit status means.")
    parser.add_argument("--version", action="version", version=f"gnnmon {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    given = list(sys.argv[1:] if argv is None else argv)
    for command in COMMANDS:
        command.add(sub, given)
    args, extra = parser.parse_known_args(run.split(compare.sides(given))[0])
    if extra:  # the command's own usage, and the option a typo was near
        command_parser = sub.choices[args.command]
        options = [o for a in command_parser._actions for o in a.option_strings]
        near = [f"{x}: did you mean {m[0]}?" for x in extra if (m := difflib.get_close_matches(x, options, 1))]
        command_parser.error(f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(near)})" if near else ""))
    for stream in (sys.stdout, sys.stderr):  # a name the OS decoded with surrogateescape: shown escaped
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    formatted = warnings.formatwarning
    warnings.formatwarning = one_line_warnings(formatted)  # gnnmon's own in one line, a script's as Python's
    try:
        return int(args.run(args))
    finally:
        warnings.formatwarning = formatted
