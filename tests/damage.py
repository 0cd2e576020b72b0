"""Hand-damaged run files, for tests/data/test_damaged_files.py: a good run file made by a real run (two
labels, a nested row, a call that raised, phases, a PyG batch's shape, markers, a GC pause, samples,
an energy counter's points), each field of each kind of line damaged in many ways, and every
command and ``gnnmon.load`` run on each damaged file, in this process (the CLI's ``main``).

What each must do: give a result, or refuse the file in one line that names the line and the field
(the CLI: on stderr, exit status 2), never a traceback. :func:`exercise` runs them all on one file
and returns what went wrong, in words."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gnnmon
from gnnmon.cli import NO_MODEL, main
from gnnmon.errors import ReportFileError
from gnnmon.report.analysis import dips, gc_summary, step_analysis
from gnnmon.report.exports import EXPORTS
from gnnmon.report.renderers.timeline_plot import plot_timeline
from gnnmon.report.renderers.trace import chrome_trace

MISSING = object()
"""A field's damage: the field removed."""

RAW = "raw:"
"""A damage given as JSON text written where the value was (tokens JSON has not: NaN, Infinity)."""

DAMAGES: dict[str, Any] = {
    "missing": MISSING, "null": None, "string": "x", "empty string": "", "numeric string": "12",
    "true": True, "int": 7, "negative int": -3, "float": 1.5, "list": [1, "a"], "list of strings": ["a"],
    "object": {"a": 1}, "nested object": {"a": {"b": [1, {"c": None}]}}, "huge": 1e308, "huge negative": -1e308,
    "2**63": RAW + "9223372036854775808", "2**64": RAW + "18446744073709551616", "-2**63": RAW + "-9223372036854775808",
    "NaN": RAW + "NaN", "Infinity": RAW + "Infinity", "-Infinity": RAW + "-Infinity", "1e400": RAW + "1e400",
}
"""Every way a field is damaged."""

LINE_DAMAGES = ("cut in the middle", "empty object", "array", "string", "type missing", "type a number",
                "type unknown")
"""Every way a whole line is damaged."""


def good_run(path: Path) -> Path:
    """A real run's file, with an energy counter's points added (no counter runs on this machine)."""
    import torch
    from torch_geometric.data import Data

    @gnnmon.cuda_timed(label="step")
    @gnnmon.monitor_memory_device
    def step(batch: Data, i: int) -> None:
        with gnnmon.phase("forward"):
            with gnnmon.phase("inner"):
                time.sleep(0.001)
        with gnnmon.phase("backward"):
            if i == 3:
                gc.collect()  # a GC pause inside a row
            time.sleep(0.001)
        if i == 4:
            raise ValueError("planted")

    @gnnmon.cuda_timed(label="loop")
    def loop(epoch: int) -> None:
        for i in range(3):
            n = 10 + 7 * i + epoch
            with contextlib.suppress(ValueError):
                step(Data(x=torch.ones(n, 2), edge_index=torch.zeros(2, 3 * n, dtype=torch.long)), 3 * epoch + i)

    with gnnmon.collect(path, sample=0.005, config={"lr": 0.01, "layers": [1, 2], "opt": {"name": "adam"}}) as run:
        run.mark("settings", {"a": [1, 2]}, carry=False)
        for epoch in range(2):
            run.mark("epoch", epoch)
            loop(epoch)
    lines = path.read_text().splitlines()
    rows = [json.loads(x) for x in lines if '"type":"row"' in x]
    t0, t1 = min(r["t_start_ns"] for r in rows), max(r["t_end_ns"] for r in rows)
    points = [json.dumps({"type": "point", "key": "rapl_package_j", "t_ns": t, "value": v, "err_ns": 1000,
                          "step": True})
              for t, v in ((t0 - 10**6, 100.0), ((t0 + t1) // 2, 101.5), (t1 + 10**6, 103.0))]
    lines[2:2] = points
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass(frozen=True)
class Case:
    """One damage: line ``line`` (1-based) of the good file, its ``field`` (None: the whole line)
    made ``damage`` (a key of :data:`DAMAGES`, or one of :data:`LINE_DAMAGES`)."""

    line: int
    kind: str
    field: str | None
    damage: str

    def __str__(self) -> str:
        return f"line {self.line} ({self.kind}) {self.field or 'whole line'}: {self.damage}"


def lines_to_damage(good: Path) -> dict[int, str]:
    """The lines damaged (line number -> kind): the manifest, the first row of each label, a row
    that raised, and the first GC event, sample, marker, point and end line."""
    chosen: dict[int, str] = {}
    seen: dict[str, int] = {}
    for n, text in enumerate(good.read_text().splitlines(), 1):
        obj = json.loads(text)
        kind = obj["type"]
        key = kind if kind != "row" else f"row {obj['label']}{' raised' if obj.get('error') else ''}"
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 1:
            chosen[n] = kind
    return chosen


def cases(good: Path) -> list[Case]:
    """Every field of every chosen line (the manifest's ``distributed`` given an entry to damage
    too), each damaged every way; and every chosen line damaged whole."""
    lines = good.read_text().splitlines()
    out = []
    for n, kind in lines_to_damage(good).items():
        obj = json.loads(lines[n - 1])
        fields = [k for k in obj if k != "type"] + (["distributed.rank", "distributed.world_size"]
                                                    if kind == "manifest" else [])
        out += [Case(n, kind, field, damage) for field in fields for damage in DAMAGES]
        out += [Case(n, kind, None, damage) for damage in LINE_DAMAGES]
    return out


def damaged(good: Path, case: Case, out: Path) -> Path:
    """The good file with ``case``'s damage, written to ``out``."""
    lines = good.read_text().splitlines()
    text = lines[case.line - 1]
    obj = json.loads(text)
    if case.field is None:
        text = {"cut in the middle": text[: len(text) // 2], "empty object": "{}", "array": "[1, 2]",
                "string": '"row"', "type missing": json.dumps({k: v for k, v in obj.items() if k != "type"}),
                "type a number": json.dumps({**obj, "type": 3}),
                "type unknown": json.dumps({**obj, "type": "novel"})}[case.damage]
    else:
        value = DAMAGES[case.damage]
        head, _, inner = case.field.partition(".")
        if inner:  # inside the manifest's distributed entry (a job of one rank, no other file)
            entry = {"rank": 0, "world_size": 1, "local_rank": 0, "backend": None, "source": "environment",
                     "host": "h", "collectives": False, "job_path": None}
            obj[head] = entry
            target, key = entry, inner
        else:
            target, key = obj, head
        if value is MISSING:
            del target[key]
            text = json.dumps(obj)
        elif isinstance(value, str) and value.startswith(RAW):
            target[key] = "@@RAW@@"
            text = json.dumps(obj).replace('"@@RAW@@"', value[len(RAW):])
        else:
            target[key] = value
            text = json.dumps(obj)
    lines[case.line - 1] = text
    out.write_text("\n".join(lines) + "\n")
    return out


# -- running everything on a file ----------------------------------------------------------------

def _one_line_naming(message: str, case: Case) -> str | None:
    """Why ``message`` is not one line naming the case's line and field (None: it is)."""
    if "\n" in message.strip():
        return f"not one line: {message!r}"
    if f":{case.line}:" not in message:
        return f"does not name line {case.line}: {message!r}"
    field = (case.field or "").split(".")[-1]
    named = [field] + (["value"] if (case.kind, field) == ("marker", "carry") else [])  # which of the two is wrong
    if case.field is not None and not any(f"'{f}" in message for f in [*named, case.field]):
        return f"does not name field {case.field!r}: {message!r}"
    return None


def unreadable(case: Case) -> bool:
    """Whether the damage leaves no gnnmon file to read past: a first line that is not a gnnmon
    manifest (its type or format changed, or it made no JSON object at all)."""
    return case.line == 1 and (case.field in ("format",) or (case.field is None and case.damage != "cut in the middle"))


def python_api(path: Path, strict: bool, out: Path, plot: bool = False) -> None:
    """Everything the Python API reads a run file into (raises what escapes)."""
    run = gnnmon.load(path, strict=strict)
    report = gnnmon.Report(run)
    report.markdown()
    report.summary()
    report.spikes()
    dips(report.table)
    step_analysis(report.table)
    report.energy()
    report.cross_rank()
    report.layers()
    report.oom()
    gc_summary(report.gc_events)
    report.failures()
    if any("epoch" in part.cols for part in report.table.parts.values()):
        report.markdown(by="epoch")
        report.spikes(by="epoch")
    for table in ("rows", "summary", "spikes", "dips", "analysis", "energy", "energy_by_label", "energy_by_epoch",
                  "gc", "cross_rank"):
        report.frame(table)
    json.dumps(chrome_trace(run), allow_nan=False)  # the exports: by the CLI, below
    with contextlib.suppress(ValueError):  # a run whose rows carry no batch shape has no model: said so
        report.memory_model().summary()
    with contextlib.suppress(ValueError):
        report.memory_model(figure="mem_peak_bytes").summary()
    if plot:
        plot_timeline(report, out / "timeline.png")


def commands(path: Path, lenient: bool, out: Path) -> list[list[str]]:
    flag = ["--lenient"] if lenient else []
    p = str(path)
    return ([["report", p, *flag], ["report", "--format", "csv", p, *flag],
             ["report", p, "--html", str(out / "r.html"), *flag],
             ["report", p, "--by", "epoch", *flag], ["forecast", p, *flag],
             ["forecast", p, "--capacity", "1GiB", *flag]]
            + [["export", kind, p, "-o", str(out / f"cli-{kind}"), *flag] for kind in EXPORTS])


def _printed(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def run_cli(argv: list[str]) -> tuple[int | None, str, str]:
    """``gnnmon ARGV`` in this process: (exit status, stdout, stderr); status None and the
    traceback in stderr when an exception escaped (what a user would see as a traceback)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _printed  # as Python prints them (pytest would record them instead)
        try:
            code: int | None = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:  # noqa: BLE001 - what escapes is the finding
            code = None
            stderr.write(traceback.format_exc())
    return code, stdout.getvalue(), stderr.getvalue()


def exercise(path: Path, case: Case, out: Path, *, full: bool = True, plot: bool = False) -> list[str]:
    """What went wrong when every command and ``load`` read the damaged file (``full=False``:
    ``load`` only, strict and lenient), in words; [] when each gave a result or refused the file
    in one line naming the line and the field."""
    problems: list[str] = []
    out.mkdir(parents=True, exist_ok=True)
    for strict in (True, False):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if full:
                    python_api(path, strict, out, plot)
                else:
                    gnnmon.load(path, strict=strict)
            refused = None
        except ReportFileError as exc:
            refused = str(exc)
            why = _one_line_naming(refused, case)
            if why is not None:
                problems.append(f"load(strict={strict}) {why}")
            if not strict and not unreadable(case):
                problems.append(f"load(strict=False) refused a file it could read past: {refused}")
        except Exception:  # noqa: BLE001 - what escapes is the finding
            problems.append(f"load(strict={strict}) raised:\n{traceback.format_exc()}")
            refused = None
        if not full:
            continue
        for argv in commands(path, not strict, out):
            code, _, err = run_cli(argv)
            lines = [x for x in err.splitlines() if x and not x.startswith("gnnmon: warning: ")
                     and not x.startswith("gnnmon: wrote ")]
            if code is None:
                problems.append(f"gnnmon {' '.join(argv[:2])} raised:\n{err}")
            elif code == 2:
                if len(lines) != 1 or not lines[0].startswith("gnnmon: "):
                    problems.append(f"gnnmon {' '.join(argv[:2])}: exit 2 without one line: {err!r}")
                elif refused is not None and refused not in lines[0]:
                    problems.append(f"gnnmon {' '.join(argv[:2])}: exit 2 with another message than load's: {err!r}")
                elif refused is None and argv[0] != "forecast" and "--by" not in argv:
                    problems.append(f"gnnmon {' '.join(argv[:2])}: exit 2 on a file load reads: {err!r}")
            elif code not in (0, NO_MODEL) or (code == NO_MODEL and argv[0] != "forecast"):
                problems.append(f"gnnmon {' '.join(argv[:2])}: exit {code}: {err!r}")
            elif refused is not None:
                problems.append(f"gnnmon {' '.join(argv[:2])}: exit {code} on a file load refused")
    return problems
