"""The CUDA backend: exact counters from PyTorch's caching allocator, read without a synchronize.

A window's bytes are memory handed to tensors (``allocated_bytes``), its ``reserved`` what the
caching allocator holds from the driver (``reserved_bytes``). Neither includes the CUDA context or other
processes, which nvidia-smi shows. The allocator keeps these counters on the host, updated when a
tensor is allocated or freed (in program order, not when the GPU runs the kernels), so they are
exact without a ``torch.cuda.synchronize()``; a sync would only make the CPU wait for the queued
kernels and lose the CPU/GPU overlap.

Costs measured on an H100 (torch 2.11; ``docs/performance.md``): the flat
``torch.cuda.memory_stats`` builds a nested dict and flattens it in Python (77-139 µs); this
backend reads the nested dict itself (``torch._C._cuda_memoryStats``, what the public
``torch.cuda.memory_stats_as_nested_dict`` wraps; 10-18 µs), once when a window opens and once
when it closes. The peak counter is global per device, so windows go through a
:class:`~gnnmon.devices.peaks.CounterPeaks` stack that keeps nested windows' peaks correct.

Timing events come from a pool (returned once read). A pooled event, already created on the device
by its first record through torch, is recorded again through the CUDA driver
(``cuEventRecord`` from ``cuda.bindings``, which torch's CUDA wheels bring: about 0.2 µs a record
against 8-10 µs through ``torch.cuda.Event.record``) on the current stream's raw handle, where
this device is the current one and the stream is not capturing a CUDA graph; anywhere else, and
where the driver's bindings are missing or refuse, through torch, on the current stream found with
``torch._C._cuda_getCurrentStream`` and a cache of stream objects (not a ``torch.cuda.Stream``
built per record, as ``Event.record()`` does). Either way torch's event object reads it later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gnnmon.devices.base import EVENT_POOL_MAX, MemoryState, MemoryWindow
from gnnmon.devices.peaks import CounterPeaks
from gnnmon.errors import DeviceError

Figures = tuple[tuple[int, int], tuple[int, int]]

ALLOCATOR = "measured:cuda-allocator"
"""How a CUDA window's peak is read: the caching allocator's peak counter (exact)."""


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


def cuda_uuids() -> tuple[list[str] | None, str]:
    """``"GPU-<uuid>"`` per CUDA index, as NVML names them, so that the sampler reads the GPU a row
    ran on even where ``CUDA_VISIBLE_DEVICES`` reorders them; and how the list was made.

    Never starts CUDA: where it is initialised, torch's device properties give the exact list;
    where it is not, NVML's UUIDs filtered by ``CUDA_VISIBLE_DEVICES`` (what torch's own device
    count does without starting CUDA), in NVML's order — CUDA's order where
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or the GPUs are alike. None where neither can be had."""
    if not torch.cuda.is_available():
        return None, "no CUDA"
    if torch.cuda.is_initialized():
        try:
            return ([f"GPU-{torch.cuda.get_device_properties(i).uuid}" for i in range(torch.cuda.device_count())],
                    "torch device properties")
        except Exception:  # noqa: BLE001 - an older torch without .uuid: NVML's own order
            return None, "NVML order (torch gives no UUID)"
    try:
        visible = torch.cuda._parse_visible_devices()
        known = torch.cuda._raw_device_uuid_nvml()
    except Exception as exc:  # noqa: BLE001 - no NVML library, an older torch: NVML's own order
        return None, f"NVML order ({type(exc).__name__})"
    if not known:
        return None, "NVML order (NVML gave no UUID)"
    if visible and isinstance(visible[0], str):
        if visible[0].startswith("MIG-"):
            return None, "NVML order (MIG devices)"
        ordinals = torch.cuda._transform_uuid_to_ordinals([str(v) for v in visible], known)
    else:
        ordinals = [int(i) for i in visible]
    uuids = []
    for i in ordinals:
        if not 0 <= i < len(known):
            break  # CUDA stops at the first invalid entry
        uuids.append(known[i])
    return uuids, "NVML UUIDs and CUDA_VISIBLE_DEVICES (CUDA not started by gnnmon)"


def driver_recorder() -> tuple[Callable[[int, int], Any], Any] | None:
    """``cuEventRecord`` from the CUDA driver's Python bindings (``cuda.bindings.driver``) and its
    success code, where they and torch's raw-stream query exist; else None."""
    if getattr(torch._C, "_cuda_getCurrentRawStream", None) is None:
        return None
    try:
        from cuda.bindings import driver  # torch's CUDA wheels bring it
    except Exception:  # noqa: BLE001 - not installed, or built for another CUDA: torch records
        return None
    record = getattr(driver, "cuEventRecord", None)
    ok = getattr(getattr(driver, "CUresult", None), "CUDA_SUCCESS", None)
    return None if record is None or ok is None else (record, ok)


def nested_stats_reader() -> Callable[[int], dict[str, Any]]:
    """The cheapest exact read of the allocator's statistics this torch offers: the nested dict
    from ``torch._C._cuda_memoryStats`` where it exists, else the public
    ``torch.cuda.memory_stats_as_nested_dict`` (same data, one Python call more)."""
    raw = getattr(torch._C, "_cuda_memoryStats", None)
    if callable(raw):
        return raw
    return torch.cuda.memory_stats_as_nested_dict


class CudaBackend:
    """One CUDA device, by index."""

    name = "cuda"
    memory_is_host = False

    def __init__(self, device: torch.device) -> None:
        self.index = check_cuda_index(device)
        self.device = torch.device("cuda", self.index)
        self.label = f"cuda:{self.index}"
        self._stats_of = nested_stats_reader()
        self._ready = False  # CUDA initialised (before that the allocator has nothing: all zeros)
        self._last: dict[str, Any] = {}
        self.peaks = CounterPeaks(self._read, self._reset)
        self._pool: list[Any] = []
        self._streams: dict[Any, Any] = {}
        self._current = getattr(torch._C, "_cuda_getCurrentStream", None)
        self._driver = driver_recorder()
        self.driver_refusal: str | None = None  # why records went back to torch, where the driver refused

    # -- memory ---------------------------------------------------------------------------
    def _stats(self) -> dict[str, Any]:
        if not self._ready:
            if not torch.cuda.is_initialized():
                self._last = {}
                return self._last
            self._ready = True
        stats = self._stats_of(self.index)
        self._last = stats
        return stats

    def _read(self) -> Figures:
        s = self._stats()
        if not s:
            return (0, 0), (0, 0)
        a, r = s["allocated_bytes"]["all"], s["reserved_bytes"]["all"]
        return (a["current"], r["current"]), (a["peak"], r["peak"])

    def _reset(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.index)

    def activity(self, fresh: bool) -> int:
        """A count that changes whenever the allocator is asked for memory on this device (bytes
        ever allocated, plus the allocations it retried or refused: a step whose first allocation
        ran out of memory used the device too), from a new read, or, ``fresh`` False, from the
        last read made (one that a window's end just made): whether a call used the device, at no
        read of its own."""
        stats = self._stats() if fresh or not self._last else self._last
        if not stats:
            return 0
        return int(stats["allocated_bytes"]["all"]["allocated"]) + stats.get("num_ooms", 0) + stats.get(
            "num_alloc_retries", 0)

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.index)

    def open_window(self, sample_interval: float) -> Any:
        window = self.peaks.open()
        last = self._last
        return window, last.get("num_alloc_retries", 0), last.get("num_ooms", 0)

    def close_window(self, token: Any) -> MemoryWindow:
        window, retries0, ooms0 = token
        (end, res_end), (peak, res_peak) = self.peaks.close(window)
        last = self._last
        start, res_start = window.start
        return MemoryWindow(start, end, peak, ALLOCATOR, (res_start, res_end, res_peak), None,
                            last.get("num_alloc_retries", 0) - retries0, last.get("num_ooms", 0) - ooms0)

    def memory_state(self) -> MemoryState | None:
        """The allocator's allocated, reserved and split-block free bytes, and the driver's free
        and total memory (``torch.cuda.mem_get_info``); None before CUDA holds anything."""
        stats = self._stats()
        if not stats:
            return None
        split = stats.get("inactive_split_bytes", {}).get("all", {}).get("current")
        free, total = torch.cuda.mem_get_info(self.index)
        return MemoryState(stats["allocated_bytes"]["all"]["current"], stats["reserved_bytes"]["all"]["current"],
                           split, free, total)

    def capacity(self) -> tuple[int, str]:
        """What torch's allocator can have on this device, bytes: the driver's free memory plus what
        the allocator reserves already, once CUDA runs in this process (memory held outside the
        allocator — other processes, NCCL, cuBLAS workspaces, the context — counts against it);
        before that, the device's total memory."""
        total = int(torch.cuda.get_device_properties(self.index).total_memory)
        if not torch.cuda.is_initialized():
            return total, (f"{self.label}'s memory (its total: CUDA has not started here, so what others hold "
                           "is unknown)")
        free, total = torch.cuda.mem_get_info(self.index)
        stats = self._stats()
        reserved = int(stats["reserved_bytes"]["all"]["current"]) if stats else 0
        outside = total - free - reserved
        gib = 2**30
        return int(free + reserved), (f"{self.label}'s memory free for torch's allocator "
                                      f"({(total - outside) / gib:.2f} of {total / gib:.2f} GiB: "
                                      f"{outside / gib:.2f} GiB is held outside it)")

    # -- timing ---------------------------------------------------------------------------
    def current_stream(self) -> Any:
        """The current stream of this device, as a cached ``torch.cuda.Stream``."""
        current = self._current
        if current is None:
            return torch.cuda.current_stream(self.index)
        key = current(self.index)  # (stream id, device index, device type): a cheap C call
        stream = self._streams.get(key)
        if stream is None:
            stream = torch.cuda.Stream(stream_id=key[0], device_index=key[1], device_type=key[2])
            self._streams[key] = stream
        return stream

    def record_event(self) -> Any:
        """A timing event from the pool (new ones only while the pool is empty), recorded now on
        the current stream: by the driver where it can (see the module doc), else by torch."""
        pool = self._pool
        if pool:
            event = pool.pop()
            driver = self._driver
            if driver is not None and event.cuda_event and self._driver_may_record():
                result = driver[0](event.cuda_event, torch._C._cuda_getCurrentRawStream(self.index))
                if result[0] == driver[1]:
                    return event
                self._driver = None  # refused (an error is the driver's, not the step's): torch from now on
                self.driver_refusal = f"cuEventRecord returned {result[0]!r}"
        else:
            event = torch.cuda.Event(enable_timing=True)
        event.record(self.current_stream())
        return event

    def _driver_may_record(self) -> bool:
        """This device is the current one (the driver records a NULL stream in the current
        context) and its stream captures no CUDA graph (an event recorded there is no timing)."""
        return torch._C._cuda_getDevice() == self.index and not torch._C._cuda_isCurrentStreamCapturing()

    def release_event(self, event: Any) -> None:
        """Give back an event that has been read (it may be recorded again)."""
        if len(self._pool) < EVENT_POOL_MAX:
            self._pool.append(event)

    def __repr__(self) -> str:
        return f"CudaBackend(cuda:{self.index})"
