"""gnnmon: honest per-call figures for PyTorch / PyTorch Geometric training loops.

Importing gnnmon changes no global state: no logging set-up, no GC change, no device initialised.
"""

from gnnmon._version import __version__
from gnnmon.collector import Run, active_run, collect, default_run, load
from gnnmon.errors import DeviceError, GnnmonError, ReportFileError
from gnnmon.memory import memory_scope, monitor_memory_device
from gnnmon.report import Report
from gnnmon.row import current_row

__all__ = [
    "__version__",
    "DeviceError",
    "GnnmonError",
    "Report",
    "ReportFileError",
    "Run",
    "active_run",
    "collect",
    "current_row",
    "default_run",
    "load",
    "memory_scope",
    "monitor_memory_device",
]
