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

``to=device`` moves each batch there (``batch.to(device, non_blocking=True)``) and times it
(``data_to_device_s``, host time: on a GPU the time to queue the copy from pinned memory, or to
copy from pageable memory).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from gnnmon.devices.resolve import parse_device
from gnnmon.record import state


class Timed:
    """A batch (or sampler output) with the loader's times for it, as it travels from a worker
    process; picklable."""

    __slots__ = ("value", "times")

    def __init__(self, value: Any, times: dict[str, float]) -> None:
        self.value, self.times = value, times

    def __getstate__(self) -> tuple[Any, dict[str, float]]:
        return self.value, self.times

    def __setstate__(self, pickled: tuple[Any, dict[str, float]]) -> None:
        self.value, self.times = pickled


_MISSING: Any = object()


def _add(times: dict[str, float], name: str, t0: int) -> None:
    times[name] = times.get(name, 0.0) + (time.perf_counter_ns() - t0) / 1e9


class _Split:
    """Wrappers put on one PyG loader instance (its ``collate_fn``, ``filter_fn``, ``transform``
    and its sampler's sampling method); :meth:`remove` puts the originals back."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        sampler = getattr(loader, "node_sampler", None) or getattr(loader, "link_sampler", None)
        method = "sample_from_nodes" if hasattr(loader, "node_sampler") else "sample_from_edges"
        self.saved: list[tuple[Any, str, Any]] = []  # (object, attribute, the instance's own value)
        self.times: dict[str, float] | None = None  # the batch being made in this process
        collate, filter_fn, transform = loader.collate_fn, loader.filter_fn, getattr(loader, "transform", None)
        sample = getattr(sampler, method)

        def timed_sample(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return sample(*args, **kwargs)
            finally:
                if self.times is not None:
                    _add(self.times, "data_sample_s", t0)

        def timed_collate(index: Any) -> Any:
            times: dict[str, float] = {}
            self.times = times
            try:
                out = collate(index)
            finally:
                self.times = None
            if isinstance(out, Timed):  # filtered in the worker (filter_per_worker): its times too
                return Timed(out.value, {**times, **out.times})
            return Timed(out, times)

        def timed_filter(out: Any) -> Any:
            times: dict[str, float] = {}
            if isinstance(out, Timed):  # made in a worker (or in the main process by timed_collate)
                out, times = out.value, dict(out.times)
            self.times = times
            t0 = time.perf_counter_ns()
            try:
                data = filter_fn(out)
            finally:
                self.times = None
            _add(times, "data_gather_s", t0)
            times["data_gather_s"] -= times.get("data_transform_s", 0.0)
            return Timed(data, times)

        def timed_transform(data: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return transform(data)  # type: ignore[misc]
            finally:
                if self.times is not None:
                    _add(self.times, "data_transform_s", t0)

        self._set(sampler, method, timed_sample)
        self._set(loader, "collate_fn", timed_collate)
        self._set(loader, "filter_fn", timed_filter)
        if transform is not None:
            self._set(loader, "transform", timed_transform)

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


def _hops(batch: Any, fields: dict[str, Any]) -> None:
    hops = getattr(batch, "num_sampled_nodes", None)
    if isinstance(hops, (list, tuple)):
        for k, n in enumerate(hops):
            fields[f"data_hop_{k}_nodes"] = int(n)


class LoaderWatch:
    """An iterable over ``loader``'s batches that times each one (see :mod:`gnnmon.measure.loader`);
    a context manager: leaving it (or :meth:`remove`) takes the wrappers off the loader."""

    def __init__(self, loader: Any, *, to: Any = None) -> None:
        if not hasattr(loader, "__iter__"):
            raise TypeError(f"watch_loader: loader must be iterable, got {type(loader).__name__}")
        self.loader = loader
        self.to = None if to is None else parse_device(to)
        split = (hasattr(loader, "node_sampler") or hasattr(loader, "link_sampler")) and hasattr(loader, "filter_fn")
        self._split = _Split(loader) if split else None

    def __iter__(self) -> Iterator[Any]:
        iterator = iter(self.loader)
        to = self.to
        while True:
            t0 = time.perf_counter_ns()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            fields: dict[str, Any] = {"data_wait_s": (time.perf_counter_ns() - t0) / 1e9}
            if isinstance(batch, Timed):
                batch, times = batch.value, batch.times
                fields.update(times)
            _hops(batch, fields)
            if to is not None:
                t1 = time.perf_counter_ns()
                batch = batch.to(to, non_blocking=True)
                fields["data_to_device_s"] = (time.perf_counter_ns() - t1) / 1e9
            state.NEXT_BATCH[:] = [fields]
            yield batch

    def __len__(self) -> int:
        return len(self.loader)

    def remove(self) -> None:
        """Put the loader's own methods back; a batch's figures not yet taken by a row are dropped."""
        if self._split is not None:
            self._split.remove()
            self._split = None
        state.NEXT_BATCH.clear()

    def __enter__(self) -> LoaderWatch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def watch_loader(loader: Any, *, to: Any = None) -> LoaderWatch:
    """Iterate ``loader`` through this to put each batch's wait (``data_wait_s``) and, for PyG's
    neighbour loaders, its sampling, gathering and transform times and nodes per hop on the row of
    the step that consumes it; ``to``: move each batch to that device and time the copy."""
    return LoaderWatch(loader, to=to)
