"""gnnmon: honest per-call figures for PyTorch / PyTorch Geometric training loops.

Importing gnnmon changes no global state: no logging set-up, no GC change, no device initialised.

The package follows the data: ``measure`` (on the step's path) fills rows in ``record`` (row,
run, storage), ``timeline`` samples beside the steps, ``report`` explains a run, ``forecast``
reads a loader's batches with a run's memory model, and ``devices`` holds the raw counters under
all of them. Imports point down that flow (tests/test_layout.py).
"""

from gnnmon._version import __version__
from gnnmon.devices.malloc import exact_host_memory
from gnnmon.devices.ranges import emit_ranges
from gnnmon.errors import DeviceError, GnnmonError, ReportFileError
from gnnmon.forecast import forecast
from gnnmon.measure.buckets import watch_buckets
from gnnmon.measure.compile import track_compile
from gnnmon.measure.gc_control import collect_garbage, freeze_gc, gc_controlled, gc_paused
from gnnmon.measure.graph import graph_shape, record_graph
from gnnmon.measure.layers import watch_layers
from gnnmon.measure.loader import watch_loader
from gnnmon.measure.memory import memory_scope, monitor_memory_device
from gnnmon.measure.timing import cuda_timed, phase, timed
from gnnmon.record.active import active_run, collect, default_run
from gnnmon.record.job import gather
from gnnmon.record.load import iter_rows, load
from gnnmon.record.result import RunResult
from gnnmon.record.row import current_row
from gnnmon.record.run import Run
from gnnmon.record.sampling import sample_utilisation
from gnnmon.report import Report

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
