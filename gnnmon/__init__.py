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
import importlib
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

_LAZY: dict[str, str] = {
    "exact_host_memory": "gnnmon.devices.malloc",
    "emit_ranges": "gnnmon.devices.ranges",
    "iter_rows": "gnnmon.data.load",
    "load": "gnnmon.data.load",
    "RunResult": "gnnmon.data.result",
    "forecast": "gnnmon.forecast",
    "calibrate": "gnnmon.forecast",
    "watch_buckets": "gnnmon.measure.buckets",
    "track_compile": "gnnmon.measure.compile",
    "collect_garbage": "gnnmon.measure.gc_control",
    "freeze_gc": "gnnmon.measure.gc_control",
    "gc_controlled": "gnnmon.measure.gc_control",
    "gc_paused": "gnnmon.measure.gc_control",
    "graph_shape": "gnnmon.measure.graph",
    "record_graph": "gnnmon.measure.graph",
    "watch_layers": "gnnmon.measure.layer_watch",
    "watch_loader": "gnnmon.measure.loader",
    "memory_scope": "gnnmon.measure.memory",
    "monitor_memory_device": "gnnmon.measure.memory",
    "cuda_timed": "gnnmon.measure.timing",
    "phase": "gnnmon.measure.timing",
    "timed": "gnnmon.measure.timing",
    "active_run": "gnnmon.record.active",
    "collect": "gnnmon.record.active",
    "default_run": "gnnmon.record.active",
    "gather": "gnnmon.record.job",
    "current_row": "gnnmon.record.row",
    "Run": "gnnmon.record.run",
    "sample_utilisation": "gnnmon.record.sampling",
    "Report": "gnnmon.report",
}
"""Public name -> the module that defines it, imported when the name is first used: ``import
gnnmon`` (and the CLI's ``--version``) costs no torch import until a measurement is asked for."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gnnmon' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next use is a plain attribute
    if module.startswith("gnnmon.data.") and "Report" not in globals():
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
