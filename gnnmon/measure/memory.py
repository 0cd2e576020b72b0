"""Memory of a call or block: device memory (start, end, peak) and the host process's RSS.

The baseline is read when the call starts and the end when it returns, with no device sync: the
CUDA and MPS allocators keep their counters on the host, in program order, so they are exact
without one (a sync would make the CPU wait for the previous step's kernels). The peak is the
highest figure inside the window, from a nesting-safe stack (see :mod:`gnnmon.devices.peaks`). The
backends give raw counters (:class:`~gnnmon.devices.base.MemoryWindow`); this measurement names the
figures (declared in :mod:`gnnmon.figures`).
``sync=True`` waits for the device at both ends instead: use it only when the row's time window
must cover the GPU work it launched (so time-joined utilisation and energy line up with the
kernels, not with their launches). Field meanings per backend are in ``docs/memory.md``. All
figures are bytes.
"""

from __future__ import annotations

from typing import Any

from gnnmon.devices.host import EXACT_SOURCE, HOST
from gnnmon.errors import is_positive_number
from gnnmon.measure.adapters import make_decorator, make_scope
from gnnmon.measure.lifecycle import Measurement
from gnnmon.measure.memory_fields import device_figures, host_as_device, host_figures
from gnnmon.measure.row_device import row_backend, window_read_at_end, work_starts

DEFAULT_SAMPLE_INTERVAL = 0.005
"""Seconds between samples where a peak can only be sampled (MPS, child processes, non-Linux RSS)."""


class MemoryMeasurement(Measurement):
    """Fills ``mem_*`` (device) and ``rss_*`` (host process) fields of a row."""

    # Class defaults, nothing started (no __init__ of its own): the entry chooses ``backend`` first,
    # so an exit that finds none has nothing to close (its entry was interrupted before).
    backend: Any = None
    _host: Any = None  # an exact RSS window [start, peak], or the sampled window's token
    _device: Any = None  # the device window's token
    name = "memory"
    option_names = ("device", "include_children", "sample_interval", "sync")
    defaults = {"device": None, "include_children": False, "sample_interval": DEFAULT_SAMPLE_INTERVAL,
                "sync": False}

    @classmethod
    def check_options(cls, options: dict[str, Any], where: str) -> dict[str, Any]:
        options = super().check_options(options, where)
        if not isinstance(options.get("include_children", False), bool):
            raise TypeError(f"{where}: include_children must be True or False")
        interval = options.get("sample_interval", DEFAULT_SAMPLE_INTERVAL)
        if not is_positive_number(interval):
            raise ValueError(f"{where}: sample_interval must be a finite number of seconds > 0, got {interval!r}")
        if not isinstance(options.get("sync", False), bool):
            raise TypeError(f"{where}: sync must be True or False")
        return options

    def __enter__(self) -> MemoryMeasurement:
        o = self.options
        backend = self.backend = row_backend(self.row, o["device"])
        if o["sync"]:
            backend.synchronize()
        interval = o["sample_interval"]
        exact = None if o["include_children"] else HOST.exact_windows()
        if exact is not None:  # the common case, on the step's path: the exact RSS window alone
            window = self._host = [0, 0]  # kept before it opens: the exit closes it, whatever happens
            exact.open(window)
        else:
            self._host = HOST.open(o["include_children"], interval)
        if not backend.memory_is_host:
            self._device = backend.open_window(interval)
            work_starts(self.row, False)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        backend, host, token = self.backend, self._host, self._device
        if backend is None:  # its entry was interrupted before it opened anything
            return None
        fields = self.row.fields
        try:
            if self.options["sync"]:
                backend.synchronize()
        finally:
            # Close windows even if the sync failed (a device error): the peak stacks stay sound.
            device = None if token is None else backend.close_window(token)
            if token is not None:
                window_read_at_end(self.row)
            self._device = None
            if type(host) is list:  # an exact RSS window: [start, peak]
                end = HOST.exact_windows().close(host)  # type: ignore[union-attr]
                start, peak = host
                fields["rss_start_bytes"] = start
                fields["rss_peak_bytes"] = peak
                fields["rss_end_bytes"] = end
                fields["rss_peak_bytes_source"] = EXACT_SOURCE
            elif host is not None:
                host_figures(fields, HOST.close(host))
            self._host = None
        if host is None:  # ended before (a row closed late, after an interruption)
            return None
        if token is None:
            host_as_device(fields)
            if self.options["include_children"]:
                self.row.note("cpu mem_* include child processes (sampled)")
            return None
        if device is not None:
            device_figures(fields, device)
        return None


monitor_memory_device = make_decorator(MemoryMeasurement, "monitor_memory_device", "gnnmon.memory_scope()")
monitor_memory_device.__doc__ = """Record the memory of each call: ``@monitor_memory_device`` or
``@monitor_memory_device(device="cuda:1", label="train", include_children=False,
sample_interval=0.005, sync=False)``.

Fills ``mem_start_bytes``, ``mem_end_bytes``, ``mem_peak_bytes``, ``mem_peak_delta_bytes`` (peak
minus start; bytes) for the call's device, and ``rss_*`` for the host process. The device is
``device`` if given, else the one the call's tensors/modules/PyG data live on, else the default.
No device sync unless ``sync=True`` (see :mod:`gnnmon.measure.memory`).
"""

memory_scope = make_scope(MemoryMeasurement, "memory_scope", "memory_scope", "monitor_memory_device")
memory_scope.__doc__ = """``with memory_scope(label="load") as fields:`` — the same figures as
:func:`monitor_memory_device` for a block, in a row of its own; ``fields`` is that row."""
