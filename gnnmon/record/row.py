"""A row: the figures of one measured call or block, filled by its measurements, then emitted.

The row being filled is kept in :data:`gnnmon.record.state.CURRENT_ROW`, so a decorated call made
inside another gets its own row whose ``parent`` names the enclosing one. Measurements write flat
fields into ``row.fields``; figures that can only be read later (CUDA events) are registered with
:meth:`Row.defer` and resolved by the run, never on the hot path. Nothing sampled (utilisation,
energy) is read here: the run joins the timeline to rows by their ``t_start_ns``/``t_end_ns``.
A row's own figures: its label, index, parent, window, CPU seconds (``cpu_s``), collections (the
GC log counts them on it), error and device; every other every-row figure is a probe.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Mapping
from time import process_time
from types import FrameType
from typing import Any

import torch

from gnnmon.devices import Backend
from gnnmon.fields import add_note
from gnnmon.record import state
from gnnmon.record.active import active_run
from gnnmon.record.current import heal_unfinished, open_ancestor, open_phase
from gnnmon.record.entered import exit_all
from gnnmon.record.gc_log import GC_LOG
from gnnmon.record.gc_pause import resume_gc
from gnnmon.record.inbox import Deferred
from gnnmon.record.interrupts import MAIN_THREAD, raised_by_handler
from gnnmon.record.names import RowFields, RowView
from gnnmon.record.probes import Probe, chosen
from gnnmon.record.run import Run

CURRENT_ROW, OPEN_PHASE = state.CURRENT_ROW, state.OPEN_PHASE
UNFINISHED, PROBES_STAMP = state.UNFINISHED, state.PROBES_STAMP
_NO_GC = {"gc_collections": 0, "gc_pause_s": 0.0, "gc_max_generation": None}  # a row no collection ran in
_FAILED = object()
"""What a probe that failed to open leaves in the row's list: it is not closed."""


class Row:
    """One row being filled. ``fields`` is the plain dict that ends up in the run.

    Made in two steps: the constructor builds it; :meth:`open` makes it current (the parent of rows
    opened inside). ``owner``: the frame of the decorated call that opened it (main thread only); a
    row still open whose owner has returned was left by an exception inside gnnmon's own code, and the
    next row opened on the thread closes it (:meth:`heal`).
    """

    # What a row starts with, as immutable class attributes: a new row sets only what is its own (its run,
    # fields, measurements and CPU clock; a few dozen instructions), an instance's value replacing one.
    parent: Row | None = None
    owner: FrameType | None = None
    found: torch.device | None = None  # the device of the call's arguments (None: none among them)
    backend: Backend | None = None  # chosen by the measure stage (gnnmon.measure.row_device)
    placing: Any = None  # while its device is settled only at its end (measure/row_device.py)
    _deferred: list[Deferred] | None = None
    _after: list[Callable[[], Any]] | None = None
    sync = "events"  # the row's timing mode, which its phases follow
    _hook = False  # whether it installed the GC hook
    gc_paused = False  # whether it holds a pause of automatic GC (@gc_controlled), ended after its close
    # Collections attributed to this row or its children (the GC log's callback adds them).
    gc_n = 0
    gc_ns = 0
    gc_gen = -1
    _probes: tuple[Probe, ...] = ()  # the run's probes this row opened (gnnmon.record.probes)
    _opened: list[Any] | tuple[()] = ()  # what each returned as it opened (a list of its own once one opens)
    closed = False
    _view: RowFields | None = None

    def __init__(
        self,
        label: str,
        *,
        found: torch.device | None = None,
        shape: Mapping[str, Any] | None = None,
        run: Run | None = None,
        owner: FrameType | None = None,
    ) -> None:
        """``found``: the device of the call's arguments (None: the default device is used);
        ``shape``: graph-shape fields read from them; ``run``: where the row goes (the active run);
        ``owner``: the frame of the decorated call it belongs to (None: a scope's or a callback's)."""
        run = self.run = run if run is not None else active_run()
        if owner is not None:
            self.owner = owner
        if found is not None:
            self.found = found
        self.entered: list[Any] = []  # measurements entered, outermost first, until they exit
        index, marks = run.next_index(label)
        self.fields: dict[str, Any] = {"label": label, "index": index, "parent": None, "t_start_ns": time.time_ns(),
                                       "t_end_ns": None, "device": None, "backend": None, "error": None, "notes": ()}
        self.cpu0 = process_time()  # seconds of CPU, for cpu_s
        if marks:
            self.fields.update(marks)
        if shape:
            self.fields.update(shape)

    def open(self) -> Row:
        """Make this row current: its parent is the row current now (one left behind by an
        interrupted call is closed first)."""
        run = self.run
        parent = CURRENT_ROW.get()
        if parent is not None and (parent.closed or parent.owner is not None):
            parent = open_ancestor(parent)
        if parent is None and UNFINISHED and (self.owner is not None or threading.get_ident() == MAIN_THREAD):
            heal_unfinished()  # left by an interrupted call (main thread: where they are made)
        if self.owner is not None:
            UNFINISHED.add(self)
        self.parent = parent
        if parent is not None:
            self.fields["parent"] = parent.key
        elif not run.holds_gc_hook:  # a top-level row installs the GC hook (a collect run holds it)
            GC_LOG.acquire()
            self._hook = True
        probes = run.probes  # every-row figures (gnnmon.record.probes), chosen again if that changed
        if probes.stamp != PROBES_STAMP[0]:
            probes = run.probes = chosen(run)
        mine = self._probes = probes[parent is None]
        if mine:
            opened = self._opened = []  # kept before the probes open: the close sees what opened
            for probe in mine:
                try:
                    opened.append(probe.open(self))
                except Exception as exc:  # a probe's fault is noted, never the step's
                    if raised_by_handler(exc):
                        raise
                    opened.append(_FAILED)
                    self._probe_failed(probe, exc)
        CURRENT_ROW.set(self)
        return self

    @property
    def key(self) -> str:
        """``label#index``: how children name this row in their ``parent`` field."""
        return f"{self.fields['label']}#{self.fields['index']}"

    def view(self) -> RowView:
        """This row as you see it (:func:`current_row`): its fields readable, yours settable (one
        :class:`RowFields` per row, made when first asked for; the view that holds the row is
        made each time, so that the row holds nothing that holds it: no cycle for the GC)."""
        return RowView(self, self.user_fields())

    def user_fields(self) -> RowFields:
        """The row's fields as you may set them (a scope's ``as fields``): the same object each time."""
        fields = self._view
        if fields is None:
            fields = self._view = RowFields(self.fields)
        return fields

    def note(self, text: str) -> None:
        """Say why a figure is missing or how it was made (kept in ``notes``)."""
        add_note(self.fields, text)

    def defer(self, item: Deferred) -> None:
        """Register figures to be read later (by the collector, off the hot path)."""
        self.deferred().append(item)

    def deferred(self) -> list[Deferred]:
        """The figures registered to be read later (the list itself: a row settled on the host
        takes its event spans off it, :mod:`gnnmon.measure.row_device`)."""
        if self._deferred is None:
            self._deferred = []
        return self._deferred

    def after_close(self, action: Callable[[], Any]) -> None:
        """Run ``action`` once the row is closed (outside its window), e.g. a deferred collection."""
        if self._after is None:
            self._after = []
        self._after.append(action)

    def close(self, error: BaseException | None = None) -> None:
        """Finish the row (``t_end_ns``, ``error``) and hand it to the run; a closed row is never current
        again, and closing twice does nothing. Closing with the call's ``error`` never raises gnnmon's own
        instead (the row and one warning say what failed): the user's exception goes on as it was."""
        if self.closed:
            return
        self.closed = True  # first: from here on no row takes this one as its parent
        self.owner = None
        fields = self.fields
        try:
            try:  # the closing fields: the current row and phase handed back, the end, the figures
                if CURRENT_ROW.get() is self:
                    # The nearest enclosing row still open becomes current again: rows closed out of
                    # order (scope A, scope B, A closed first) never leave a closed row current.
                    parent = self.parent
                    CURRENT_ROW.set(None if parent is None else open_ancestor(parent))
                phase = OPEN_PHASE.get()
                if phase is not None and phase.row_closed():  # a phase whose exit never ran
                    OPEN_PHASE.set(open_phase(phase))
                if self._opened:  # their counters read inside the row's window, as they opened
                    self._close_probes(fields, error)
                # After the reset: a collection it triggered is the row's, and inside its window; the
                # CPU read before the clock, as after it as the row opened: its window inside the wall's.
                fields["cpu_s"] = process_time() - self.cpu0
                fields["t_end_ns"] = time.time_ns()
                if self.gc_n:
                    fields["gc_collections"] = self.gc_n
                    fields["gc_pause_s"] = self.gc_ns / 1e9
                    fields["gc_max_generation"] = self.gc_gen
                else:
                    fields.update(_NO_GC)
                if error is not None:
                    fields["error"] = type(error).__name__
                    for probe in self.run.probes.on_error:  # its failure is said as the error's recording's
                        probe.close(self, None, fields, error)
            except Exception as exc:
                if error is None or raised_by_handler(exc):
                    raise
                self._failed_recording(exc, error)
            try:
                self.run.add_row(fields, self._deferred)
            except Exception as exc:  # e.g. a full disk: the call's result comes first
                if raised_by_handler(exc):
                    raise
                warnings.warn(f"gnnmon could not store the row {self.key}: {exc!r}", RuntimeWarning, 3)
        finally:
            if self._after is None and not self._hook and not self.gc_paused:  # nothing waits for the close
                if not self.entered:  # else a measurement's exit is still owed: heal runs it
                    UNFINISHED.discard(self)
            elif error is None:
                self._run_after()
            else:
                try:
                    self._run_after()
                except Exception as exc:
                    if raised_by_handler(exc):
                        raise
                    self._failed_recording(exc, error)

    def _close_probes(self, fields: dict[str, Any], error: BaseException | None) -> None:
        """The probes' figures (a probe that raises is noted: its figures are missing)."""
        for probe, opened in zip(self._probes, self._opened, strict=False):  # fewer opened: interrupted
            if opened is not _FAILED:
                try:
                    probe.close(self, opened, fields, error)
                except Exception as exc:
                    if raised_by_handler(exc):
                        raise
                    self._probe_failed(probe, exc)

    def _probe_failed(self, probe: Probe, exc: Exception) -> None:
        """A probe raised: its figures are missing from this row, which says why (the call goes on)."""
        self.note(f"probe {type(probe).__name__} failed: {type(exc).__name__}: {exc}")

    def _failed_recording(self, exc: Exception, error: BaseException) -> None:
        """gnnmon's own ``exc`` while it recorded the call's ``error``: said on the row (if it is
        still to be stored) and in one warning; the user's ``error`` goes on as raised."""
        self.fields.setdefault("error", type(error).__name__)
        self.note(f"gnnmon failed while recording the error: {type(exc).__name__}: {exc}")
        warnings.warn(f"gnnmon failed while recording {type(error).__name__} in row {self.key} "
                      f"(your exception is raised as it was): {exc!r}", RuntimeWarning, 4)

    def _run_after(self) -> None:
        """What waits for the close (also after a KeyboardInterrupt): automatic GC back on where the row
        paused it, then each action, removed once run; then the GC hook released. What a handler's
        exception interrupts runs again as the row is healed (a pause ends once, however often resumed)."""
        after = self._after
        try:
            first: BaseException | None = None
            if self.gc_paused:
                resume_gc(self)
                self.gc_paused = False
            while after:
                try:
                    after[0]()
                except BaseException as exc:  # the others must still run (GC back on)
                    if raised_by_handler(exc):
                        raise
                    if first is None:
                        first = exc
                del after[0]
            if first is not None:
                raise first
        finally:
            if not after and not self.gc_paused:
                if self._hook:
                    self._hook = False
                    GC_LOG.release()
                if not self.entered:  # else a measurement's exit is still owed: heal runs it
                    UNFINISHED.discard(self)

    def heal(self) -> None:
        """Finish a row an exception left unfinished inside gnnmon's own code (its decorated call has
        returned): its measurements end (GC pauses, peak windows) and, if not stored yet, it is stored
        with ``error`` ``"interrupted"`` and a note; figures not filled by then are missing."""
        if not self.closed:
            self.note("interrupted: an exception (from a signal handler) ended this call inside gnnmon's own "
                      "code; the row was closed by the next one, and figures not filled by then are missing")
            self.fields["error"] = "interrupted"
        # A handler's exception here propagates and leaves the row unfinished, measurements and all:
        # the next row heals it again (closing it first would leave a peak window or GC pause open).
        exit_all(self.entered, 0, None)
        if self.closed:
            self._run_after()
        else:
            self.close()
