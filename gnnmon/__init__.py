"""gnnmon: honest per-call figures for PyTorch / PyTorch Geometric training loops.

Importing gnnmon changes no global state: no logging set-up, no GC change, no device initialised;
it imports torch only once a name that needs it is first used.

The package follows the data: ``measure`` (on the step's path) fills rows in ``record`` (row,
run, storage), ``timeline`` samples beside the steps, ``report`` explains a run, ``forecast``
reads a loader's batches with a run's memory model, and ``devices`` holds the raw counters under
all of them. Imports point down that flow (tests/project/test_layout.py).
"""

from __future__ import annotations

# torch imports concurrent.futures.thread, which registers with threading's shutdown and refuses to
# once the main thread has ended: imported here (7 ms), a first use of gnnmon from a thread that
# outlives the main thread can still import torch.
import concurrent.futures.thread  # noqa: F401
import sys
import types
from typing import TYPE_CHECKING, Any

from gnnmon._version import __version__
from gnnmon.errors import DeviceError, GnnmonError, ReportFileError

if TYPE_CHECKING:
    from gnnmon.data.load import iter_rows, load
    from gnnmon.data.result import RunResult
    from gnnmon.devices.malloc import exact_host_memory
    from gnnmon.devices.ranges import emit_ranges
    from gnnmon.forecast import calibrate, forecast
    from gnnmon.measure.buckets import watch_buckets
    from gnnmon.measure.compile import track_compile
    from gnnmon.measure.gc_control import collect_garbage, freeze_gc, gc_controlled, gc_paused
    from gnnmon.measure.graph import graph_shape, record_graph
    from gnnmon.measure.layer_watch import watch_layers
    from gnnmon.measure.loader import watch_loader
    from gnnmon.measure.memory import memory_scope, monitor_memory_device
    from gnnmon.measure.timing import cuda_timed, phase, timed
    from gnnmon.record.active import active_run, collect, default_run
    from gnnmon.record.job import gather
    from gnnmon.record.row import current_row
    from gnnmon.record.run import Run
    from gnnmon.record.sampling import sample_utilisation
    from gnnmon.report import Report

_LAZY = frozenset((
    "exact_host_memory",
    "emit_ranges",
    "iter_rows",
    "load",
    "RunResult",
    "forecast",
    "calibrate",
    "watch_buckets",
    "track_compile",
    "collect_garbage",
    "freeze_gc",
    "gc_controlled",
    "gc_paused",
    "graph_shape",
    "record_graph",
    "watch_layers",
    "watch_loader",
    "memory_scope",
    "monitor_memory_device",
    "cuda_timed",
    "phase",
    "timed",
    "active_run",
    "collect",
    "default_run",
    "gather",
    "current_row",
    "Run",
    "sample_utilisation",
    "Report",
))
"""Public names imported when first used (:func:`_defining` names each one's module): ``import
gnnmon`` (and the CLI's ``--version``) costs no torch import until a measurement is asked for."""


def _defining(name: str) -> Any:
    """The lazy public ``name`` (one of :data:`_LAZY`), its module imported now. Imports written out,
    never named in a string: the layout test sees every arrow from the face."""
    if name == "exact_host_memory":
        from gnnmon.devices import malloc
        return getattr(malloc, name)
    if name == "emit_ranges":
        from gnnmon.devices import ranges
        return getattr(ranges, name)
    if name in ("iter_rows", "load"):
        from gnnmon.data import load
        return getattr(load, name)
    if name == "RunResult":
        from gnnmon.data import result
        return getattr(result, name)
    if name in ("forecast", "calibrate"):
        from gnnmon.forecast import calibrate, forecast  # not the subpackage: gnnmon.forecast is the function
        return forecast if name == "forecast" else calibrate
    if name == "watch_buckets":
        from gnnmon.measure import buckets
        return getattr(buckets, name)
    if name == "track_compile":
        from gnnmon.measure import compile
        return getattr(compile, name)
    if name in ("collect_garbage", "freeze_gc", "gc_controlled", "gc_paused"):
        from gnnmon.measure import gc_control
        return getattr(gc_control, name)
    if name in ("graph_shape", "record_graph"):
        from gnnmon.measure import graph
        return getattr(graph, name)
    if name == "watch_layers":
        from gnnmon.measure import layer_watch
        return getattr(layer_watch, name)
    if name == "watch_loader":
        from gnnmon.measure import loader
        return getattr(loader, name)
    if name in ("memory_scope", "monitor_memory_device"):
        from gnnmon.measure import memory
        return getattr(memory, name)
    if name in ("cuda_timed", "phase", "timed"):
        from gnnmon.measure import timing
        return getattr(timing, name)
    if name in ("active_run", "collect", "default_run"):
        from gnnmon.record import active
        return getattr(active, name)
    if name == "gather":
        from gnnmon.record import job
        return getattr(job, name)
    if name == "current_row":
        from gnnmon.record import row
        return getattr(row, name)
    if name == "Run":
        from gnnmon.record import run
        return getattr(run, name)
    if name == "sample_utilisation":
        from gnnmon.record import sampling
        return getattr(sampling, name)
    if name == "Report":
        from gnnmon.report import Report
        return Report
    raise AttributeError(f"module 'gnnmon' has no attribute {name!r}")


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'gnnmon' has no attribute {name!r}")
    value = _defining(name)
    globals()[name] = value  # the next use is a plain attribute
    if name in ("iter_rows", "load", "RunResult") and "Report" not in globals():
        __getattr__("Report")  # a loaded result's deprecated .report() needs the report stage imported
    return value


class _Package(types.ModuleType):
    """gnnmon's module object: importing the subpackage ``gnnmon.forecast`` (the CLI, a test) would
    set the attribute ``forecast`` to that subpackage, hiding the function of that name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "__version__",
    "DeviceError",
    "GnnmonError",
    "Report",
    "ReportFileError",
    "Run",
    "RunResult",
    "active_run",
    "collect",
    "collect_garbage",
    "cuda_timed",
    "current_row",
    "default_run",
    "emit_ranges",
    "exact_host_memory",
    "forecast",
    "calibrate",
    "freeze_gc",
    "gc_controlled",
    "gc_paused",
    "gather",
    "graph_shape",
    "iter_rows",
    "load",
    "memory_scope",
    "monitor_memory_device",
    "phase",
    "record_graph",
    "sample_utilisation",
    "timed",
    "track_compile",
    "watch_buckets",
    "watch_layers",
    "watch_loader",
]
