"""The CUDA backend: exact figures from PyTorch's caching allocator (``torch.cuda.memory_stats``).

``mem_*`` is memory handed to tensors (``allocated_bytes``), ``mem_reserved_*`` what the caching
allocator holds from the driver (``reserved_bytes``). Neither includes the CUDA context or other
processes, which nvidia-smi shows. The peak counter is global per device, so windows go through a
:class:`~gnnmon.devices.peaks.CounterPeaks` stack that keeps nested windows' peaks correct.
"""

from __future__ import annotations

from typing import Any

import torch

from gnnmon.devices.peaks import CounterPeaks
from gnnmon.errors import DeviceError

_ALLOC = "allocated_bytes.all."
_RES = "reserved_bytes.all."


def check_cuda_index(device: torch.device) -> int:
    """The CUDA index a device names (the current device if none), or a clear error."""
    if not torch.cuda.is_available():
        raise DeviceError(
            f"device {str(device)!r} requested but CUDA is not available "
            "(torch.cuda.is_available() is False)"
        )
    index = device.index if device.index is not None else torch.cuda.current_device()
    count = torch.cuda.device_count()
    if index >= count:
        raise DeviceError(f"device {str(device)!r} requested but only {count} CUDA device(s) exist")
    return index


class CudaBackend:
    """One CUDA device, by index."""

    name = "cuda"
    memory_is_host = False

    def __init__(self, device: torch.device) -> None:
        self.index = check_cuda_index(device)
        self.device = torch.device("cuda", self.index)
        self._last: dict[str, Any] = {}
        self.peaks = CounterPeaks(self._read, self._reset)

    def _stats(self) -> dict[str, Any]:
        # Empty until CUDA is initialised: nothing allocated yet, so every figure is 0.
        stats = torch.cuda.memory_stats(self.index)
        self._last = stats
        return stats

    def _read(self) -> tuple[tuple[int, int], tuple[int, int]]:
        s = self._stats()
        return (
            (s.get(_ALLOC + "current", 0), s.get(_RES + "current", 0)),
            (s.get(_ALLOC + "peak", 0), s.get(_RES + "peak", 0)),
        )

    def _reset(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.index)

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.index)

    def record_event(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.index))
        return event

    def snapshot(self) -> dict[str, int | None]:
        s = self._stats()
        return {
            "mem_bytes": s.get(_ALLOC + "current", 0),
            "mem_reserved_bytes": s.get(_RES + "current", 0),
        }

    def open_window(self, sample_interval: float) -> Any:
        window = self.peaks.open()
        last = self._last
        return window, last.get("num_alloc_retries", 0), last.get("num_ooms", 0)

    def close_window(self, token: Any) -> dict[str, Any]:
        window, retries0, ooms0 = token
        (end, res_end), (peak, res_peak) = self.peaks.close(window)
        last = self._last
        start, res_start = window.start
        return {
            "mem_start_bytes": start,
            "mem_end_bytes": end,
            "mem_peak_bytes": peak,
            "mem_peak_delta_bytes": peak - start,
            "mem_peak_bytes_source": "measured:cuda-allocator",
            "mem_reserved_start_bytes": res_start,
            "mem_reserved_end_bytes": res_end,
            "mem_reserved_peak_bytes": res_peak,
            "cuda_alloc_retries": last.get("num_alloc_retries", 0) - retries0,
            "cuda_ooms": last.get("num_ooms", 0) - ooms0,
        }

    def __repr__(self) -> str:
        return f"CudaBackend(cuda:{self.index})"
