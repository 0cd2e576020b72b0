"""Faithful fakes of ``torch.cuda`` and ``torch.mps`` for testing device paths on a CPU machine.

They follow the documented behaviour of the real modules:

* ``torch.cuda.memory_stats(device)`` returns ``{}`` until CUDA is initialised (any allocation,
  ``synchronize`` or ``current_device`` initialises it), then the caching allocator's keys
  (``allocated_bytes.all.{current,peak}``, ``reserved_bytes.all.{current,peak}``,
  ``num_alloc_retries``, ``num_ooms``). ``torch.cuda.memory_stats_as_nested_dict(device)`` and
  ``torch._C._cuda_memoryStats(index)`` return the same as the nested dict torch builds
  (``{"allocated_bytes": {"all": {"current", "peak", "allocated", "freed"}, "small_pool": ...,
  "large_pool": ...}, ..., "num_alloc_retries": n, "num_ooms": n}``; the private one takes an
  index and must not be called before CUDA is initialised, as torch's own wrapper ensures).
  Every read of either form counts in ``stats_calls``. Reserved memory grows in 2 MiB-rounded
  segments and is kept after a free until ``empty_cache``; ``reset_peak_memory_stats`` sets every
  peak to its current value, per device. A device argument may be None (current device), an int,
  a string or a ``torch.device``. An allocation beyond ``total`` raises ``torch.OutOfMemoryError``
  with CUDA's message ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity
  of ..."), counted in ``num_ooms``; ``inactive_split_bytes`` is what a test plants in
  ``devices[i].split``; ``torch.cuda.mem_get_info(i)`` returns (total − reserved − ``other``, total)
  where ``other`` stands for other processes. ``torch.cuda.memory._record_memory_history`` and
  ``_dump_snapshot`` keep their calls in ``history_calls`` and write a small pickle; a history
  recorded with C++ frames (torch's default) is symbolized at the dump by the ``addr2line``
  processes torch starts and never ends, as the real one is.
* ``torch.xpu`` (:class:`FakeXpu`) is the fake ``torch.cuda`` under Intel's name, with Intel's
  out-of-memory error.
* ``torch.mps`` has ``current_allocated_memory`` (tensors), ``driver_allocated_memory`` (more: the
  driver's caches) and ``recommended_max_memory``, and no peak API.

* Work is asynchronous: :meth:`FakeCuda.launch` queues ``seconds`` of device work and returns at
  once. ``torch.cuda.Event(enable_timing=True).record(stream)`` marks the point the device reaches
  when the work queued so far is done; ``query()`` says (without blocking) whether it has been
  reached, ``synchronize()`` waits for it, and ``elapsed_time(end)`` gives milliseconds between
  two events and raises, as the real one does, if the end event has not completed.
  ``torch.cuda.synchronize()`` waits for all queued work. ``torch._C._cuda_getCurrentStream(i)``
  returns ``(stream_id, i, device_type)`` and ``torch.cuda.Stream(stream_id=, device_index=,
  device_type=)`` builds a stream object from it, as ``torch.cuda.current_stream`` does; streams
  built count in ``streams_built``.

* Every call costs what it cost on a real GPU: the fake CUDA busy-waits the host time
  :data:`CUDA_COSTS_US` gives for it (an H200's and an H100's figures, DESIGN.md) and counts it by
  kind in ``calls`` (and per thread in ``thread_calls``), so that the CPU suite and benchmarks see
  the CUDA time a row spends (``charged_ns``). ``FakeCuda(costs={})`` charges nothing.
* A process forked after CUDA started cannot use it, as with the real driver: in the child
  ``is_initialized()`` is False, ``torch.cuda._is_in_bad_fork()`` True, every call that would reach
  the driver (a stat read, a peak reset, a sync, a stream, a new event, an allocation) raises
  torch's "Cannot re-initialize CUDA in forked subprocess", an inherited event's methods raise
  "CUDA error: initialization error", and an inherited event that had been recorded, destroyed
  there, **aborts the child** (the real one's destructor calls CUDA and ``std::terminate`` ends
  the process: "DataLoader worker exited unexpectedly"). A fake retired at the end of its test
  (``retired = True``, the fixtures' teardown) stops aborting: garbage of an old test collected in
  a later test's child is not that test's fault.

Tests allocate on the fake with :meth:`FakeCuda.alloc` / :meth:`FakeMps.alloc` inside the measured
call, and read back what the fake saw (``sync_calls``, ``reset_calls``, ``event_syncs``, ``calls``).
"""

from __future__ import annotations

import collections
import enum
import itertools
import os
import sys
import threading
import time
import types
import uuid
import weakref
from typing import Any

import torch

_SEGMENT = 2 * 2**20


CUDA_COSTS_US: dict[str, float] = {
    "stats": 12.0,  # torch._C._cuda_memoryStats: the nested dict (H200, torch 2.11, 2026-11-27)
    "memory_stats": 78.0,  # torch.cuda.memory_stats: the flat dict, built in Python (H200)
    "memory_allocated": 80.0,  # torch.cuda.memory_allocated: calls memory_stats (H200)
    "event_create": 1.8,  # torch.cuda.Event(enable_timing=True) (H100, torch 2.11)
    "event_record": 7.8,  # Event.record: created + recorded 9.6 on the H200, less the creation
    "event_query": 0.7,  # Event.query (H100)
    "synchronize": 7.4,  # torch.cuda.synchronize on an idle device (H200), before any wait
    "reset_peak": 0.5,  # torch.cuda.reset_peak_memory_stats (H100; not yet measured on the H200)
    "driver_record": 0.23,  # cuEventRecord through cuda.bindings (RTX 4090, cuda-python PR #1856)
}
"""Host time, µs, each fake CUDA call charges (busy-waiting, holding the GIL as the real calls do).
Calls not listed (the current device or stream, mem_get_info, elapsed_time) are counted, not
charged: their cost on a GPU machine is not measured yet."""

class CUresult(enum.IntEnum):
    """``cuda.bindings.driver.CUresult``: the driver's result codes (those the fake returns)."""

    CUDA_SUCCESS = 0
    CUDA_ERROR_NOT_INITIALIZED = 3
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_INVALID_HANDLE = 400


FORKED_ERROR = ("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
                "you must use the 'spawn' start method")
"""What torch raises for a CUDA call in a process forked after CUDA started."""


def _busy(us: float) -> None:
    end = time.perf_counter_ns() + int(us * 1e3)
    while time.perf_counter_ns() < end:
        pass


class _FakeEvent:
    """Like torch.cuda.Event / torch.mps.event.Event on a fake device timeline. Created on the
    device (``handle``) when first recorded, as torch's is."""

    def __init__(self, owner: Any, enable_timing: bool = False) -> None:
        owner.charge("event_create")
        self.owner = owner
        self.enable_timing = enable_timing
        self.at: float | None = None
        self.created_in: int | None = None  # the pid whose first record created it on the device
        self.handle = 0  # cuda_event: the device's handle, 0 until created
        owner.events_created += 1

    @property
    def cuda_event(self) -> int:
        return self.handle

    def _usable(self) -> None:
        if self.created_in is not None and self.created_in != os.getpid() and self.owner.forked():
            raise RuntimeError("CUDA error: initialization error")

    def record(self, stream: Any = None) -> None:
        self.owner.usable()
        self._usable()
        self.owner.charge("event_record")
        self.mark(stream)

    def mark(self, stream: Any) -> None:
        """Record it on the timeline (what the driver does, however it is asked to)."""
        if self.created_in is None:
            self.created_in = os.getpid()
            self.handle = self.owner.new_handle(self)
            self.owner.begin()
        self.owner.records.append(stream)
        self.at = max(time.perf_counter(), self.owner.free_at)

    def query(self) -> bool:
        self._usable()
        self.owner.event_queries += 1
        self.owner.charge("event_query")
        return self.at is None or time.perf_counter() >= self.at

    def synchronize(self) -> None:
        self._usable()
        self.owner.event_syncs += 1
        self.owner.charge("event_sync")
        if self.at is not None:
            time.sleep(max(0.0, self.at - time.perf_counter()))

    def elapsed_time(self, end: _FakeEvent) -> float:
        self._usable()
        self.owner.charge("elapsed_time")
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.at is None or end.at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        if time.perf_counter() < end.at:
            raise RuntimeError("CUDA error: device not ready")
        return (end.at - self.at) * 1e3

    def __del__(self) -> None:
        # torch's CUDAEvent destructor sets the device and destroys the event: in a forked child
        # CUDA fails there, the error escapes a destructor and std::terminate aborts the process.
        created = getattr(self, "created_in", None)
        owner = getattr(self, "owner", None)
        if created is not None and created != os.getpid() and owner is not None and owner.forked() \
                and not owner.retired:
            os.write(2, b"terminate called after throwing an instance of 'c10::Error'\n"
                        b"  what():  CUDA error: initialization error (fake: a CUDA event inherited from the "
                        b"parent was destroyed in a forked child)\n")
            os.abort()


class _Timeline:
    """The device's queue: when the work queued so far will be done."""

    costs: dict[str, float] = {}  # what each call charges, µs (none: see FakeCuda)

    def __init__(self) -> None:
        self.free_at = 0.0
        self.events_created = 0
        self.event_syncs = 0
        self.event_queries = 0
        self.records: list[Any] = []
        self.retired = False
        self.calls: collections.Counter[str] = collections.Counter()
        self.thread_calls: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self._by_ident: dict[int, collections.Counter[str]] = {}
        self.charged_ns = 0
        self._handles = itertools.count(0x7F00_0000_0000, 0x40)
        self.by_handle: weakref.WeakValueDictionary[int, _FakeEvent] = weakref.WeakValueDictionary()

    def charge(self, kind: str) -> None:
        """Count one call of ``kind`` and spend its host time (:data:`CUDA_COSTS_US`)."""
        self.calls[kind] += 1
        ident = threading.get_ident()
        mine = self._by_ident.get(ident)
        if mine is None:  # named once per thread (a name read per call would cost more than the call)
            mine = self._by_ident[ident] = self.thread_calls[threading.current_thread().name]
        mine[kind] += 1
        us = self.costs.get(kind)
        if us:
            t0 = time.perf_counter_ns()
            _busy(us)
            self.charged_ns += time.perf_counter_ns() - t0

    def forked(self) -> bool:
        """Whether this process was forked after the device started (a device that cannot run there)."""
        return False

    def usable(self) -> None:
        """Raise what the real module raises for a device call where the device cannot run."""

    def begin(self) -> None:
        """The device starts (an event created on it starts CUDA's context)."""

    def new_handle(self, event: _FakeEvent) -> int:
        handle = next(self._handles)
        self.by_handle[handle] = event
        return handle

    def launch(self, seconds: float) -> None:
        """Queue ``seconds`` of device work; returns at once, like a kernel launch."""
        self.free_at = max(time.perf_counter(), self.free_at) + seconds

    def wait_idle(self) -> None:
        time.sleep(max(0.0, self.free_at - time.perf_counter()))

    def Event(self, enable_timing: bool = False) -> _FakeEvent:  # torch's name
        return _FakeEvent(self, enable_timing)


class FakeStream:
    """Like ``torch.cuda.Stream``: identified by (stream id, device index, device type)."""

    def __init__(self, owner: Any, stream_id: int = 0, device_index: int = 0, device_type: int = 1) -> None:
        self.stream_id, self.device_index, self.device_type = stream_id, device_index, device_type
        owner.streams_built += 1

    @classmethod
    def of(cls, stream_id: int, device_index: int) -> FakeStream:
        """The stream a raw handle names (no Python stream object built: not counted)."""
        stream = cls.__new__(cls)
        stream.stream_id, stream.device_index, stream.device_type = stream_id, device_index, 1
        return stream

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeStream) and (self.stream_id, self.device_index) == (
            other.stream_id, other.device_index)

    def __hash__(self) -> int:
        return hash((self.stream_id, self.device_index))

    def __repr__(self) -> str:
        return f"FakeStream(id={self.stream_id}, device={self.device_index})"


def _stat(current: int, peak: int, allocated: int = 0, freed: int = 0) -> dict[str, int]:
    return {"current": current, "peak": peak, "allocated": allocated, "freed": freed}


class _CudaDevice:
    def __init__(self) -> None:
        self.allocated = self.allocated_peak = 0
        self.allocated_total = self.freed_total = 0  # bytes ever allocated and freed (only grow)
        self.reserved = self.reserved_peak = 0
        self.retries = 0
        self.ooms = 0
        self.split = 0  # inactive_split_bytes: free parts of split blocks (planted by tests)


class FakeCuda(_Timeline):
    """Stands in for ``torch.cuda``: ``n`` devices, a caching allocator, per-device peak counters,
    and one asynchronous work queue with events."""

    kind = "cuda"  # the torch device type it stands for

    def __init__(self, n: int = 2, total_bytes: int = 16 * 2**30, costs: dict[str, float] | None = None,
                 driver: bool = True) -> None:
        super().__init__()
        self.costs = CUDA_COSTS_US if costs is None else costs
        self.driver = driver  # cuda.bindings.driver installed beside torch (its CUDA wheels bring it)
        self.driver_refuses: int | None = None  # a CUresult every cuEventRecord returns instead of success
        self.capturing = False  # the current stream is capturing a CUDA graph
        self.started_in: int | None = None  # the pid in which CUDA started (initialised)
        self.devices = [_CudaDevice() for _ in range(n)]
        # CUDA index i is NVML's GPU n-1-i: the two orders differ, as with CUDA_VISIBLE_DEVICES.
        self.uuids = [uuid.UUID(int=1000 + (n - 1 - i)) for i in range(n)]
        self.total = total_bytes
        self.current = 0
        self.initialized = False
        self.sync_calls: list[int] = []
        self.reset_calls: list[int] = []
        self.stats_calls = 0
        self.stats_on: list[int] = []  # device index of every nested stats read
        self.streams_built = 0
        self.other = 0  # bytes other processes hold on each device (mem_get_info)
        self.history_calls: list[tuple[str, Any]] = []
        self.stream_id = 0  # the current stream's id (tests switch streams by changing it)
        self._blocks: dict[int, tuple[int, int]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()

    @property
    def initialized(self) -> bool:
        return self.started_in is not None

    @initialized.setter
    def initialized(self, value: bool) -> None:
        if not value:
            self.started_in = None
        elif self.started_in is None:
            self.started_in = os.getpid()

    def forked(self) -> bool:
        """torch.cuda._is_in_bad_fork(): this process was forked after CUDA started in its parent."""
        return self.started_in is not None and self.started_in != os.getpid()

    def usable(self) -> None:
        if self.forked():
            raise RuntimeError(FORKED_ERROR)

    def begin(self) -> None:
        self.initialized = True

    # -- what tests use --------------------------------------------------------------------
    def alloc(self, nbytes: int, device: Any = None) -> int:
        """Allocate ``nbytes`` on a device; returns a handle for :meth:`free`."""
        self.usable()
        i = self._index(device)
        self.initialized = True
        with self._lock:
            d = self.devices[i]
            d.allocated += nbytes
            d.allocated_total += nbytes
            if d.allocated > d.reserved:
                need = d.allocated - d.reserved
                d.reserved += -(-need // _SEGMENT) * _SEGMENT
                if d.reserved > self.total:
                    d.ooms += 1
                    d.allocated -= nbytes
                    d.allocated_total -= nbytes
                    d.reserved -= -(-need // _SEGMENT) * _SEGMENT
                    raise self.out_of_memory(nbytes, i, d)
            d.allocated_peak = max(d.allocated_peak, d.allocated)
            d.reserved_peak = max(d.reserved_peak, d.reserved)
            handle = next(self._ids)
            self._blocks[handle] = (i, nbytes)
            return handle

    def free(self, handle: int) -> None:
        with self._lock:
            i, nbytes = self._blocks.pop(handle)
            self.devices[i].allocated -= nbytes
            self.devices[i].freed_total += nbytes

    def out_of_memory(self, nbytes: int, i: int, d: _CudaDevice) -> BaseException:
        """The error an allocation of ``nbytes`` on device ``i`` that does not fit raises."""
        return torch.OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {nbytes / 2**30:.2f} GiB. GPU {i} has a total "
            f"capacity of {self.total / 2**30:.2f} GiB of which "
            f"{(self.total - d.reserved - self.other) / 2**20:.2f} MiB is free. Of the allocated memory "
            f"{d.allocated / 2**30:.2f} GiB is allocated by PyTorch (fake)")

    # -- the torch.cuda API ---------------------------------------------------------------
    def _index(self, device: Any) -> int:
        if device is None:
            return self.current
        if type(device) is int and 0 <= device < len(self.devices):
            return device
        if isinstance(device, str):
            device = torch.device(device)
        if isinstance(device, torch.device):
            if device.type != self.kind:
                raise ValueError(f"Expected a {self.kind} device, but got: {device}")
            return self.current if device.index is None else device.index
        if isinstance(device, int):
            if not 0 <= device < len(self.devices):
                raise RuntimeError("CUDA error: invalid device ordinal")
            return device
        raise TypeError(f"bad device {device!r}")

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialized and not self.forked()

    def device_count(self) -> int:
        return len(self.devices)

    def current_device(self) -> int:
        self.usable()
        self.charge("current_device")
        self.initialized = True
        return self.current

    def set_device(self, device: Any) -> None:
        self.current = self._index(device)

    def synchronize(self, device: Any = None) -> None:
        self.usable()
        self.charge("synchronize")
        self.initialized = True
        self.sync_calls.append(self._index(device))
        self.wait_idle()

    def current_stream(self, device: Any = None) -> FakeStream:
        self.usable()
        self.charge("current_stream")
        return FakeStream(self, self.stream_id, self._index(device), 1)

    def get_current_stream_data(self, index: int) -> tuple[int, int, int]:
        """``torch._C._cuda_getCurrentStream``: (stream id, device index, device type)."""
        self.usable()
        self.charge("current_stream")
        return (self.stream_id, self._index(index), 1)

    def raw_stream(self, index: int) -> int:
        """``torch._C._cuda_getCurrentRawStream(i)``: the current stream's ``cudaStream_t`` (0: the
        default stream)."""
        self.usable()
        self.charge("current_stream")
        i = self._index(index)
        return 0 if self.stream_id == 0 else 0x5000_0000 + (self.stream_id << 8) + i

    def get_device(self) -> int:
        """``torch._C._cuda_getDevice()``."""
        self.usable()
        return self.current

    def is_capturing(self) -> bool:
        """``torch._C._cuda_isCurrentStreamCapturing()``."""
        return self.capturing

    def cu_event_record(self, event: Any, stream: Any) -> tuple[Any, ...]:
        """``cuda.bindings.driver.cuEventRecord(hEvent, hStream)``: ``(CUresult,)``; the event must
        have been created (recorded once by torch), the NULL stream is the current device's."""
        self.charge("driver_record")
        if self.forked():
            return (CUresult.CUDA_ERROR_NOT_INITIALIZED,)
        if self.driver_refuses is not None:
            return (CUresult(self.driver_refuses),)
        target = self.by_handle.get(int(event))
        if target is None:
            return (CUresult.CUDA_ERROR_INVALID_HANDLE,)
        raw = int(stream)
        stream_id, index = (0, self.current) if raw == 0 else ((raw - 0x5000_0000) >> 8, raw & 0xFF)
        target.mark(FakeStream.of(stream_id, index))
        return (CUresult.CUDA_SUCCESS,)

    def Stream(self, stream_id: int = 0, device_index: int = 0, device_type: int = 1) -> FakeStream:  # torch's name
        return FakeStream(self, stream_id, device_index, device_type)

    def get_device_properties(self, device: Any = None) -> Any:
        i = self._index(device)
        return types.SimpleNamespace(name=f"Fake GPU {i}", uuid=self.uuids[i], total_memory=self.total,
                                     multi_processor_count=132, major=9, minor=0)

    def memory_stats(self, device: Any = None) -> dict[str, Any]:
        self.stats_calls += 1
        self.charge("memory_stats")
        if not self.is_initialized():
            return {}
        d = self.devices[self._index(device)]
        return {
            "allocated_bytes.all.current": d.allocated,
            "allocated_bytes.all.peak": d.allocated_peak,
            "reserved_bytes.all.current": d.reserved,
            "reserved_bytes.all.peak": d.reserved_peak,
            "num_alloc_retries": d.retries,
            "num_ooms": d.ooms,
        }

    def memory_stats_as_nested_dict(self, device: Any = None) -> dict[str, Any]:
        if not self.is_initialized():
            return {}
        return self.raw_memory_stats(self._index(device))

    def raw_memory_stats(self, index: int) -> dict[str, Any]:
        """``torch._C._cuda_memoryStats(index)``: the nested dict (CUDA must be initialised)."""
        self.stats_calls += 1
        self.usable()
        self.charge("stats")
        if not self.initialized:
            raise RuntimeError("fake: torch._C._cuda_memoryStats called before CUDA was initialised")
        self.stats_on.append(self._index(index))
        d = self.devices[self._index(index)]
        empty = _stat(0, 0)
        allocated = _stat(d.allocated, d.allocated_peak, d.allocated_total, d.freed_total)
        return {
            "num_alloc_retries": d.retries,
            "num_ooms": d.ooms,
            "allocated_bytes": {"all": allocated, "small_pool": empty, "large_pool": dict(allocated)},
            "reserved_bytes": {"all": _stat(d.reserved, d.reserved_peak), "small_pool": empty,
                               "large_pool": _stat(d.reserved, d.reserved_peak)},
            "inactive_split_bytes": {"all": _stat(d.split, d.split), "small_pool": empty,
                                     "large_pool": _stat(d.split, d.split)},
        }

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        """``torch.cuda.mem_get_info``: (free, total) bytes as the driver sees them."""
        self.usable()
        self.charge("mem_get_info")
        d = self.devices[self._index(device)]
        return self.total - d.reserved - self.other, self.total

    def record_memory_history(self, enabled: Any = "all", context: Any = "all", stacks: str = "all",
                              max_entries: int = sys.maxsize, **_: Any) -> None:
        """``torch.cuda.memory._record_memory_history`` (its defaults: C++ frames too)."""
        self.history_stacks = stacks
        self.history_calls.append(("record", None) if enabled is None else ("record", max_entries, stacks))

    def dump_snapshot(self, filename: str = "dump_snapshot.pickle") -> None:
        """``torch.cuda.memory._dump_snapshot``: a pickle of the allocator's segments. A history
        that records C++ frames (``stacks="all"``) has them symbolized as torch does, by the
        ``addr2line`` processes torch starts and keeps for the process's life (one per library)."""
        import pickle

        self.history_calls.append(("dump", filename))
        if getattr(self, "history_stacks", None) == "all":
            from torch._C._profiler import gather_traceback, symbolize_tracebacks

            symbolize_tracebacks([gather_traceback(python=True, script=True, cpp=True)])
        with open(filename, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [[]], "fake": True}, f)

    def memory_allocated(self, device: Any = None) -> int:
        self.charge("memory_allocated")
        if not self.is_initialized():
            return 0
        return self.devices[self._index(device)].allocated

    def max_memory_allocated(self, device: Any = None) -> int:
        return self.devices[self._index(device)].allocated_peak

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        self.usable()
        self.charge("reset_peak")
        i = self._index(device)
        self.reset_calls.append(i)
        d = self.devices[i]
        d.allocated_peak = d.allocated
        d.reserved_peak = d.reserved

    def empty_cache(self) -> None:
        for d in self.devices:
            d.reserved = -(-d.allocated // _SEGMENT) * _SEGMENT

    def install(self, monkeypatch: Any) -> FakeCuda:
        for name in (
            "is_available", "is_initialized", "device_count", "current_device", "set_device",
            "synchronize", "memory_stats", "memory_allocated", "max_memory_allocated",
            "reset_peak_memory_stats", "empty_cache", "current_stream", "Event",
            "get_device_properties", "memory_stats_as_nested_dict", "Stream", "mem_get_info",
        ):
            monkeypatch.setattr(torch.cuda, name, getattr(self, name))
        # torch.manual_seed seeds every device's generator once CUDA is initialized: the fake's
        # devices each have one (CPU generators), and torch.cuda.random sees the fake's count
        monkeypatch.setattr(torch.cuda, "default_generators", tuple(torch.Generator() for _ in self.devices))
        for name in ("device_count", "is_initialized", "current_device"):
            monkeypatch.setattr(torch.cuda.random, name, getattr(self, name))
        monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", self.record_memory_history)
        monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", self.dump_snapshot)
        monkeypatch.setattr(torch._C, "_cuda_memoryStats", self.raw_memory_stats, raising=False)
        monkeypatch.setattr(torch._C, "_cuda_getCurrentStream", self.get_current_stream_data, raising=False)
        monkeypatch.setattr(torch.cuda, "_raw_device_uuid_nvml", self.raw_device_uuid_nvml, raising=False)
        monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", self.forked, raising=False)
        monkeypatch.setattr(torch._C, "_cuda_isInBadFork", self.forked, raising=False)
        monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", self.raw_stream, raising=False)
        monkeypatch.setattr(torch._C, "_cuda_getDevice", self.get_device, raising=False)
        monkeypatch.setattr(torch._C, "_cuda_isCurrentStreamCapturing", self.is_capturing, raising=False)
        cuda_pkg = types.ModuleType("cuda")
        bindings = types.ModuleType("cuda.bindings")
        driver = types.ModuleType("cuda.bindings.driver")
        driver.CUresult = CUresult  # type: ignore[attr-defined]
        driver.cuEventRecord = self.cu_event_record  # type: ignore[attr-defined]
        bindings.driver = driver  # type: ignore[attr-defined]
        cuda_pkg.bindings = bindings  # type: ignore[attr-defined]
        for name, module in (("cuda", cuda_pkg), ("cuda.bindings", bindings), ("cuda.bindings.driver", driver)):
            monkeypatch.setitem(sys.modules, name, module if self.driver else None)
        return self

    def raw_device_uuid_nvml(self) -> list[str]:
        """``torch.cuda._raw_device_uuid_nvml()``: NVML's UUIDs in NVML's order (the reverse of
        CUDA's here, as ``CUDA_DEVICE_ORDER=FASTEST_FIRST`` can make it), without starting CUDA."""
        return [f"GPU-{u}" for u in sorted(self.uuids, key=lambda u: u.int)]


class FakeXpu(FakeCuda):
    """Stands in for ``torch.xpu`` (Intel GPUs), whose API mirrors ``torch.cuda``'s: the same
    caching allocator and counters (``memory_stats``' flat keys, ``reset_peak_memory_stats``,
    ``mem_get_info``, ``get_device_properties``), current device and asynchronous work queue. An
    allocation that does not fit raises what Intel's runtime raises under IPEX: a ``RuntimeError``
    naming ``PI_ERROR_OUT_OF_RESOURCES``, which says neither "out of memory" nor the size."""

    kind = "xpu"

    def out_of_memory(self, nbytes: int, i: int, d: _CudaDevice) -> BaseException:
        return RuntimeError("Native API failed. Native API returns: -5 (PI_ERROR_OUT_OF_RESOURCES) "
                            "-5 (PI_ERROR_OUT_OF_RESOURCES)")

    def install(self, monkeypatch: Any) -> FakeXpu:
        for name in ("is_available", "is_initialized", "device_count", "current_device", "set_device",
                     "synchronize", "memory_stats", "reset_peak_memory_stats", "mem_get_info",
                     "get_device_properties"):
            monkeypatch.setattr(torch.xpu, name, getattr(self, name), raising=False)
        return self


class FakeMps(_Timeline):
    """Stands in for ``torch.mps`` (and ``torch.backends.mps.is_available``). ``with_events=False``
    stands for a torch without ``torch.mps.Event``."""

    def __init__(self, recommended_max: int = 24 * 2**30, driver_overhead: int = 64 * 2**20,
                 with_events: bool = True, with_allocator_stats: bool = False) -> None:
        super().__init__()
        self.with_events = with_events
        self.with_allocator_stats = with_allocator_stats
        self.peak = 0
        self.resets = 0
        self.allocated = 0
        self.recommended = recommended_max
        self.overhead = driver_overhead
        self.sync_calls = 0
        self.reads = 0
        self._blocks: dict[int, int] = {}
        self._ids = itertools.count()

    def alloc(self, nbytes: int) -> int:
        handle = next(self._ids)
        self._blocks[handle] = nbytes
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)
        return handle

    def free(self, handle: int) -> None:
        self.allocated -= self._blocks.pop(handle)

    def current_allocated_memory(self) -> int:
        self.reads += 1
        return self.allocated

    def driver_allocated_memory(self) -> int:
        return self.allocated + self.overhead

    def recommended_max_memory(self) -> int:
        return self.recommended

    def memory_stats(self, device: Any = None) -> dict[str, int]:
        """``torch.accelerator.memory.memory_stats`` as a torch whose MPS allocator backs it gives
        it (reserved: the tensors' bytes plus the driver's overhead)."""
        self.reads += 1
        return {"allocated_bytes.all.current": self.allocated, "allocated_bytes.all.peak": self.peak,
                "reserved_bytes.all.current": self.allocated + self.overhead,
                "reserved_bytes.all.peak": self.peak + self.overhead}

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        self.resets += 1
        self.peak = self.allocated

    def synchronize(self) -> None:
        self.sync_calls += 1
        self.wait_idle()

    def is_available(self) -> bool:
        return True

    def install(self, monkeypatch: Any) -> FakeMps:
        for name in ("current_allocated_memory", "driver_allocated_memory",
                     "recommended_max_memory", "synchronize"):
            monkeypatch.setattr(torch.mps, name, getattr(self, name))
        if self.with_events:
            monkeypatch.setattr(torch.mps, "Event", self.Event, raising=False)
        else:
            monkeypatch.delattr(torch.mps, "Event", raising=False)
        monkeypatch.setattr(torch.backends.mps, "is_available", self.is_available)
        if self.with_allocator_stats:
            for name in ("memory_stats", "reset_peak_memory_stats"):
                monkeypatch.setattr(torch.accelerator.memory, name, getattr(self, name))
            monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: torch.device("mps"))
        return self


from tests.fake_nvml import FakeNvml  # noqa: E402 - re-exported: it has no torch, the sampler process imports it

__all__ = ["FakeCuda", "FakeMps", "FakeNvml", "FakeXpu"]
