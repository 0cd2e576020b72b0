"""Time of a call, a block or a phase: wall time, and device time honestly synchronised.

Sync modes:

* ``"events"`` (default): device events recorded on the current stream at both ends and resolved
  lazily by the collector (when they have completed, or when the run is flushed) — no host sync
  per call. CUDA events; MPS events where torch has them, else a sync on both sides. On the CPU
  work is synchronous, so device time is wall time.
* ``"sync"``: the device is synchronised on both sides; device time is the wall time between.
  Honest, but it serialises CPU and GPU (it inflates launch-bound steps).
* ``"none"``: wall time only; ``device_s`` is None on an accelerator (the CPU may only have
  launched the work).

Fields: ``wall_s`` and ``device_s`` (seconds) with ``device_s_source``; ``phase_<name>_s`` per
phase (summed if a phase repeats in one row).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from gnnmon.devices import Backend
from gnnmon.devices.ranges import RANGES, pop_range, push_range
from gnnmon.devices.resolve import parse_device
from gnnmon.errors import raised_by_handler
from gnnmon.measure.adapters import make_decorator, make_scope
from gnnmon.measure.bracket import HELD, IN_GC, Bracket, hold, is_compiling, reentered, release, releasing, settle
from gnnmon.measure.lifecycle import Measurement
from gnnmon.measure.row_device import row_backend, work_starts
from gnnmon.record import state
from gnnmon.record.current import open_phase
from gnnmon.record.row import Row

CURRENT_ROW, OPEN_PHASE = state.CURRENT_ROW, state.OPEN_PHASE
perf_counter_ns = time.perf_counter_ns

SYNC_MODES = ("events", "sync", "none")


def check_sync(sync: Any, where: str) -> str:
    if sync not in SYNC_MODES:
        raise ValueError(f"{where}: sync must be one of {', '.join(map(repr, SYNC_MODES))}, got {sync!r}")
    return sync


class EventSpan:
    """Device time between two recorded events, read when the end event has completed; both
    events then go back to the backend's pool. The seconds go to ``field`` (added to what it
    holds with ``accumulate``) and, where ``also`` names one, are set in that field too. ``wall``:
    the host's seconds over the same span, what :meth:`on_host` writes instead."""

    __slots__ = ("start", "end", "field", "accumulate", "backend", "also", "wall")

    def __init__(self, start: Any, end: Any, field: str, accumulate: bool, backend: Backend,
                 also: str | None = None, wall: float = 0.0) -> None:
        self.start, self.end, self.field, self.accumulate = start, end, field, accumulate
        self.backend = backend
        self.also = also
        self.wall = wall

    def on_host(self, fields: dict[str, Any]) -> None:
        """The span's work was the host's (its row settled there): its wall time is written, and
        its events go back to the pool unread (an event may be recorded again before it completes)."""
        self._write(fields, self.wall)
        self.backend.release_event(self.start)
        self.backend.release_event(self.end)

    def _write(self, fields: dict[str, Any], seconds: float) -> None:
        if self.accumulate:
            fields[self.field] = (fields.get(self.field) or 0.0) + seconds
        else:
            fields[self.field] = seconds
        if self.also is not None:
            fields[self.also] = seconds

    def ready(self) -> bool:
        return bool(self.end.query())

    def resolve(self, fields: dict[str, Any]) -> None:
        start, end = self.start, self.end
        if not end.query():  # only a row forced out early waits for its device work
            end.synchronize()
        self._write(fields, start.elapsed_time(end) / 1e3)
        self.backend.release_event(start)
        self.backend.release_event(end)


class Stopwatch:
    """Times one window on one backend in one sync mode."""

    __slots__ = ("backend", "mode", "source", "_ev0", "_t0")

    def __init__(self, backend: Backend, mode: str) -> None:
        self.backend = backend
        self.mode = mode
        self._ev0 = None

    def start(self) -> None:
        backend, mode = self.backend, self.mode
        if backend.memory_is_host:  # the host: work is synchronous, device time is wall time
            self.source = "wall"
        elif mode == "events":
            self._ev0 = backend.record_event()
            if self._ev0 is None:  # no events on this device: fall back to syncs
                self.mode = "sync"
                backend.synchronize()
                self.source = "sync"
            else:
                self.source = "events"
        elif mode == "sync":
            backend.synchronize()
            self.source = "sync"
        else:
            self.source = "none"
        self._t0 = time.perf_counter_ns()

    def stop(self) -> tuple[float, float | EventSpan | None]:
        """(wall seconds, device seconds, or an :class:`EventSpan` to resolve later, or None)."""
        if self.source == "events":
            end = self.backend.record_event()
            wall = (time.perf_counter_ns() - self._t0) / 1e9
            return wall, EventSpan(self._ev0, end, "device_s", False, self.backend, wall=wall)
        if self.source == "sync":
            self.backend.synchronize()
        wall = (time.perf_counter_ns() - self._t0) / 1e9
        if self.source == "none":
            return wall, None
        return wall, wall


def _fill_time(row: Row, watch: Stopwatch, wall: float, device: Any) -> None:
    fields = row.fields
    fields["wall_s"] = wall
    fields["device_s_source"] = watch.source
    if isinstance(device, EventSpan):
        fields["device_s"] = None  # filled when the events are read
        row.defer(device)
    else:
        fields["device_s"] = device
        if device is None:
            row.note("device_s not measured: sync='none' times only the host")


class TimingMeasurement(Measurement):
    """Fills ``wall_s``, ``device_s`` and ``device_s_source``."""

    name = "timing"
    option_names = ("device", "sync")
    defaults = {"device": None, "sync": "events"}
    # Each set once whole, last, by the entry (class defaults: nothing started, with no __init__ of
    # its own to run a call): an exit that finds neither has no clock to stop (its entry was interrupted).
    _watch: Stopwatch | None = None
    _t0: int | None = None

    @classmethod
    def check_options(cls, options: dict[str, Any], where: str) -> dict[str, Any]:
        options = super().check_options(options, where)
        check_sync(options["sync"], where)
        return options

    def __enter__(self) -> TimingMeasurement:
        o, row = self.options, self.row
        sync = o["sync"]
        if sync != "events":
            row.sync = sync  # phases inside time themselves the same way
        backend = row_backend(row, o["device"])
        if backend.memory_is_host:  # the CPU: work is synchronous, device time is wall time
            self._t0 = time.perf_counter_ns()
            return self
        work_starts(row, True)
        watch = Stopwatch(backend, sync)
        watch.start()
        self._watch = watch
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        watch = self._watch
        if watch is None:
            if self._t0 is None:
                return
            wall = (time.perf_counter_ns() - self._t0) / 1e9
            fields = self.row.fields
            fields["wall_s"] = fields["device_s"] = wall
            fields["device_s_source"] = "wall"
            return
        wall, device = watch.stop()
        _fill_time(self.row, watch, wall, device)


cuda_timed = make_decorator(TimingMeasurement, "cuda_timed", "gnnmon.timed()")
cuda_timed.__doc__ = """Time each call: ``@cuda_timed`` or ``@cuda_timed(device=None, sync="events",
label=None)``. Fills ``wall_s`` (host, seconds) and ``device_s`` (device-synced or event time,
seconds; on the CPU equal to wall time). Despite the name it dispatches to CUDA, MPS or CPU."""

timed = make_scope(TimingMeasurement, "timed", "timed", "cuda_timed")
timed.__doc__ = """``with timed(label="eval") as fields:`` — :func:`cuda_timed` for a block."""


class phase:
    """``with phase("forward"):`` adds ``phase_forward_s`` (seconds) to the current row.

    Timed like the row (its ``@cuda_timed`` sync mode, else ``"events"``); outside any row it makes
    a row of its own, labelled ``name``, with ``wall_s`` and ``device_s`` too. A phase repeated in
    one row is summed. A phase opened inside another of the same row is part of it: the row says
    so (``phase_attn_in = "forward"``) and the step's shares count the outer one only. GC events
    that fall inside a phase name it.

    A phase in a row is a measurement of its row: it lists itself in the row's ``entered`` as it
    opens, so a row that closes before the phase's exit comes ends the phase with it (its exit,
    called by the row, takes it off the list; a late exit of yours then does nothing). A phase of
    its own row opens that row through the bracket, its clock a :class:`PhaseClock`.
    """

    # No __slots__: what a new phase starts with is a class default, so making one sets only its
    # name and field (a phase is made on every step, inside the step).
    sync: str | None = None  # its own sync mode (None: its row's)
    device: Any = None  # its own device (None: its row's)
    _in: Row | None = None  # the row it times into, from its entry on (None: not entered, or unmeasured)
    own: bool | None  # True: a row of its own; False: in a row, held; None: in a row, the flat path
    outer: phase | None
    closed: bool
    _bracket: Bracket | None
    _t0: int | None
    _watch: Stopwatch | None
    _range: Any

    def __init__(self, name: str, *, sync: str | None = None, device: Any = None) -> None:
        try:
            field = _PHASE_FIELDS[name]  # a name seen before: checked then
        except (KeyError, TypeError):
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"phase name must be an identifier such as 'forward', got {name!r}") from None
            field = _PHASE_FIELDS[name] = f"phase_{name}_s"
        self.name = name
        self.field = field
        if sync is not None or device is not None:
            self.sync = None if sync is None else check_sync(sync, "phase()")
            self.device = None if device is None else parse_device(device)

    @releasing
    def __enter__(self) -> phase:
        if (HELD.depth or IN_GC.__dict__) and reentered() or is_compiling():  # unmeasured(), its usual case read first
            self._in = None
            return self
        row = CURRENT_ROW.get()
        if (row is not None and self.device is None and not row.closed and OPEN_PHASE.get() is None
                and not RANGES.on):
            backend = row.backend
            if backend is not None and backend.memory_is_host:
                # The flat path: a phase on the host clock, in an open row, inside no other phase.
                # Every line runs in this frame (marked releasing): a Ctrl-C or a SIGTERM that lands
                # here waits for the end, as in a held section, and no section is needed.
                self.own = self.outer = self._t0 = None  # own None: the flat path (its exit's too)
                self.closed = False
                self._in = row
                row.entered.append(self)  # listed first: whatever interrupts the rest, the row's close ends it
                try:
                    OPEN_PHASE.set(self)
                    self._t0 = perf_counter_ns()
                except BaseException as exc:
                    self._leave(exc)
                    raise
                if HELD.pending or HELD.later is not None:
                    settle(self._not_started)  # a Ctrl-C raised here: the block never runs
                return self
        held = hold()  # a Ctrl-C waits until the phase is whole (record/interrupts.py)
        try:
            row = CURRENT_ROW.get()
            if row is None or row.closed:  # no row open (or one left current by an interrupted call)
                self._open_own()
            else:
                self._open_in(row)
        except BaseException:
            release(held)
            raise
        return release(held, undo=self._not_started, value=self)  # a Ctrl-C raised here: the block never runs

    def _open_own(self) -> None:
        """A phase with no row open: a row of its own, through the bracket."""
        self.own, self._t0 = True, None
        row = self._in = Row(self.name).open()
        self._bracket = Bracket(row, True, [(PhaseClock, self)])

    def _open_in(self, row: Row) -> None:
        """A phase in an open row: listed in its ``entered`` first (whatever interrupts the rest,
        the row's close ends it), its clock started last."""
        self.own = False
        self._bracket = self._t0 = self._range = self._watch = None
        self.closed = False
        self._in = row
        row.entered.append(self)
        try:
            backend = row.backend
            if backend is None or self.device is not None:
                backend = row_backend(row, self.device)
            if not backend.memory_is_host:  # on the host a phase's device time is its wall time
                work_starts(row, True)
                watch = Stopwatch(backend, self.sync or row.sync)
                watch.start()
                self._watch = watch
            outer = self.outer = OPEN_PHASE.get()
            if outer is not None:
                outer = open_phase(outer)
                if outer is not None and outer._in is row and outer.name != self.name:
                    row.fields.setdefault(_PARENT_FIELDS.get(self.name) or _parent_field(self.name), outer.name)
            OPEN_PHASE.set(self)
            if RANGES.on:
                self._range = push_range(f"{row.fields['label']}.{self.name}")
            self._t0 = time.perf_counter_ns()
        except BaseException as exc:  # what was started ends; the phase leaves the row
            self._leave(exc)
            raise

    def _leave(self, exc: BaseException | None) -> None:
        """End this phase in its row and take it off the row's ``entered`` (its entry failed, or
        a Ctrl-C came while it opened)."""
        entered = self._in.entered  # type: ignore[union-attr]
        if self.own is None:  # the flat path sets neither
            self._range = self._watch = None
        self._end(None if exc is None else type(exc), exc, None)
        for at in range(len(entered) - 1, -1, -1):
            if entered[at] is self:
                del entered[at]
                break

    def _not_started(self) -> None:
        if self.own is None:  # the flat path: ended as its exit ends it
            self.__exit__(KeyboardInterrupt, None, None)
        elif self._bracket is not None:
            bracket, self._bracket = self._bracket, None
            bracket.not_started()
        elif self._in is not None and not self.closed:
            self._leave(KeyboardInterrupt())

    def row_closed(self) -> bool:
        """Whether the row this phase times into has closed (then the phase is over too)."""
        return bool(self._in.closed)  # type: ignore[union-attr]

    @releasing
    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        row = self._in
        if row is None or self.closed:  # unmeasured (traced by torch.compile), ended by its row, or exited
            return
        t1 = perf_counter_ns()
        if self.own is None:  # the flat path (its entry's): every line in this frame, as there
            self.closed = True
            if OPEN_PHASE.get() is self:
                OPEN_PHASE.set(None)
            t0, self._t0 = self._t0, None
            if t0 is not None:
                fields, field = row.fields, self.field
                fields[field] = (fields.get(field) or 0.0) + (t1 - t0) / 1e9
            entered = row.entered  # off the row's list once ended (the row's close may be what runs this)
            if entered and entered[-1] is self:
                del entered[-1]
            else:
                _off_below(entered, self)
            if HELD.pending or HELD.later is not None:
                settle()
            return
        bracket = self._bracket
        if bracket is not None:  # a row of its own
            self._bracket = None
            held = hold()
            try:
                bracket.close(exc)
            finally:
                release(held)
            return
        held = hold()
        try:
            self._end(exc_type, exc, tb, t1)
            entered = row.entered  # off the row's list once ended (the row's close may have run it)
            if entered and entered[-1] is self:
                del entered[-1]
            else:
                _off_below(entered, self)
        finally:
            release(held)

    def _end(self, exc_type: Any, exc: Any, tb: Any, t1: int = 0) -> None:
        """Stop the clock (at ``t1``, else now) and add the phase's time to its row; a failure of
        its own is a note on the row (one a signal handler raised reaches the caller)."""
        try:
            self.closed = True
            if OPEN_PHASE.get() is self:  # the nearest enclosing phase still open is current again
                OPEN_PHASE.set(open_phase(self.outer))
            opened, self._range = self._range, None
            if opened is not None:
                pop_range(opened)
            t0, self._t0 = self._t0, None
            if t0 is None:  # its entry did not finish: nothing timed
                return
            row, watch = self._in, self._watch
            fields = row.fields  # type: ignore[union-attr]
            field = self.field
            if watch is None:
                fields[field] = (fields.get(field) or 0.0) + ((t1 or time.perf_counter_ns()) - t0) / 1e9
                return
            wall, device = watch.stop()
            if isinstance(device, EventSpan):  # one span, read once, into the phase's field
                device.field, device.accumulate = field, True
                row.defer(device)  # type: ignore[union-attr]
            else:
                fields[field] = (fields.get(field) or 0.0) + (wall if device is None else device)
        except Exception as err:  # a broken figure must not change the user's call
            if raised_by_handler(err):
                raise
            self.failed(err)

    def failed(self, err: Exception) -> None:
        """Say on the row, and once as a warning, that this phase's clock failed (the call goes on)."""
        self._in.note(f"phase failed: {type(err).__name__}: {err}")  # type: ignore[union-attr]
        warnings.warn(f"gnnmon phase measurement failed: {err!r}", RuntimeWarning, 3)


class PhaseClock(Measurement):
    """The clock of a phase with no row open, a measurement of the row of its own that it opens:
    the phase's field, ``wall_s`` and ``device_s`` (one window on the row's backend), and its
    profiler range."""

    __slots__ = ("phase", "_watch", "_t0", "_range")
    name = "phase"

    def __init__(self, row: Row, options: Any) -> None:
        self.row = row
        self.phase: phase = options
        self._watch: Stopwatch | None = None
        self._range: Any = None
        self._t0: int | None = None  # set last: an exit that finds none has no clock to stop

    def __enter__(self) -> PhaseClock:
        ph, row = self.phase, self.row
        backend = row_backend(row, ph.device)
        work_starts(row, True)
        watch = Stopwatch(backend, ph.sync or row.sync)
        watch.start()
        self._watch = watch
        ph.outer, ph.closed = state.OPEN_PHASE.get(), False
        state.OPEN_PHASE.set(ph)
        self._range = push_range(f"{row.fields['label']}.{ph.name}") if RANGES.on else None
        self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        ph = self.phase
        ph.closed = True
        if state.OPEN_PHASE.get() is ph:  # the nearest enclosing phase still open is current again
            state.OPEN_PHASE.set(open_phase(ph.outer))
        opened, self._range = self._range, None
        if opened is not None:
            pop_range(opened)
        t0, self._t0 = self._t0, None
        row, watch = self.row, self._watch
        if t0 is None or watch is None:  # its entry did not finish: nothing timed
            return
        wall, device = watch.stop()
        if isinstance(device, EventSpan):  # one span, read once: the phase's field and the row's device_s
            device.field, device.accumulate, device.also = ph.field, True, "device_s"
        else:
            row.fields[ph.field] = wall if device is None else device
        _fill_time(row, watch, wall, device)  # defers the span (device_s None until it is read)


_PHASE_FIELDS: dict[str, str] = {}
"""Phase name -> its row field (``forward`` -> ``phase_forward_s``), checked and made once."""

_PARENT_FIELDS: dict[str, str] = {}
"""Phase name -> the field naming the phase it ran inside (``attn`` -> ``phase_attn_in``)."""


def _parent_field(name: str) -> str:
    field = _PARENT_FIELDS[name] = f"phase_{name}_in"
    return field


def _off_below(entered: list[Any], measure: Any) -> None:
    """Take ``measure`` off ``entered`` below its top (a phase ended before one opened inside it);
    nothing where it is not listed (the row's close took it off)."""
    for at in range(len(entered) - 2, -1, -1):
        if entered[at] is measure:
            del entered[at]
            return
