"""When each rank's gradients were ready, before the all-reduce that makes every rank wait:
``gnnmon.watch_buckets(ddp_model)``.

Under DDP a rank that computes longer (a slower backward, a larger batch, a GC pause inside it)
does not show as a longer row: the all-reduce makes every rank's backward end together. What
differs is when each rank's gradient buckets became ready. A DDP communication hook
(``register_comm_hook``, the supported API) notes the time each bucket is handed to it, then runs
the all-reduce (DDP's default ``allreduce_hook``, or the hook you pass). Fields on the step's row:

* ``ddp_buckets``: buckets made ready in the row;
* ``ddp_first_ready_s`` / ``ddp_ready_s``: seconds from the row's start to the first and to the
  last bucket ready (host clock; on a GPU the time autograd queued the bucket's last gradient);
* ``ddp_ready_device_s`` (GPU): device time from the model's forward to the last bucket ready
  (events, read when the run finishes the row);
* ``ddp_ready_thread_cpu_s``, ``ddp_ready_thread_preempted``, ``ddp_ready_thread_waits`` (rows that
  read their thread's scheduler counters, ``collect(sched=)``, where the backward runs on the
  row's thread: the CPU): the row's thread from the row's start to the last bucket ready. Unlike
  the row's own ``thread_*``, they leave out the wait in the all-reduce, which is longest on the
  ranks that were not late.

The cross-rank report compares ``ddp_ready_s`` across ranks: the rank whose buckets were late did
the extra compute. A forward outside any row, or under ``no_sync()``, leaves no figures.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from torch import nn

from gnnmon.devices.sched import Times, thread_times
from gnnmon.errors import raised_by_handler
from gnnmon.measure.row_device import model_backend
from gnnmon.measure.timing import EventSpan
from gnnmon.record.current import filling_row
from gnnmon.record.probe_sched import put_sched, row_start
from gnnmon.record.row import Row


class BucketRecord:
    """The bucket times of one row; the run writes them into it when it finishes the row."""

    __slots__ = ("backend", "start_ev", "last_ev", "first_ns", "last_ns", "count", "closed", "_lock", "sched0",
                 "sched", "thread")

    def __init__(self, row: Row, model: Any = None) -> None:
        backend = self.backend = model_backend(row, model)
        self.start_ev = None if backend.memory_is_host else backend.record_event()
        self.last_ev: Any = None
        self.first_ns = self.last_ns = 0
        self.count = 0
        self.closed = False
        self._lock = threading.Lock()
        self.sched0 = row_start(row)  # the row's thread's scheduler counters at its start, if read
        self.sched: Times | None = None  # the same at the last bucket ready
        self.thread = threading.get_ident()

    def bucket_ready(self) -> None:
        # the thread's counters before the clock (and the row's after its start): their window lies
        # inside the wall time's, so the time off the CPU to the bucket is never under a sleep in it
        sched = thread_times() if self.sched0 is not None and threading.get_ident() == self.thread else None
        now = time.time_ns()
        with self._lock:
            if self.closed:
                return
            if not self.count:
                self.first_ns = now
            self.last_ns = now
            self.count += 1
            if sched is not None:
                self.sched = sched
            if self.start_ev is not None:
                if self.last_ev is not None:
                    self.backend.release_event(self.last_ev)
                self.last_ev = self.backend.record_event()

    def close(self) -> None:
        with self._lock:
            self.closed = True

    def ready(self) -> bool:
        return self.closed and (self.last_ev is None or bool(self.last_ev.query()))

    def resolve(self, fields: dict[str, Any]) -> None:
        self.close()
        if not self.count:
            return
        start = fields["t_start_ns"]
        fields["ddp_buckets"] = self.count
        fields["ddp_first_ready_s"] = (self.first_ns - start) / 1e9
        fields["ddp_ready_s"] = (self.last_ns - start) / 1e9
        if self.sched is not None and self.sched0 is not None:
            put_sched(fields, "ddp_ready_thread_", self.sched0, self.sched)
        if self.start_ev is not None and self.last_ev is not None:
            EventSpan(self.start_ev, self.last_ev, "ddp_ready_device_s", False, self.backend).resolve(fields)
            self.last_ev = self.start_ev = None


class BucketWatch:
    """A DDP communication hook and a forward pre-hook that put bucket times on the step's row;
    made by :func:`watch_buckets`. A context manager; :meth:`remove` stops recording (DDP keeps
    a registered communication hook for the model's life: it then only runs the all-reduce)."""

    def __init__(self, model: nn.Module, hook: Any = None, state: Any = None) -> None:
        if type(model).__name__ != "DistributedDataParallel" or not hasattr(model, "register_comm_hook"):
            raise TypeError(f"watch_buckets: model must be a torch DistributedDataParallel, got "
                            f"{type(model).__name__}")
        if hook is None:
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
            hook = allreduce_hook
        elif not callable(hook):
            raise TypeError(f"watch_buckets: hook must be a DDP communication hook hook(state, bucket), got {hook!r}")
        self._inner = hook
        self._row: Row | None = None
        self.record: BucketRecord | None = None
        self.on = True
        self.broken: Exception | None = None
        ddp: Any = model
        try:
            # a lambda: DDP reads the hook's annotations, which this module's are not (strings)
            ddp.register_comm_hook(state, lambda state, bucket: self._comm_hook(state, bucket))
        except RuntimeError as exc:  # DDP takes one communication hook per model
            raise RuntimeError(f"watch_buckets: {exc}; pass your hook as watch_buckets(model, hook=..., "
                               "state=...) and it runs after the bucket is noted") from exc
        self._handle = model.register_forward_pre_hook(self._forward)

    def _forward(self, module: nn.Module, args: Any) -> None:
        if not self.on:
            return
        row = filling_row()
        if row is self._row and self.record is not None and not self.record.closed:
            return
        self._row, self.record = row, None
        if row is None:
            return
        try:
            record = self.record = BucketRecord(row, module)
        except Exception as exc:  # the user's step must not fail for a figure
            if raised_by_handler(exc):  # a step timeout from a signal handler: the caller's
                raise
            self.broken, self.on = exc, False
            return
        row.defer(record)
        row.after_close(record.close)

    def _comm_hook(self, state: Any, bucket: Any) -> Any:
        record = self.record
        if record is not None and self.on:
            record.bucket_ready()
        return self._inner(state, bucket)

    def remove(self) -> None:
        """Stop recording: the forward hook comes off; the communication hook only all-reduces."""
        self.on = False
        self._handle.remove()
        self.record = self._row = None

    def __enter__(self) -> BucketWatch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def watch_buckets(model: nn.Module, *, hook: Any = None, state: Any = None) -> BucketWatch:
    """Note when each gradient bucket of a ``DistributedDataParallel`` model is ready, per step
    and rank (``ddp_ready_s`` and friends, see :mod:`gnnmon.measure.buckets`); the all-reduce is
    DDP's default, or ``hook(state, bucket)`` if you pass one (DDP allows one hook per model)."""
    return BucketWatch(model, hook, state)
