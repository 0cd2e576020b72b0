"""The Python a row runs in gnnmon's own code, counted: bytecode instructions a call, for the
full stack with three phases, ``@cuda_timed`` alone, a ``timed`` scope and one phase in a row.

Run: ``.venv/bin/python benchmarks/row_opcodes.py`` (seconds). Counted, not timed: the same on a
busy machine and an idle one, for one Python version (instructions differ between versions). On
the CPU (``device="cpu"``); a GPU row runs the same code plus its CUDA calls, which
``benchmarks/row_cost.py`` counts and prices.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gnnmon

PACKAGE = str(Path(gnnmon.__file__).resolve().parent)


@gnnmon.monitor_memory_device(device="cpu")
@gnnmon.cuda_timed(device="cpu")
@gnnmon.gc_controlled
def full_stack() -> None:
    with gnnmon.phase("forward"):
        pass
    with gnnmon.phase("backward"):
        pass
    with gnnmon.phase("optimizer"):
        pass


@gnnmon.cuda_timed(device="cpu")
def timed_alone() -> None:
    pass


@gnnmon.cuda_timed(device="cpu")
def one_phase() -> None:
    with gnnmon.phase("forward"):
        pass


def scope() -> None:
    with gnnmon.timed(label="scope"):
        pass


def count(call: Callable[[], Any], calls: int = 200) -> float:
    """Instructions gnnmon's modules run per call of ``call``."""
    seen = [0]

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            seen[0] += 1
        return local

    def enter(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename.startswith(PACKAGE):
            frame.f_trace_opcodes = True
            return local
        return None

    sys.settrace(enter)
    try:
        for _ in range(calls):
            call()
    finally:
        sys.settrace(None)
    return seen[0] / calls


def main() -> None:
    forms = {"full stack + 3 phases": full_stack, "@cuda_timed": timed_alone, "@cuda_timed + 1 phase": one_phase,
             "timed scope": scope}
    with gnnmon.collect(flush_interval=3600):
        for call in forms.values():
            for _ in range(50):  # the first calls make what later ones reuse
                call()
        counts = {name: count(call) for name, call in forms.items()}
    print(f"Python {platform.python_version()}, gnnmon {gnnmon.__version__}: instructions a call in gnnmon's code")
    for name, n in counts.items():
        print(f"  {name:24s} {n:8.0f}")
    print(f"  {'a phase in a row':24s} {counts['@cuda_timed + 1 phase'] - counts['@cuda_timed']:8.0f}")


if __name__ == "__main__":
    main()
