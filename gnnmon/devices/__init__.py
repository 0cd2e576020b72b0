"""Raw counters under every stage: device backends (CUDA, MPS, CPU) behind one protocol
(:mod:`gnnmon.devices.base`: counters, never figures' names) and one table of kinds
(:mod:`gnnmon.devices.registry`), chosen per call, with nesting-safe peak windows, host memory,
device resolution, NVML and RAPL readers.

May import: the root modules (``gnnmon.errors``, ``gnnmon.fields``) only."""

from __future__ import annotations

import gc
import os
import threading

import torch

from gnnmon.devices.base import Backend
from gnnmon.devices.cpu import CpuBackend
from gnnmon.devices.cuda import CudaBackend
from gnnmon.devices.fork import cuda_lost, set_aside
from gnnmon.devices.mps import MpsBackend
from gnnmon.devices.registry import BACKENDS, BackendKind, register_backend
from gnnmon.errors import DeviceError

__all__ = ["Backend", "BackendKind", "CpuBackend", "CudaBackend", "MpsBackend", "BACKENDS", "backend_for",
           "get_backend", "clear_backends", "register_backend"]

_CACHE: dict[tuple[str, int | None], Backend] = {}
_BY_DEVICE: dict[torch.device, Backend] = {}
_LOCK = threading.RLock()


def backend_for(device: torch.device) -> Backend:
    """:func:`get_backend`, from a cache keyed by the ``torch.device`` itself (one dict lookup:
    reading ``device.type`` alone costs ~0.3 µs). A device without an index, of a kind with
    several (``cuda``: the current device, which can change), is resolved every time."""
    backend = _BY_DEVICE.get(device)
    if backend is not None:
        return backend
    backend = get_backend(device)
    if device.index is not None or BACKENDS[device.type].resolve_index is None:
        _BY_DEVICE[device] = backend
    return backend


def get_backend(device: torch.device) -> Backend:
    """The backend for a device (made by its kind on first use, then reused: it holds the peak
    stacks)."""
    kind = BACKENDS.get(device.type)
    if kind is None:
        raise DeviceError(f"unsupported device {str(device)!r}: gnnmon measures {', '.join(BACKENDS)}")
    index = None if kind.resolve_index is None else kind.resolve_index(device)
    key = (kind.type, index)
    backend = _CACHE.get(key)
    if backend is not None:
        return backend
    new = kind.make(torch.device(kind.type, index) if index is not None else torch.device(kind.type))
    with _LOCK:
        return _CACHE.setdefault(key, new)


def clear_backends() -> None:
    """Forget cached backends (tests that swap in a fake device use this)."""
    with _LOCK:
        _CACHE.clear()
        _BY_DEVICE.clear()


def _after_fork_in_child() -> None:
    """In a forked child: the parent's backends (CUDA's event pools and streams) are set aside,
    never used or freed here (:mod:`gnnmon.devices.fork`); the child makes its own. In a child of
    a process that runs CUDA, what it inherited is also frozen out of its garbage collector
    (``gc.freeze``): the parent's cyclic garbage — a dropped backend, a user's profiler, anything
    holding a CUDA event — is never freed there, where freeing an event aborts the child."""
    global _LOCK
    _LOCK = threading.RLock()  # another thread of the parent may have held it at the fork
    set_aside(list(_CACHE.values()))
    _CACHE.clear()
    _BY_DEVICE.clear()
    if cuda_lost():
        gc.freeze()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
