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

_PUBLIC: dict[str, str] = {
    "__version__": "gnnmon._version",
    "GnnmonError": "gnnmon.errors",
    "DeviceError": "gnnmon.errors",
    "ReportFileError": "gnnmon.errors",
    "collect": "gnnmon.record.active",
    "active_run": "gnnmon.record.active",
    "default_run": "gnnmon.record.active",
    "Run": "gnnmon.record.run",
    "current_row": "gnnmon.record.current",
    "gather": "gnnmon.record.job",
    "sample_utilisation": "gnnmon.record.sampling",
    "timed": "gnnmon.measure.timing",
    "cuda_timed": "gnnmon.measure.timing",
    "phase": "gnnmon.measure.timing",
    "memory_scope": "gnnmon.measure.memory",
    "monitor_memory_device": "gnnmon.measure.memory",
    "collect_garbage": "gnnmon.measure.gc_control",
    "freeze_gc": "gnnmon.measure.gc_control",
    "gc_controlled": "gnnmon.measure.gc_control",
    "gc_paused": "gnnmon.measure.gc_control",
    "graph_shape": "gnnmon.measure.graph",
    "record_graph": "gnnmon.measure.graph",
    "track_compile": "gnnmon.measure.compile",
    "watch_buckets": "gnnmon.measure.buckets",
    "watch_layers": "gnnmon.measure.layer_watch",
    "watch_loader": "gnnmon.measure.loader",
    "exact_host_memory": "gnnmon.devices.malloc",
    "emit_ranges": "gnnmon.record.probe_ranges",
    "load": "gnnmon.data.load",
    "iter_rows": "gnnmon.data.load",
    "RunResult": "gnnmon.data.result",
    "Report": "gnnmon.report",
    "forecast": "gnnmon.forecast.forecast",
    "calibrate": "gnnmon.forecast.calibrate",
}
"""The public API, written once: each name and the module that defines it, imported when the name
is first used (``import gnnmon``, and the CLI's ``--help``, import no torch). ``__all__`` is its
keys; the layout test reads it as the face's arrows; the block below says it again for type
checkers, held to it by tests/project/test_layout.py (``python -m tests.importgraph --face``)."""

if TYPE_CHECKING:  # _PUBLIC for type checkers: python -m tests.importgraph --face
    from gnnmon._version import __version__ as __version__
    from gnnmon.data.load import iter_rows as iter_rows
    from gnnmon.data.load import load as load
    from gnnmon.data.result import RunResult as RunResult
    from gnnmon.devices.malloc import exact_host_memory as exact_host_memory
    from gnnmon.errors import DeviceError as DeviceError
    from gnnmon.errors import GnnmonError as GnnmonError
    from gnnmon.errors import ReportFileError as ReportFileError
    from gnnmon.forecast.calibrate import calibrate as calibrate
    from gnnmon.forecast.forecast import forecast as forecast
    from gnnmon.measure.buckets import watch_buckets as watch_buckets
    from gnnmon.measure.compile import track_compile as track_compile
    from gnnmon.measure.gc_control import collect_garbage as collect_garbage
    from gnnmon.measure.gc_control import freeze_gc as freeze_gc
    from gnnmon.measure.gc_control import gc_controlled as gc_controlled
    from gnnmon.measure.gc_control import gc_paused as gc_paused
    from gnnmon.measure.graph import graph_shape as graph_shape
    from gnnmon.measure.graph import record_graph as record_graph
    from gnnmon.measure.layer_watch import watch_layers as watch_layers
    from gnnmon.measure.loader import watch_loader as watch_loader
    from gnnmon.measure.memory import memory_scope as memory_scope
    from gnnmon.measure.memory import monitor_memory_device as monitor_memory_device
    from gnnmon.measure.timing import cuda_timed as cuda_timed
    from gnnmon.measure.timing import phase as phase
    from gnnmon.measure.timing import timed as timed
    from gnnmon.record.active import active_run as active_run
    from gnnmon.record.active import collect as collect
    from gnnmon.record.active import default_run as default_run
    from gnnmon.record.current import current_row as current_row
    from gnnmon.record.job import gather as gather
    from gnnmon.record.probe_ranges import emit_ranges as emit_ranges
    from gnnmon.record.run import Run as Run
    from gnnmon.record.sampling import sample_utilisation as sample_utilisation
    from gnnmon.report import Report as Report

__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    """The public ``name``, its module imported now; kept, so the next use is a plain attribute."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'gnnmon' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """gnnmon's module object: importing the subpackage ``gnnmon.forecast`` (the CLI, a test) would
    set the attribute ``forecast`` to that subpackage, hiding the function of that name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PUBLIC and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
