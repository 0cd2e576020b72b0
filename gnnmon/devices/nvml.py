"""NVIDIA GPUs through NVML (the ``nvidia-ml-py`` package, imported as ``pynvml``).

Opened lazily and only when asked (never at import); absent library, no GPU or an old driver make
the figures None with a reason, never an error. CUDA device indices are mapped to NVML handles by
the UUIDs torch gives (:func:`gnnmon.devices.cuda.cuda_uuids`: ``CUDA_VISIBLE_DEVICES`` and PCI
ordering make the two indices differ), else by index. Imports no torch: the timeline's sampler
process uses it.

Meaning of the figures (NVML's own definitions): ``utilization.gpu`` is the share of the last
sample period (1/6 s to 1 s) in which *any* kernel ran — not how busy the SMs were; power is a
~1 s average; the total-energy counter (Volta and newer) is exact, in millijoules since the
driver loaded.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class Nvml:
    """One NVML session: handles per CUDA index, samples and energy counters."""

    def __init__(self, uuids: list[str] | None = None) -> None:
        self.uuids = uuids  # CUDA index -> "GPU-..." (None: NVML's own order)
        self.energy_reads = 0
        self._lock = threading.RLock()
        self.ok = False
        self.reason = ""
        self.nv: Any = None
        self.handles: dict[int, Any] = {}
        self.energy_supported: dict[int, bool] = {}

    def open(self) -> bool:
        """Initialise NVML; False (with :attr:`reason`) when it cannot be used here."""
        with self._lock:
            if self.ok:
                return True
            try:
                import pynvml
            except ImportError:
                self.reason = "pynvml not installed (pip install nvidia-ml-py)"
                return False
            try:
                pynvml.nvmlInit()
                count = pynvml.nvmlDeviceGetCount()
            except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
                self.reason = f"NVML unavailable: {exc}"
                return False
            if count == 0:
                self.reason = "NVML found no GPU"
                pynvml.nvmlShutdown()
                return False
            self.nv = pynvml
            self.handles = self._map_handles(count)
            for index, handle in self.handles.items():
                try:
                    pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
                    self.energy_supported[index] = True
                except Exception:  # noqa: BLE001 - NotSupported before Volta, or a driver error: no counter
                    self.energy_supported[index] = False
            self.ok = True
            return True

    def _map_handles(self, count: int) -> dict[int, Any]:
        nv = self.nv
        handles: dict[int, Any] = {}
        for cuda_index, uuid in enumerate(self.uuids or []):
            try:
                handles[cuda_index] = nv.nvmlDeviceGetHandleByUUID(uuid)
            except Exception:  # noqa: BLE001 - no UUID mapping: NVML's own order below
                pass
        if not handles:  # no torch mapping: NVML's own order
            for i in range(count):
                handles[i] = nv.nvmlDeviceGetHandleByIndex(i)
        return handles

    def close(self) -> None:
        with self._lock:
            if self.ok:
                try:
                    self.nv.nvmlShutdown()
                finally:
                    self.ok = False

    def sample(self) -> dict[str, Any]:
        """Flat figures for every GPU: ``gpu<i>_util_pct``, ``_mem_util_pct``, ``_mem_used_bytes``,
        ``_power_w``, ``_sm_clock_mhz``, ``_temp_c`` (None where a query is not supported)."""
        nv = self.nv
        out: dict[str, Any] = {}
        for i, h in self.handles.items():
            p = f"gpu{i}_"
            util = _try(nv.nvmlDeviceGetUtilizationRates, h)
            out[p + "util_pct"] = None if util is None else float(util.gpu)
            out[p + "mem_util_pct"] = None if util is None else float(util.memory)
            mem = _try(nv.nvmlDeviceGetMemoryInfo, h)
            out[p + "mem_used_bytes"] = None if mem is None else int(mem.used)
            power = _try(nv.nvmlDeviceGetPowerUsage, h)
            out[p + "power_w"] = None if power is None else power / 1000.0
            out[p + "sm_clock_mhz"] = _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
            out[p + "temp_c"] = _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
        return out

    def energy_reader(self, index: int) -> Any:
        """A function of no argument returning ``(value_mj, t_ns)`` for one CUDA device: the
        counter and the middle of the call (``time.time_ns``), which on an H100 takes ~3.5 ms."""
        read = self.nv.nvmlDeviceGetTotalEnergyConsumption
        handle = self.handles[index]

        def reader() -> tuple[float, int]:
            a = time.time_ns()
            value = read(handle)
            b = time.time_ns()
            self.energy_reads += 1
            return float(value), (a + b) // 2

        return reader


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - a query this GPU does not support reads None
        return None
