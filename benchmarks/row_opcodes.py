"""The Python a row runs in gnnmon's own code, counted: bytecode instructions a call on the step's
thread, for each form as users write it (no device argument) inside ``collect(path)``, after
warm-up: the full stack with three phases, ``@cuda_timed``, ``@monitor_memory_device`` and
``@gc_controlled`` alone, ``@cuda_timed`` with one phase, a ``timed`` scope, and one phase in a
row (the difference of the two ``@cuda_timed`` forms).

Run: ``.venv/bin/python benchmarks/row_opcodes.py`` (seconds); ``--parts "@gc_controlled"`` prints
that form's instructions a call function by function, the most first (where a row's Python goes).
Counted, not timed: the same on a
busy machine and an idle one, for one Python version (instructions differ between versions);
``tests/measure/test_row_budget.py`` holds the counts to their budgets (docs/performance.md). On
this VM the calls are the CPU's; a GPU row runs the same code plus its CUDA calls, which
``benchmarks/row_cost.py`` counts and prices.
"""

from __future__ import annotations

import contextvars
import gc
import json
import os
import platform
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import CodeType
from typing import Any

import gnnmon

PACKAGE = str(Path(gnnmon.__file__).resolve().parent)


@gnnmon.monitor_memory_device
@gnnmon.cuda_timed
@gnnmon.gc_controlled
def full_stack() -> None:
    with gnnmon.phase("forward"):
        pass
    with gnnmon.phase("backward"):
        pass
    with gnnmon.phase("optimizer"):
        pass


@gnnmon.cuda_timed
def timed_alone() -> None:
    pass


@gnnmon.monitor_memory_device
def memory_alone() -> None:
    pass


@gnnmon.gc_controlled
def gc_alone() -> None:
    pass


@gnnmon.cuda_timed
def one_phase() -> None:
    with gnnmon.phase("forward"):
        pass


def scope() -> None:
    with gnnmon.timed(label="scope"):
        pass


FORMS: dict[str, Callable[[], Any]] = {
    "full stack + 3 phases": full_stack, "@cuda_timed": timed_alone, "@monitor_memory_device": memory_alone,
    "@gc_controlled": gc_alone, "@cuda_timed + 1 phase": one_phase, "timed scope": scope,
}
PHASE = "a phase in a row"
"""The derived form: ``@cuda_timed + 1 phase`` less ``@cuda_timed``."""


def count(call: Callable[[], Any], calls: int = 200) -> float:
    """Instructions gnnmon's modules run per call of ``call``, on this thread (:func:`counted`)."""

    def run() -> int:
        for _ in range(calls):
            call()
        return calls

    return counted(run)


_PRIMED: list[bool] = []


def _ask_opcodes(frame: Any, event: str, arg: Any) -> None:
    frame.f_trace_opcodes = True


def _asks() -> None:
    """A frame that asks for opcode events (:func:`counted`'s first count on Python 3.12+)."""


def counted(steps: Callable[[], int], parts: Counter[CodeType] | None = None) -> float:
    """Instructions gnnmon's modules run on this thread per step of ``steps()`` (which returns how
    many it ran); ``parts``, if given, gets them by function (code object), in all. Collections
    are held off while counting (a tracer makes a frame object per traced call, whose allocations
    would start collections that the step does not make)."""
    seen = [0]

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            seen[0] += 1
            if parts is not None:
                parts[frame.f_code] += 1
        return local

    def enter(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename.startswith(PACKAGE):
            frame.f_trace_opcodes = True
            return local
        return None

    if not _PRIMED:  # Python 3.12+ delivers opcode events only from the settrace after a frame first asked
        _PRIMED.append(True)
        sys.settrace(_ask_opcodes)
        _asks()
        sys.settrace(None)
    threshold = gc.get_threshold()
    gc.set_threshold(10**9)
    sys.settrace(enter)
    try:
        n = steps()
    finally:
        sys.settrace(None)
        gc.set_threshold(*threshold)
    return seen[0] / n


def counts(path: str | Path, warm: int = 50) -> dict[str, float]:
    """Each form's instructions a call, inside ``collect(path)`` after ``warm`` calls of each, in a
    context of their own (a step's thread as a script starts it: no row, phase or scope left
    current by earlier code, as a test run may leave one)."""
    return contextvars.Context().run(_counts, path, warm)


def _counts(path: str | Path, warm: int) -> dict[str, float]:
    with gnnmon.collect(path, flush_interval=3600):
        for call in FORMS.values():
            for _ in range(warm):  # the first calls make what later ones reuse
                call()
        found = {name: count(call) for name, call in FORMS.items()}
    found[PHASE] = found["@cuda_timed + 1 phase"] - found["@cuda_timed"]
    return found


def parts(form: str, calls: int = 200, warm: int = 50) -> list[tuple[str, float]]:
    """``form``'s instructions a call by function (``module.py:line name``), the most first,
    counted as :func:`counts` counts the form (inside ``collect(path)``, after ``warm`` calls)."""
    if form not in FORMS:
        raise SystemExit(f"no form {form!r}: one of {', '.join(map(repr, FORMS))}")
    found: Counter[CodeType] = Counter()

    def run(path: Path) -> None:
        call = FORMS[form]
        with gnnmon.collect(path, flush_interval=3600):
            for each in FORMS.values():  # as counts() warms them
                for _ in range(warm):
                    each()

            def steps() -> int:
                for _ in range(calls):
                    call()
                return calls

            counted(steps, found)

    with tempfile.TemporaryDirectory() as tmp:
        contextvars.Context().run(run, Path(tmp) / "rows.jsonl")
    named = [(f"{os.path.relpath(code.co_filename, PACKAGE)}:{code.co_firstlineno} {code.co_name}", n / calls)
             for code, n in found.items()]
    return sorted(named, key=lambda item: -item[1])


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--parts"]:
        if len(args) != 2:
            raise SystemExit('usage: row_opcodes.py --parts FORM (e.g. "@gc_controlled")')
        named = parts(args[1])
        print(f"{args[1]}: {sum(n for _, n in named):.0f} instructions a call in gnnmon's code, by function")
        for name, n in named:
            print(f"  {n:7.1f}  {name}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        found = counts(Path(tmp) / "rows.jsonl")
    if "--json" in sys.argv[1:]:  # for tests/measure/test_row_budget.py
        print(json.dumps(found))
        return
    print(f"Python {platform.python_version()}, gnnmon {gnnmon.__version__}: instructions a call in gnnmon's code "
          "(no device argument, inside collect(path), after warm-up)")
    for name, n in found.items():
        print(f"  {name:24s} {n:8.0f}")


if __name__ == "__main__":
    main()
