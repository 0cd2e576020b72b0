"""What ``torch.compile`` did during a call: ``@track_compile`` (alone or stacked with the others).

Read from what torch exposes, the difference between the call's start and end:

* ``compile_frames`` — frame compilations Dynamo made (the entries of
  ``torch._dynamo.utils.compilation_time_metrics["_compile.compile_inner"]``, one per compilation;
  not ``counters["frames"]["total"]``, which also counts frames Dynamo only looked at, such as a
  gc callback or another thread's code that ran during a compiled call); ``compile_recompiles`` —
  those that were a frame compiled again (a guard failed:
  a new shape, dtype or Python value), from the compilation records
  (``torch._dynamo.utils.get_compilation_metrics()``, ``compile_id.frame_compile_id > 0``; the
  records keep the newest 64);
* ``compile_graphs`` — graphs produced (``counters["stats"]["unique_graphs"]``);
* ``compile_graph_breaks`` — graph breaks met while compiling (``counters["graph_break"]``, a
  count per reason; the first line of each new reason goes to ``notes``);
* ``compile_s`` — seconds spent compiling: the frames (``torch._dynamo.utils.
  compilation_time_metrics["_compile.compile_inner"]``) plus the backward graphs, which AOTAutograd
  compiles lazily at the first ``backward()`` after a compilation, outside the frame's timer
  (``["backward._backward_impl"]``; also ``compile_backward_s`` on its own). On SchNet's training
  step with inductor it was about 40 % of the compiling (6.3 of 15.5 s, ``play/batching.py``).

These are internal to torch (``torch._dynamo``), not a public API: checked on torch 2.13. A counter
torch does not keep reads 0; without the compilation records ``compile_recompiles`` is None and
``notes`` says why. Nothing is imported: while ``torch._dynamo`` has not been loaded nothing can
have been compiled, and the figures are 0 at a cost of one dictionary lookup.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from gnnmon.measure.adapters import make_decorator
from gnnmon.measure.lifecycle import Measurement

Snapshot = tuple[int, int, dict[str, int], int, int] | None
"""(frames compiled, graphs, graph breaks per reason, frame compile-time entries, backward
compile-time entries) so far; None while Dynamo is not loaded."""

_COMPILE_INNER = "_compile.compile_inner"
_BACKWARD = "backward._backward_impl"
_UNSET = object()  # the start of a call whose enter has not finished (None is "Dynamo not loaded")
_ZERO = {"compile_frames": 0, "compile_recompiles": 0, "compile_graphs": 0,
         "compile_graph_breaks": 0, "compile_s": 0.0, "compile_backward_s": 0.0}


def _dynamo_utils() -> Any:
    """``torch._dynamo.utils`` if torch has loaded it (never imported here: 2.5 s)."""
    return sys.modules.get("torch._dynamo.utils")


def _compile_times(utils: Any, key: str = _COMPILE_INNER) -> list[float]:
    """Seconds of each compilation timed under ``key`` so far (torch's own list: read, never
    changed)."""
    times: list[float] = getattr(utils, "compilation_time_metrics", {}).get(key, [])
    return times


def snapshot() -> Snapshot:
    """Dynamo's counters now, or None while it is not loaded."""
    utils = _dynamo_utils()
    if utils is None:
        return None
    counters = utils.counters
    return (int(counters["frames"].get("total", 0)), int(counters["stats"].get("unique_graphs", 0)),
            dict(counters["graph_break"]), len(_compile_times(utils)), len(_compile_times(utils, _BACKWARD)))


def compile_fields(start: Snapshot, end: Snapshot, note: Callable[[str], None]) -> dict[str, Any]:
    """The ``compile_*`` fields between two snapshots (the first line of each new graph-break
    reason to ``note``, at most three)."""
    if end is None:
        return dict(_ZERO)
    s = start or (0, 0, {}, 0, 0)
    utils = _dynamo_utils()
    frames = end[3] - s[3]  # compilations (a frame dynamo only looked at and skipped is not one)
    breaks = {reason: n - s[2].get(reason, 0) for reason, n in end[2].items() if n > s[2].get(reason, 0)}
    backward = float(sum(_compile_times(utils, _BACKWARD)[s[4]:end[4]]))
    fields: dict[str, Any] = {
        "compile_frames": frames,
        "compile_graphs": end[1] - s[1],
        "compile_graph_breaks": sum(breaks.values()),
        "compile_s": float(sum(_compile_times(utils)[s[3]:end[3]])) + backward,
        "compile_backward_s": backward,
        "compile_recompiles": 0,
    }
    if frames:
        if hasattr(utils, "get_compilation_metrics"):
            records = list(utils.get_compilation_metrics())[-frames:]
            fields["compile_recompiles"] = sum(1 for r in records if _frame_compile_id(r) > 0)
        else:
            fields["compile_recompiles"] = None
            note("compile_recompiles: this torch keeps no compilation records")
    for reason in list(breaks)[:3]:
        note(f"graph break: {str(reason).strip().splitlines()[0][:160]}")
    return fields


def _frame_compile_id(record: Any) -> int:
    """0 for a frame's first compilation, n for its n-th recompilation."""
    compile_id = getattr(record, "compile_id", None)
    value = getattr(compile_id, "frame_compile_id", None)
    if value is None and isinstance(compile_id, str):  # records that keep it as text: "0/1"
        try:
            return int(compile_id.strip("[]").split("/")[1].split("_")[0])
        except (IndexError, ValueError):
            return 0
    return int(value or 0)


class CompileMeasurement(Measurement):
    """The ``compile_*`` figures of a call (see the module doc)."""

    __slots__ = ("_start",)
    name = "compile"

    def __init__(self, row: Any, options: Any) -> None:
        self.row, self.options = row, options
        self._start: Any = _UNSET  # set once whole: an exit that finds it unset has nothing to compare

    def __enter__(self) -> CompileMeasurement:
        self._start = snapshot()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._start is not _UNSET:
            self.row.fields.update(compile_fields(self._start, snapshot(), self.row.note))


track_compile = make_decorator(CompileMeasurement, "track_compile")
track_compile.__doc__ = """What ``torch.compile`` did during each call: ``@track_compile``.

Adds ``compile_frames``, ``compile_recompiles``, ``compile_graphs``, ``compile_graph_breaks``,
``compile_s`` (seconds compiling, the lazily compiled backward included) and
``compile_backward_s`` to the row, from ``torch._dynamo``'s own counters; a slow row
with a compilation in it is a ``recompile`` spike in ``report.spikes()``. Put it on the step that
calls a compiled model (``model = torch.compile(model)``), stacked with the other decorators."""
