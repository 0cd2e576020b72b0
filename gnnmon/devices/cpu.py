"""The CPU backend: device memory is the host process's RSS (see :mod:`gnnmon.devices.host`)."""

from __future__ import annotations

from typing import Any

import torch

from gnnmon.devices.host import HOST


class CpuBackend:
    """CPU: nothing to synchronize; memory figures are the process's RSS."""

    name = "cpu"
    memory_is_host = True

    def __init__(self, device: torch.device | None = None) -> None:
        self.device = torch.device("cpu")
        self.label = "cpu"

    def synchronize(self) -> None:
        """No queued device work on the CPU."""

    def record_event(self) -> None:
        return None

    def release_event(self, event: Any) -> None:
        """The CPU has no events."""

    def open_window(self, sample_interval: float) -> Any:
        return HOST.open(False, sample_interval)

    def close_window(self, token: Any) -> dict[str, Any]:
        return host_as_device_fields(HOST.close(token))

    def __repr__(self) -> str:
        return "CpuBackend()"


def host_as_device_fields(rss: dict[str, Any], into: dict[str, Any] | None = None) -> dict[str, Any]:
    """On the CPU the ``mem_*`` figures are the ``rss_*`` ones: written into ``into`` (a row's
    fields, on the step's path: no dict made) or a new dict, which is returned."""
    out: dict[str, Any] = {} if into is None else into
    start, peak, end = rss["rss_start_bytes"], rss["rss_peak_bytes"], rss["rss_end_bytes"]
    out["mem_start_bytes"] = start
    out["mem_end_bytes"] = end
    out["mem_peak_bytes"] = peak
    out["mem_peak_delta_bytes"] = peak - start
    out["mem_peak_bytes_source"] = rss["rss_peak_bytes_source"]
    return out
