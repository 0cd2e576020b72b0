"""Raw counters under every stage: device backends (CUDA, MPS, CPU) behind one protocol, chosen
per call, with nesting-safe peak windows, host memory, device resolution, NVML and RAPL readers.

May import: the root modules (``gnnmon.errors``, ``gnnmon.fields``) only."""

from __future__ import annotations

import threading

import torch

from gnnmon.devices.base import Backend
from gnnmon.devices.cpu import CpuBackend
from gnnmon.devices.cuda import CudaBackend, check_cuda_index
from gnnmon.devices.mps import MpsBackend
from gnnmon.errors import DeviceError

__all__ = ["Backend", "CpuBackend", "CudaBackend", "MpsBackend", "backend_for", "get_backend",
           "clear_backends"]

_CACHE: dict[tuple[str, int | None], Backend] = {}
_BY_DEVICE: dict[torch.device, Backend] = {}
_LOCK = threading.RLock()


def backend_for(device: torch.device) -> Backend:
    """:func:`get_backend`, from a cache keyed by the ``torch.device`` itself (one dict lookup:
    reading ``device.type`` alone costs ~0.3 µs). ``cuda`` without an index names the current
    device, which can change: it is resolved every time."""
    backend = _BY_DEVICE.get(device)
    if backend is not None:
        return backend
    backend = get_backend(device)
    if device.type != "cuda" or device.index is not None:
        _BY_DEVICE[device] = backend
    return backend


def get_backend(device: torch.device) -> Backend:
    """The backend for a device (created on first use, then reused: it holds the peak stacks)."""
    if device.type == "cuda":
        # "cuda" alone means the current device: key by the index it resolves to.
        index = device.index if device.index is not None else check_cuda_index(device)
        key: tuple[str, int | None] = ("cuda", index)
    elif device.type in ("mps", "cpu"):
        key = (device.type, None)
    else:
        raise DeviceError(f"unsupported device {str(device)!r}: gnnmon measures cuda, mps, cpu")
    backend = _CACHE.get(key)
    if backend is not None:
        return backend
    if device.type == "cuda":
        new: Backend = CudaBackend(torch.device("cuda", index))
    elif key[0] == "mps":
        new = MpsBackend(device)
    else:
        new = CpuBackend(device)
    with _LOCK:
        return _CACHE.setdefault(key, new)


def clear_backends() -> None:
    """Forget cached backends (tests that swap in a fake device use this)."""
    with _LOCK:
        _CACHE.clear()
        _BY_DEVICE.clear()
