"""``gnnmon forecast RUN --capacity 80GiB``: the run's memory model, its own batches forecast, and
the batch budgets for a device; a model that cannot be trusted says why and what to do next."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gnnmon.cli.common import read
from gnnmon.figures import MEM_PEAK
from gnnmon.report import Report

NO_MODEL = 3
"""``gnnmon forecast``'s exit status when the run's memory model cannot be trusted: it says why and
what would make one, and forecasts nothing (not an error of the command: 2 is)."""

EXIT = (f"Exit status: 0 the forecast printed; {NO_MODEL} no trusted memory model (the run's batches do not vary "
        "enough, or too few: it says what to measure); 2 an error.")


def add(sub: Any, argv: list[str]) -> None:
    p = sub.add_parser("forecast", help="fit a run's memory model and print the batch budgets for a device",
                       epilog=EXIT, description=(
                           f"Fit the step's peak memory ({MEM_PEAK.name}) against its batches' nodes, edges and "
                           "graphs, forecast the run's own batches, and with --capacity print the largest "
                           "DynamicBatchSampler max_num and batch size whose worst batch stays under "
                           "--fraction of it."))
    p.add_argument("path", metavar="RUN", help="a run's .jsonl file, or a distributed job's files as for report")
    p.add_argument("--capacity", metavar="SIZE", help="the device's memory: 80GiB, 80GB, bytes, or a device (cuda:0)")
    p.add_argument("--label", help="the step to model (default: the label with most rows that carry a batch shape)")
    p.add_argument("--fraction", type=float, default=0.9, help="share of the capacity a batch may use (0.9)")
    p.add_argument("--lenient", action="store_true", help="skip corrupt lines instead of failing")
    p.set_defaults(run=run)


def _count(value: object) -> bool:
    """Whether a row's shape figure is a count the forecast can read (a number, not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _wrong_option(args: argparse.Namespace) -> str | None:
    """What is wrong with the options the run is not needed to judge (--fraction, --capacity, a
    device's included), or None: checked before the run is read and fitted, so a bad option is exit 2
    whatever the run's model, not the refusal of a model that cannot be trusted (3)."""
    from gnnmon.forecast.forecast import parse_capacity

    if not 0 < args.fraction <= 1:
        return f"--fraction is a share of the capacity in (0, 1] (0.9: 90 %), got {args.fraction:g}"
    try:
        parse_capacity(args.capacity)
    except ValueError as exc:  # a size that is none, a device this machine lacks (DeviceError)
        return f"--capacity: {exc}"
    return None


def run(args: argparse.Namespace) -> int:
    """The model, the run's own batches forecast, the budgets (the forecast stage, and torch with it,
    imported only here)."""
    from gnnmon.forecast import forecast
    from gnnmon.forecast.forecast import next_steps

    wrong = _wrong_option(args)
    if wrong is not None:
        print(f"gnnmon: {wrong}", file=sys.stderr)
        return 2
    result = read(args.path, args.lenient)
    if result is None:
        return 2
    report = Report(result)
    try:
        model = report.memory_model(args.label, MEM_PEAK.name)
        if not model.trusted:
            print(model.summary())
            for step in next_steps(model, report):
                print(f"next: {step}")
            return NO_MODEL
        part = report.table.parts[model.label]
        done = [r for r in map(part.row, range(part.n)) if r.get("error") is None]
        rows = [r for r in done if all(_count(r.get(t)) for t in ("num_nodes", *model.terms))]
        if not rows:
            raise ValueError(f"no row of {model.label} that returned carries its batch's shape "
                             f"(num_nodes{''.join(', ' + t for t in model.terms if t != 'num_nodes')}) to forecast")
        fc = forecast(rows, model, args.capacity, progress=False)
        print(fc.summary(args.fraction))
        if len(rows) < len(done):
            print(f"note: {len(done) - len(rows):,} of {model.label}'s {len(done):,} rows carry no readable batch "
                  "shape (num_nodes and the model's terms as numbers): left out of the forecast")
        instead = fc.from_loader(args.path) if args.capacity is not None else None
        if instead is not None:
            print(f"note: the batch size is scaled from the run's own {len(rows):,} batches; {instead}")
    except ValueError as exc:
        print(f"gnnmon: {exc}", file=sys.stderr)
        return 2
    return 0
