"""gnnmon: honest per-call figures for PyTorch / PyTorch Geometric training loops.

Importing gnnmon changes no global state: no logging set-up, no GC change, no device initialised.
"""

from gnnmon._version import __version__
from gnnmon.collector import Run, active_run, collect, default_run, iter_rows, load
from gnnmon.backends.host import exact_host_memory
from gnnmon.errors import DeviceError, GnnmonError, ReportFileError
from gnnmon.gc_control import collect_garbage, freeze_gc, gc_controlled, gc_paused
from gnnmon.graph import graph_shape, record_graph
from gnnmon.memory import memory_scope, monitor_memory_device
from gnnmon.report import Report
from gnnmon.row import current_row
from gnnmon.sampler import sample_utilisation
from gnnmon.timing import cuda_timed, phase, timed

__all__ = [
    "__version__",
    "DeviceError",
    "GnnmonError",
    "Report",
    "ReportFileError",
    "Run",
    "active_run",
    "collect",
    "collect_garbage",
    "cuda_timed",
    "current_row",
    "default_run",
    "exact_host_memory",
    "freeze_gc",
    "gc_controlled",
    "gc_paused",
    "graph_shape",
    "iter_rows",
    "load",
    "memory_scope",
    "monitor_memory_device",
    "phase",
    "record_graph",
    "sample_utilisation",
    "timed",
]
