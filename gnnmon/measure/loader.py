"""The data pipeline, split: ``for batch in gnnmon.watch_loader(loader):``.

Iterating the watch iterates the loader and times the wait for each batch (``data_wait_s``: the
time the training loop stood in ``next()``, in this process). The batch's figures go on the next
top-level row opened (the step that consumes the batch; if two batches are taken before a row
opens, the later one's).

For PyG's ``NeighborLoader`` / ``LinkNeighborLoader`` (any loader with a ``node_sampler`` or
``link_sampler`` and ``filter_fn``), the time inside the loader is split, wherever it runs (in a
worker process too: the times travel back with the batch, and are taken off it before you get
it):

* ``data_sample_s``: neighbour sampling (the sampler's ``sample_from_nodes`` / ``_edges``);
* ``data_gather_s``: joining the sampled nodes with their features (``filter_fn`` without the
  transform);
* ``data_transform_s``: the loader's ``transform`` (your collation or augmentation);
* ``data_hop_<k>_nodes``: nodes per hop (hop 0: the seeds), from ``num_sampled_nodes``.

Each batch's row carries the loader's settings too (:func:`loader_settings`: ``data_workers``,
``data_persistent``, ``data_sampler``), which the input diagnosis reads to advise; ``gnnmon run``
records them, and a batch's times and nodes per hop (:func:`add_batch`), by the same functions.

``to=device`` moves each batch there (``batch.to(device, non_blocking=True)``) and times it
(``data_to_device_s``, host time: on a GPU the time to queue the copy from pinned memory, or to
copy from pageable memory).

Each pass over the watch (an epoch) puts its wrappers on the loader when it starts and takes them
off when it ends — exhausted, broken off, garbage-collected, or its ``with`` left — so the loader
iterated directly afterwards is the loader as it was. Passes that overlap on one loader share one
set of wrappers (never one wrapper around another). The wrappers never change what the loader
yields: a batch's times travel on the batch object as a hidden attribute (not a field: PyG's
``keys()``, ``to()`` and pickling between processes leave it be), which the watch takes off. A
worker that outlives the pass (``persistent_workers=True``) keeps timing its batches; a direct
iteration then gets the loader's own batches, with the hidden attribute left on them.
"""

from __future__ import annotations

import inspect
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from gnnmon.devices.resolve import parse_device
from gnnmon.record import state

TIMES = "_gnnmon_loader_times"
"""The hidden attribute (in the object's ``__dict__``, not a PyG field) that carries a batch's
loader times from where they are measured (a worker process too) to the watch."""


def _attach(obj: Any, times: dict[str, float]) -> None:
    """Put ``times`` on ``obj`` (merged with what it carries); an object without a ``__dict__``
    goes without (its times are lost, never the object)."""
    own = getattr(obj, "__dict__", None)
    if isinstance(own, dict):
        carried = own.get(TIMES)
        own[TIMES] = {**carried, **times} if carried else times


def take_times(obj: Any) -> dict[str, float] | None:
    """The loader times ``obj`` carries, taken off it; None where it carries none."""
    own = getattr(obj, "__dict__", None)
    return own.pop(TIMES, None) if isinstance(own, dict) else None


def _add(times: dict[str, float], name: str, t0: int) -> None:
    times[name] = times.get(name, 0.0) + (time.perf_counter_ns() - t0) / 1e9


class _Clock:
    """The times of the batch being made in this process (set by the collate or filter wrapper
    around the sampler and transform wrappers it calls); picklable, as the wrappers are, so that a
    ``spawn`` worker gets them."""

    __slots__ = ("times",)

    def __init__(self) -> None:
        self.times: dict[str, float] | None = None


class _Timed:
    """A wrapper around one of a loader's functions (module level: picklable for workers). A
    bound method is kept as its function and its object: pickled as a method it would be looked
    up again on the object in the worker, where the attribute is this wrapper."""

    __slots__ = ("func", "owner", "clock", "kind")

    def __init__(self, func: Callable[..., Any], clock: _Clock, kind: str) -> None:
        self.owner = getattr(func, "__self__", None) if inspect.ismethod(func) else None
        self.func = func.__func__ if self.owner is not None else func  # type: ignore[attr-defined]
        self.clock, self.kind = clock, kind

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        clock, kind = self.clock, self.kind
        if kind == "sample" or kind == "transform":  # inside a collate or filter being timed
            t0 = time.perf_counter_ns()
            try:
                return self.func(*args, **kwargs) if self.owner is None else self.func(self.owner, *args, **kwargs)
            finally:
                if clock.times is not None:
                    _add(clock.times, "data_sample_s" if kind == "sample" else "data_transform_s", t0)
        times: dict[str, float] = {}
        if kind == "filter":  # the sampler's output, with the times its collate measured (a worker's too)
            carried = take_times(args[0]) if args else None
            if carried:
                times.update(carried)
        outer, clock.times = clock.times, times
        t0 = time.perf_counter_ns()
        try:
            out = self.func(*args, **kwargs) if self.owner is None else self.func(self.owner, *args, **kwargs)
        finally:
            clock.times = outer
        if kind == "filter":
            _add(times, "data_gather_s", t0)
            times["data_gather_s"] -= times.get("data_transform_s", 0.0)
        _attach(out, times)
        return out


_MISSING: Any = object()


class _Split:
    """Wrappers put on one PyG loader instance (its ``collate_fn``, ``filter_fn``, ``transform``
    and its sampler's sampling method) for as long as a pass of some watch is open on it;
    :meth:`remove` puts the originals back."""

    def __init__(self, loader: Any) -> None:
        sampler = getattr(loader, "node_sampler", None) or getattr(loader, "link_sampler", None)
        method = "sample_from_nodes" if hasattr(loader, "node_sampler") else "sample_from_edges"
        self.saved: list[tuple[Any, str, Any]] = []  # (object, attribute, the instance's own value)
        self.passes = 0  # open passes sharing these wrappers
        clock = _Clock()
        transform = getattr(loader, "transform", None)
        self._set(sampler, method, _Timed(getattr(sampler, method), clock, "sample"))
        self._set(loader, "collate_fn", _Timed(loader.collate_fn, clock, "collate"))
        self._set(loader, "filter_fn", _Timed(loader.filter_fn, clock, "filter"))
        if transform is not None:
            self._set(loader, "transform", _Timed(transform, clock, "transform"))

    def _set(self, obj: Any, name: str, value: Any) -> None:
        self.saved.append((obj, name, vars(obj).get(name, _MISSING)))
        object.__setattr__(obj, name, value)  # past DataLoader's guard on attributes set after init

    def remove(self) -> None:
        for obj, name, own in reversed(self.saved):
            if own is _MISSING:  # it was the class's method
                object.__delattr__(obj, name)
            else:
                object.__setattr__(obj, name, own)
        self.saved.clear()


_SPLITS: weakref.WeakKeyDictionary[Any, _Split] = weakref.WeakKeyDictionary()
"""The loaders a pass is open on now, and their wrappers (one set per loader, however many passes)."""


def _splittable(loader: Any) -> bool:
    return (hasattr(loader, "node_sampler") or hasattr(loader, "link_sampler")) and hasattr(loader, "filter_fn")


def _begin_pass(loader: Any) -> _Split:
    split = _SPLITS.get(loader)
    if split is None:
        split = _SPLITS[loader] = _Split(loader)
    split.passes += 1
    return split


def _end_pass(loader: Any, split: _Split) -> None:
    split.passes -= 1
    if split.passes <= 0 and _SPLITS.get(loader) is split:
        del _SPLITS[loader]
        split.remove()


def loader_settings(loader: Any) -> dict[str, Any]:
    """The settings of ``loader`` that each row of one of its batches carries (``watch_loader``'s
    and ``gnnmon run``'s alike; the input diagnosis reads them to advise): ``data_workers`` (its
    ``num_workers``), ``data_persistent`` (1 or 0: ``persistent_workers``, where it has workers) and
    ``data_sampler`` (``"gnnmon"`` where gnnmon's pure-PyTorch neighbour sampler samples: neither
    pyg-lib nor torch-sparse was there). A setting the loader does not have is left out."""
    settings: dict[str, Any] = {}
    workers = getattr(loader, "num_workers", None)
    if isinstance(workers, int):
        settings["data_workers"] = workers
        kept = getattr(loader, "persistent_workers", None)  # workers kept across epochs (torch's DataLoader)
        if isinstance(kept, bool) and workers:
            settings["data_persistent"] = int(kept)
    if str(getattr(loader, "sampler_name", "")).startswith("gnnmon"):  # our pure-PyTorch sampler
        settings["data_sampler"] = "gnnmon"
    return settings


def add_batch(batch: Any, fields: dict[str, Any]) -> None:
    """What ``batch`` carries, added into ``fields`` (``watch_loader``'s and ``gnnmon run``'s
    alike): its loader times (seconds, taken off it: ``data_sample_s``, ``data_gather_s``,
    ``data_transform_s``) and its nodes per hop (``data_hop_<k>_nodes``, from
    ``num_sampled_nodes``); summed with what ``fields`` holds already (a row of several batches)."""
    times = take_times(batch)
    if times:
        for name, value in times.items():
            fields[name] = fields.get(name, 0.0) + value
    hops = getattr(batch, "num_sampled_nodes", None)
    if isinstance(hops, (list, tuple)):
        for k, n in enumerate(hops):
            name = f"data_hop_{k}_nodes"
            fields[name] = fields.get(name, 0) + int(n)


class LoaderWatch:
    """An iterable over ``loader``'s batches that times each one (see :mod:`gnnmon.measure.loader`);
    each iteration is a pass (an epoch); a context manager: leaving it (or :meth:`remove`) ends
    its passes still open."""

    def __init__(self, loader: Any, *, to: Any = None) -> None:
        if not hasattr(loader, "__iter__"):
            raise TypeError(f"watch_loader: loader must be iterable, got {type(loader).__name__}")
        self.loader = loader
        self.to = None if to is None else parse_device(to)
        self._split = _splittable(loader)
        # this watch's passes not ended yet (their generators; held weakly: one dropped unfinished
        # is closed by the garbage collector, which ends it)
        self._open: weakref.WeakSet[Any] = weakref.WeakSet()

    def __iter__(self) -> Iterator[Any]:
        passing = self._pass()
        self._open.add(passing)
        return passing

    def _pass(self) -> Iterator[Any]:
        loader, to = self.loader, self.to
        settings = loader_settings(loader)
        split = _begin_pass(loader) if self._split else None
        state.PASSES[0] += 1  # rows take batches from now on (gnnmon.record.probe_batch)
        state.probes_changed()
        try:
            iterator = iter(loader)
            while True:
                t0 = time.perf_counter_ns()
                try:
                    batch = next(iterator)
                except StopIteration:
                    return
                fields: dict[str, Any] = {"data_wait_s": (time.perf_counter_ns() - t0) / 1e9, **settings}
                add_batch(batch, fields)
                if to is not None:
                    t1 = time.perf_counter_ns()
                    batch = batch.to(to, non_blocking=True)
                    fields["data_to_device_s"] = (time.perf_counter_ns() - t1) / 1e9
                state.NEXT_BATCH[:] = [fields]
                yield batch
        finally:
            if split is not None:
                _end_pass(loader, split)
            state.NEXT_BATCH.clear()  # a batch left unconsumed (broken off) names no later row
            state.PASSES[0] -= 1
            state.probes_changed()

    def __len__(self) -> int:
        return len(self.loader)

    def remove(self) -> None:
        """End this watch's passes still open: the loader's own methods come back once no pass of
        any watch is open on it; a batch's figures not yet taken by a row are dropped."""
        for passing in list(self._open):
            passing.close()
        self._open.clear()
        state.NEXT_BATCH.clear()

    def __enter__(self) -> LoaderWatch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def watch_loader(loader: Any, *, to: Any = None) -> LoaderWatch:
    """Iterate ``loader`` through this to put each batch's wait (``data_wait_s``) and, for PyG's
    neighbour loaders, its sampling, gathering and transform times and nodes per hop on the row of
    the step that consumes it (the next top-level row to open: iterate it outside the measured
    step; a loop over it inside one measured call, an epoch's, puts them on no row, its wait being
    in that call's time already); ``to``: move each batch to that device and time the copy. Each
    pass puts the loader back as it was when it ends."""
    return LoaderWatch(loader, to=to)
