"""The CPU backend: device memory is the host process's RSS (see :mod:`gnnmon.devices.host`)."""

from __future__ import annotations

from typing import Any

import torch

from gnnmon.devices.base import MemoryState, MemoryWindow
from gnnmon.devices.host import HOST


class CpuBackend:
    """CPU: nothing to synchronize; its memory is the process's RSS."""

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

    def close_window(self, token: Any) -> MemoryWindow:
        return HOST.close(token)

    def memory_state(self) -> MemoryState:
        """The process's RSS, and the machine's available and total RAM."""
        import psutil  # a dependency; imported here as failures and forecasts are its only users

        ram = psutil.virtual_memory()
        return MemoryState(psutil.Process().memory_info().rss, None, None, ram.available, ram.total)

    def capacity(self) -> tuple[int, str]:
        import psutil

        return int(psutil.virtual_memory().total), "the machine's RAM"

    def __repr__(self) -> str:
        return "CpuBackend()"

