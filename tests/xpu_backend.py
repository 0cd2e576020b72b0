"""An Intel XPU backend for gnnmon, written the way a user adds a device kind gnnmon does not ship:
this one module, against ``torch.xpu``, and one registration, ``register_backend(KIND)``
(``tests/devices/test_backend_contract.py`` makes it, over the faithful fake of ``torch.xpu`` in
``tests/fakes.py``). Nothing in gnnmon names it.

Memory: the caching allocator's counters (``torch.xpu.memory_stats``, read without a synchronize):
bytes held by tensors and bytes the allocator reserves from the device, the peaks kept
nesting-safe by gnnmon's :class:`~gnnmon.devices.peaks.CounterPeaks` over the global
``reset_peak_memory_stats``. Time: synchronous (no events kept here): gnnmon synchronises at a
window's ends. Collectives under ``xccl`` run on the current XPU. IPEX reports an allocation that
does not fit as a ``RuntimeError`` naming ``PI_ERROR_OUT_OF_RESOURCES``: the kind says so.
"""

from __future__ import annotations

from typing import Any

import torch

from gnnmon.devices.base import MemoryState, MemoryWindow
from gnnmon.devices.peaks import CounterPeaks
from gnnmon.devices.registry import BackendKind
from gnnmon.errors import DeviceError

HOW = "measured:xpu-allocator"
"""How a window's peak is read: the allocator's peak counter (exact)."""


def xpu_index(device: torch.device) -> int:
    """The XPU index ``device`` names (the current one if none), checked against the devices there."""
    count = torch.xpu.device_count() if torch.xpu.is_available() else 0
    index = device.index if device.index is not None else (torch.xpu.current_device() if count else 0)
    if index >= count:
        raise DeviceError(f"device {str(device)!r} requested but {count} XPU device(s) are available")
    return index


class XpuBackend:
    """One XPU, by index: the ``Backend`` protocol (:mod:`gnnmon.devices.base`)."""

    name, memory_is_host = "xpu", False

    def __init__(self, device: torch.device) -> None:
        self.device = torch.device("xpu", xpu_index(device))
        self.index, self.label = self.device.index, str(self.device)
        self.peaks = CounterPeaks(self._read, self._reset)

    def _stats(self) -> tuple[int, int, int, int]:
        """Allocated and reserved bytes, now and at their peaks (zeros before the XPU is used)."""
        s = torch.xpu.memory_stats(self.index)
        if not s:
            return 0, 0, 0, 0
        return (s["allocated_bytes.all.current"], s["reserved_bytes.all.current"],
                s["allocated_bytes.all.peak"], s["reserved_bytes.all.peak"])

    def _read(self) -> tuple[tuple[int, int], tuple[int, int]]:
        allocated, reserved, allocated_peak, reserved_peak = self._stats()
        return (allocated, reserved), (allocated_peak, reserved_peak)

    def _reset(self) -> None:
        torch.xpu.reset_peak_memory_stats(self.index)

    def synchronize(self) -> None:
        torch.xpu.synchronize(self.index)

    def record_event(self) -> None:
        return None

    def release_event(self, event: Any) -> None:
        """No events."""

    def open_window(self, sample_interval: float) -> Any:
        return self.peaks.open()

    def close_window(self, window: Any) -> MemoryWindow:
        (end, reserved_end), (peak, reserved_peak) = self.peaks.close(window)
        start, reserved_start = window.start
        return MemoryWindow(start, end, peak, HOW, (reserved_start, reserved_end, reserved_peak))

    def memory_state(self) -> MemoryState | None:
        if not torch.xpu.is_initialized():
            return None
        allocated, reserved, _, _ = self._stats()
        free, total = torch.xpu.mem_get_info(self.index)
        return MemoryState(allocated, reserved, None, free, total)

    def capacity(self) -> tuple[int, str]:
        return int(torch.xpu.get_device_properties(self.index).total_memory), f"{self.label}'s memory"


def _current() -> torch.device:
    return torch.device("xpu", torch.xpu.current_device())


KIND = BackendKind(
    "xpu", XpuBackend,
    in_use=lambda: _current() if torch.xpu.is_initialized() else None,
    resolve_index=xpu_index,
    manifest=lambda: {"xpu_available": torch.xpu.is_available(),
                      "xpu_device_count": torch.xpu.device_count() if torch.xpu.is_available() else 0},
    collective_device=lambda process_group_backend: _current() if "xccl" in process_group_backend else None,
    oom_messages=("out of memory", "pi_error_out_of_resources"),
)
"""The XPU kind: ``register_backend(KIND)`` and gnnmon measures ``xpu`` devices."""
