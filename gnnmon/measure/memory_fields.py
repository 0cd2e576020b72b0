"""The memory figures of a row, named from a backend's raw windows (declared in
:mod:`gnnmon.figures`; all bytes): the host's ``rss_*``, an accelerator's ``mem_*``, and on the
CPU the ``mem_*`` figures as the host's. Written by the memory measurement, and by the settling of
a row whose device is chosen at its end (:mod:`gnnmon.measure.row_device`). What the CPU's figures
mean while the allocator keeps freed memory is the same for every row of a run: the run says it
once (the manifest's ``host_memory``, :mod:`gnnmon.record.manifest`), never a row."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gnnmon.devices.base import MemoryWindow
from gnnmon.devices.malloc import mmap_threshold
from gnnmon.fields import HOST_BACKEND

DEVICE_ONLY = ("mem_reserved_start_bytes", "mem_reserved_end_bytes", "mem_reserved_peak_bytes",
               "mem_driver_start_bytes", "mem_driver_bytes", "mem_driver_peak_bytes", "mem_recommended_max_bytes",
               "cuda_alloc_retries", "cuda_ooms")
"""What :func:`device_figures` writes that :func:`host_as_device` does not: an accelerator's own."""


def host_figures(fields: dict[str, Any], window: MemoryWindow) -> None:
    """The host process's ``rss_*`` figures (bytes) from a sampled window over its RSS (and its
    child processes', apart, where it was asked for them)."""
    children = window.children
    if children is not None:
        fields["rss_children_start_bytes"] = children[0]
        fields["rss_children_peak_bytes"] = children[2]
        fields["rss_children_end_bytes"] = children[1]
    fields["rss_start_bytes"] = window.start
    fields["rss_peak_bytes"] = window.peak
    fields["rss_end_bytes"] = window.end
    fields["rss_peak_bytes_source"] = window.how


def host_as_device(fields: dict[str, Any]) -> None:
    """On the CPU the device's ``mem_*`` figures (bytes) are the host's ``rss_*`` ones, copied
    within the row's fields (on the step's path: no dict made)."""
    start, peak, end = fields["rss_start_bytes"], fields["rss_peak_bytes"], fields["rss_end_bytes"]
    fields["mem_start_bytes"] = start
    fields["mem_end_bytes"] = end
    fields["mem_peak_bytes"] = peak
    fields["mem_peak_delta_bytes"] = peak - start
    fields["mem_peak_bytes_source"] = fields["rss_peak_bytes_source"]
    fields["mem_end_delta_bytes"] = end - start


def device_figures(fields: dict[str, Any], window: MemoryWindow) -> None:
    """An accelerator's ``mem_*`` figures (bytes), and its allocator's counts, from its window."""
    start, end, peak = window.start, window.end, window.peak
    fields["mem_start_bytes"] = start
    fields["mem_end_bytes"] = end
    fields["mem_peak_bytes"] = peak
    fields["mem_peak_delta_bytes"] = peak - start
    fields["mem_peak_bytes_source"] = window.how
    reserved = window.reserved
    if reserved is not None:
        fields["mem_reserved_start_bytes"], fields["mem_reserved_end_bytes"], fields["mem_reserved_peak_bytes"] = (
            reserved)
    driver = window.driver
    if driver is not None:
        (fields["mem_driver_start_bytes"], fields["mem_driver_bytes"], fields["mem_driver_peak_bytes"],
         fields["mem_recommended_max_bytes"]) = driver
    if window.retries is not None:
        fields["cuda_alloc_retries"] = window.retries
    if window.failures is not None:
        fields["cuda_ooms"] = window.failures
    fields["mem_end_delta_bytes"] = end - start


def host_instead(fields: dict[str, Any]) -> None:
    """A row measured on an accelerator whose work turned out to be the host's: its ``mem_*``
    figures become the host's, and the accelerator's own are dropped."""
    for name in DEVICE_ONLY:
        fields.pop(name, None)
    if "rss_start_bytes" in fields:
        host_as_device(fields)


def cached(records: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any of these rows (this process's, just measured) holds host memory figures the
    allocator's reuse of freed memory blurs: a CPU row with a peak while
    :func:`gnnmon.exact_host_memory` is not in force."""
    return mmap_threshold() is None and any(
        r.get("backend") == HOST_BACKEND and r.get("mem_peak_bytes") is not None for r in records)
