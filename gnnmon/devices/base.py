"""The protocol every device backend follows (``gnnmon.devices`` picks one per device and caches it),
and the raw counters it gives. A backend answers raw questions (bytes now, the highest inside a
window, what its allocator holds, its memory at a failed allocation, its capacity); the
measurements that fill a row name the figures (:mod:`gnnmon.measure.memory`,
:mod:`gnnmon.record.oom_row`, declared in :mod:`gnnmon.figures`). What a kind of device says
without a backend (in use, its collectives' device, its errors' text) is its
:class:`~gnnmon.devices.registry.BackendKind`."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import torch

EVENT_POOL_MAX = 1 << 16
"""Free timing events a backend keeps (more are left to the garbage collector). The pool settles
at the most events ever in flight at once — rows waiting to be read (up to the run's backlog of
4,096, or the 256 a run without sinks drains at once) × events per row (2, plus 2 per phase) — so
that, in a steady loop, no step creates an event (1.8 µs, and its first record goes through torch:
8-10 µs) or frees one. A smaller cap made a run without sinks create 6 of its 8 events a row anew."""


class MemoryWindow(NamedTuple):
    """What one ended memory window read, in bytes (counts where said).

    ``start``, ``end``, ``peak``: memory held by tensors (the host: the process's RSS) when the
    window opened, when it closed, and the highest in between; ``how``: how that highest was read
    (``measured:<counter>``, exact, or ``sampled:<reader>@<interval>ms``, which can miss a short
    peak). Where the device has them: ``reserved``, what its caching allocator holds from the
    device, at start, end and highest (at least what tensors hold); ``driver``, what the device's
    driver holds for the process (its caches included), at start, end and highest, and the most it
    recommends holding (None where it cannot say); ``retries`` and ``failures``, allocations the
    allocator retried after freeing its cache, and refused, inside the window (counts);
    ``children``, child processes' RSS at start, end and highest (sampled; already in the three
    above)."""

    start: int
    end: int
    peak: int
    how: str
    reserved: tuple[int, int, int] | None = None
    driver: tuple[int, int, int, int | None] | None = None
    retries: int | None = None
    failures: int | None = None
    children: tuple[int, int, int] | None = None


class MemoryState(NamedTuple):
    """A device's memory when an allocation on it failed, in bytes; None where the device cannot
    say. ``allocated``: held by tensors (the host: the process's RSS); ``reserved``: what its
    allocator holds from the device (at least ``allocated``); ``fragmented``: of the reserved bytes
    no tensor holds, the free parts of split blocks (a request larger than each cannot use them);
    ``free`` and ``total``: the device's free memory and all of it."""

    allocated: int
    reserved: int | None
    fragmented: int | None
    free: int | None
    total: int | None


@runtime_checkable
class Backend(Protocol):
    """What gnnmon needs from a device.

    ``name`` is its kind's device type (``"cuda"``, ``"mps"``, ``"cpu"``, or a registered one);
    ``device`` the ``torch.device`` measured.
    ``memory_is_host`` is True when device memory *is* the process's RSS (the CPU backend).
    """

    name: str
    device: torch.device
    label: str  # str(device), made once: the row's ``device`` field
    memory_is_host: bool

    def synchronize(self) -> None:
        """Wait until the device has finished all queued work (no-op on the CPU)."""

    def record_event(self) -> Any:
        """A timing event recorded now on the device's current stream, or None if the device has
        no events (the CPU, whose work is synchronous). Events have ``query()``,
        ``synchronize()`` and ``elapsed_time(end)`` (milliseconds), like ``torch.cuda.Event``;
        they come from a pool: give each back with :meth:`release_event` once read."""

    def release_event(self, event: Any) -> None:
        """Return a read event to the pool."""

    def open_window(self, sample_interval: float) -> Any:
        """Start a nesting-safe peak window; returns a token for :meth:`close_window`."""

    def close_window(self, token: Any) -> MemoryWindow:
        """End a window; returns what it read."""

    def memory_state(self) -> MemoryState | None:
        """The device's memory now, read after an allocation failed (never on the step's path);
        None where the device holds nothing yet (CUDA not started)."""

    # Optional: ``activity(fresh: bool) -> int``, a count that changes whenever the device's
    # allocator hands out memory (CUDA: bytes ever allocated), read anew or (``fresh`` False) from
    # the last read. A backend that has it measures a call whose arguments are on the host, while
    # the device is in use, on whichever of the two did the work (gnnmon.measure.row_device).

    def capacity(self) -> tuple[int, str]:
        """All the memory the device offers the process, in bytes, and what that is in words
        (``"cuda:0's memory"``, ``"the machine's RAM"``): what a forecast batch must fit in."""
