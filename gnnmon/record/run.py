"""The live run (the collector): a :class:`Run` receives every row, GC event, marker and sample, and
hands them to its sinks; :meth:`Run.result` gives the plain :class:`~gnnmon.data.result.RunResult`
that reports and exports read.

``with gnnmon.collect("runs/x.jsonl") as run:`` makes ``run`` the active run; with none, rows go
to a bounded default run (:func:`default_run`).

What a row costs the step: closing it appends its fields (a dict of plain values, which the
garbage collector does not track) to the run's inbox, nothing more. The rest happens later, off
the step's path, in order: device events are read once they have completed, the timeline is joined
once it covers the row (a sample and every energy counter's next point after the row's end), the
row is encoded once, kept in the in-memory window as its JSON line (untracked bytes: a window of
rows never drives a full collection) and handed to every sink. A run with sinks (its file is one)
does this on its writer thread every ``flush_interval`` seconds; a run without any does it on the
closing thread every :data:`DRAIN_EVERY` rows and when ``records`` is read.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from gnnmon.data.format import END, GC, MARKER, ROW, encode, typed_line
from gnnmon.data.paths import rank_path
from gnnmon.data.result import RunResult
from gnnmon.devices.fork import set_aside
from gnnmon.devices.peaks import hold_pollers, release_pollers
from gnnmon.devices.ranks import current_rank
from gnnmon.errors import NEVER_STARTED
from gnnmon.record import state
from gnnmon.record.gc_log import GC_LOG
from gnnmon.record.inbox import Deferred, Inbox
from gnnmon.record.interrupts import HELD, held_section, releasing
from gnnmon.record.manifest import at_end, build_manifest, distributed_entry
from gnnmon.record.memory_history import History
from gnnmon.record.names import check_name, warn_late_mark
from gnnmon.record.options import Options
from gnnmon.record.outlets import Outlets, refuse_shared_file
from gnnmon.record.probes import chosen
from gnnmon.record.sinks import Batch, JsonlSink, Sink, as_sinks
from gnnmon.report import Report
from gnnmon.timeline.energy_sources import EnergySources
from gnnmon.timeline.session import Timeline

DRAIN_EVERY = 256
"""Rows a run without sinks lets gather in its inbox before it drains them on the closing thread."""

SAMPLE_SLACK = 256
"""Samples a bounded run lets gather beyond its window before it trims the oldest."""

BACKLOG = 4096
"""Rows a run with sinks lets wait for its writer thread before the closing thread waits for it
(backpressure: rows made faster than they can be written, as in a loop of microsecond steps, or a
slow sink, must not pile up in memory)."""

CHILD_MAX_RECORDS = 1_000
"""Rows a forked child (a DataLoader worker) keeps of the runs it inherited."""

FORKED_NOTE = "processes forked during this run (DataLoader workers) kept their rows: they are not in this run"


def _end_line(run: Run) -> dict[str, Any]:
    """``run``'s end line as it is now (what its closing sinks get)."""
    end: dict[str, Any] = {"type": END, "rows": run.rows_written, "end_ns": time.time_ns(),
                           "ended": run.ended, "sampler": run.sampler_stats, **at_end()}
    if run.children_forked:
        end["children_forked"] = run.children_forked
        end["notes"] = [FORKED_NOTE]
    if run.sink_errors:
        end["sink_errors"] = list(run.sink_errors)
    unmeasured = HELD.unmeasured - run._unmeasured_at_start
    if unmeasured:
        end["unmeasured_calls"] = unmeasured  # made by signal handlers that interrupted gnnmon
    if run.signal:  # a SIGTERM came while it was active (gnnmon.record.sigterm)
        end["signal"] = run.signal
    end.update(run.end_info)
    return end


def _result(run: Run, stacklevel: int) -> RunResult:
    """:meth:`Run.result`, warning ``stacklevel`` frames up (the user's line) for a run never started."""
    if run._state == "new":
        warnings.warn(NEVER_STARTED, UserWarning, stacklevel)
    run.flush()
    return RunResult.of_lines(list(run._window), manifest=run.manifest, gc_events=list(run.gc_events),
                              samples=list(run.samples), markers=list(run.markers),
                              points=run.counters.points(), path=run.path, complete=run.complete,
                              end={"rows": run.rows_written, "max_records": run.max_records,
                                   "sampler": run.sampler_stats, "children_forked": run.children_forked,
                                   "signal": run.signal, **at_end(True), **run.end_info})


class Run:
    """One collection of rows: ``Run(path=None, *, sinks=(), **options)``, made by
    :func:`collect` (see it, and :class:`~gnnmon.record.options.Options`, for the options).

    ``records`` is the window of row dicts kept in memory (all of them for a run without a file or
    sink); ``markers`` the ``mark`` calls; ``gc_events`` and ``samples`` what the GC log and the
    sampler sent (bounded like the rows). :meth:`result` and :meth:`report` read the window.
    What the sampler sends is kept by the run's :class:`~gnnmon.timeline.session.Timeline`
    (``timeline``); what goes to the sinks, by its :class:`~gnnmon.record.outlets.Outlets`
    (``outlets``).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, sinks: Iterable[Any] = (),
                 **options: Any) -> None:
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        self.options = opts = Options.of("collect()", options)
        self.rank = current_rank()  # in a distributed job: each rank writes a file of its own
        self._job_path = Path(os.fspath(path)).name if path is not None else None  # as given: names the job
        self.path = rank_path(path, None if self.rank is None else self.rank.rank) if path is not None else None
        self.flush_interval = float(opts.flush_interval)
        file = JsonlSink(self.path, opts.mode, opts.compressed(self.path)) if self.path is not None else None
        self.outlets = Outlets(as_sinks(sinks), file, self._drain, self.flush_interval, partial(_end_line, self))
        self.sink_errors: list[str] = self.outlets.errors  # why sinks were disabled (each raised; the run went on)
        self.write_errors: list[str] = self.outlets.write_errors  # why writing the file failed (the first ten)
        self.config: dict[str, Any] = dict(opts.config or {})
        self.sample_interval = opts.sample_interval
        self.max_records = opts.window(bool(self.outlets.sinks))
        self.timeline = Timeline(self.outlets.pass_on)  # samples, counters' points, the join, the run's sampler
        self.energy: EnergySources | None = None  # while collecting with energy=True (what probes read)
        self.samples: list[dict[str, Any]] = self.timeline.samples  # in time order (joined to rows by bisection)
        self.counters = self.timeline.counters  # energy counters' points (their steps), for interpolation
        self.sampler_stats: dict[str, Any] = self.timeline.stats  # the sampler's own cost, after stop
        self._window: deque[bytes] = deque(maxlen=self.max_records)  # the newest rows, as their JSON lines
        self.gc_events: deque[dict[str, Any]] = deque(maxlen=self.max_records)
        self.add_gc_event = self.outlets.keeper(GC, self.gc_events)  # what the GC log calls: no lock, no I/O
        self.markers: list[dict[str, Any]] = []
        self.manifest: dict[str, Any] | None = None
        self.rows_written = 0  # rows finished (in the window and handed to every sink)
        self.complete: bool | None = None
        self._marks: dict[str, Any] = {}
        self._counters: dict[str, itertools.count] = {}
        self.holds_gc_hook = False  # True while started: rows then need not install the GC hook
        self._lock = threading.RLock()  # reentrant: a signal handler's row may arrive mid-drain
        self._draining = False  # set under the lock: only this thread can see it True
        self._inbox = Inbox()
        self.children_forked = 0  # forks while active (DataLoader workers): their rows are not here
        self._state = "new"  # then "active", "stopping", "stopped"
        self.active = False  # from start() to stop()
        self.thread: int | None = None  # the thread that started it
        self.ended = "stop"  # how the run ended, for its end line: see stop()
        self.signal: str | None = None  # a SIGTERM's name, set by gnnmon.record.sigterm while active
        self.end_info: dict[str, Any] = {}  # what a launcher adds to the end line (gnnmon run: ``steps``)
        self._last_error = None  # sys.last_value when the run started (an uncaught error's, if any, is newer)
        self._unmeasured_at_start = 0
        self.history = History(opts.memory_history)  # CUDA's allocation history, opt-in
        self.sched = opts.sched_on(self.rank is not None)  # rows read their thread's counters
        self.probes = chosen(self)  # every-row figures its options turn on (again at start)

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> Run:
        """Write the manifest, open the sinks and make this the active run (what ``with`` does)."""
        if self._state != "new":
            raise RuntimeError(f"this run is {self._state}; make a new one with gnnmon.collect()")
        begun = time.monotonic()  # the writer's first drain is due one interval after this
        options: dict[str, Any] = {"max_records": self.max_records, "sample": self.sample_interval,
                                   "flush_interval": self.flush_interval,
                                   "sinks": [type(s).__name__ for s in self.outlets.sinks]}
        energy = self.options.energy_options()
        try:  # a bad option or an unwritable file: the sampler must not outlive the failed start
            if self.sample_interval is not None:
                options.update(self.timeline.open(self.sample_interval, self.options.sampler, energy))
                self.energy = self.timeline.energy
            self.probes = chosen(self)  # energy is known now; a package's probes are read here
            options["memory_history"] = self.history.start()
            options["sched"] = self.sched
            self.manifest = build_manifest(self.config, options)
            self.manifest["distributed"] = distributed_entry(self.rank, self.options.distributed, self._job_path)
            self.manifest["file"] = str(self.path.resolve()) if self.path is not None else None
            if self.path is not None:
                refuse_shared_file(self.path, state.RUNS)
            self.outlets.open(self.manifest)
        except BaseException:
            self.timeline.stop()
            self.history.stop()
            raise
        self._state, self.active = "active", True
        self.thread = threading.get_ident()  # its thread's rows come here (record/active.py)
        self._last_error = getattr(sys, "last_value", None)
        self._unmeasured_at_start = HELD.unmeasured
        GC_LOG.acquire()
        self.holds_gc_hook = True
        hold_pollers()
        state.push(self)
        writer = self.outlets.start()
        self.timeline.go()  # its first sample and points go to the sinks: the writer exists
        if writer is not None:
            writer.start(at=begun)
        return self

    def stop(self, ended: str = "stop") -> None:
        """Take the last sample, finish every row, send the last batch and the end line to every
        sink, close them, stop being active. Every thread the run started is joined.

        ``ended`` is what the end line says of how the run ended: ``"stop"``, ``"exception
        KeyError"`` (raised through ``with collect()``), ``"exit"`` (stopped at interpreter exit),
        ``"uncaught KeyError"`` (at an exit caused by that exception)."""
        if self._state != "active":
            return
        self.ended = ended
        self.timeline.stop()  # its last sample and every counter's next step cover every row closed before it
        self.history.stop()
        state.pop(self)
        GC_LOG.release()
        self.holds_gc_hook = False
        release_pollers()
        self._state, self.active = "stopping", False
        self.outlets.stop(self._drain)
        self._state = "stopped"
        self.complete = True

    def stop_at_exit(self) -> None:
        """:meth:`stop` at interpreter exit, saying whether an uncaught exception (``sys.last_value``) caused it."""
        last = getattr(sys, "last_value", None)
        self.stop("exit" if last is None or last is self._last_error else f"uncaught {type(last).__name__}")

    @releasing
    def __enter__(self) -> Run:
        with held_section():  # a Ctrl-C waits until the run is whole (record/interrupts.py)
            return self.start()

    @releasing
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        with held_section():
            self.stop("stop" if exc_type is None else f"exception {exc_type.__name__}")

    def after_fork_in_child(self) -> None:
        """In a forked child (a DataLoader worker): this run is the parent's. Its threads did not
        come along, its locks may have been held at the fork, and its sinks, sampler process and
        pending rows are the parent's (their CUDA events are set aside: :mod:`gnnmon.devices.fork`).
        The child keeps its newest rows in memory only, with fresh locks, no sinks and no timeline."""
        self.outlets.forget()
        self.timeline.forget()
        self._lock = threading.RLock()
        self._draining = False
        set_aside(self._inbox)
        self._inbox = Inbox()
        self.max_records = CHILD_MAX_RECORDS
        self._window = deque(list(self._window)[-CHILD_MAX_RECORDS:], maxlen=CHILD_MAX_RECORDS)
        self.gc_events = deque(list(self.gc_events)[-CHILD_MAX_RECORDS:], maxlen=CHILD_MAX_RECORDS)
        self.add_gc_event = self.outlets.keeper(GC, self.gc_events)

    # -- rows -------------------------------------------------------------------------------
    def next_index(self, label: str) -> tuple[int, dict[str, Any]]:
        """Call number for ``label`` (0-based) and the current marker values for a new row (a
        dict that is replaced, never changed, by :meth:`mark`: read it, do not keep it)."""
        counter = self._counters.get(label)
        if counter is None:
            with self._lock:
                counter = self._counters.setdefault(label, itertools.count())
        return next(counter), self._marks  # next() on a count is atomic under the GIL

    def add_row(self, fields: dict[str, Any], deferred: list[Deferred] | None = None) -> None:
        """Take a finished row: it joins the inbox (what the step pays); see the module doc."""
        inbox = self._inbox
        inbox.append(fields if deferred is None else (fields, deferred))  # atomic: no lock
        if len(inbox) >= DRAIN_EVERY:
            writer = self.outlets.writer
            if writer is None:
                self._drain(False)
            elif len(inbox) >= BACKLOG and not writer.on_writer_thread():
                writer.flush(force=False)  # backpressure: wait for the writer rather than pile rows up

    def _drain(self, force: bool) -> None:
        """Finish the rows that are ready (:meth:`Inbox.take_ready`), keep their lines in the window
        and hand them on, with the other lines passed on meanwhile, to the sinks."""
        with self._lock:
            if self._draining:  # this thread is inside a drain already (a signal handler's row): later
                return
            self._draining = True
            try:
                rows = self._inbox.take_ready(self.timeline.join, force)
                # the rows' file lines (exact-size bytes: orjson's own buffers are over-allocated)
                encoded = [typed_line(ROW, encode(fields)) for fields in rows]
                self._window.extend(encoded)
                self.rows_written += len(rows)
                if self.max_records is not None and len(self.samples) > self.max_records + SAMPLE_SLACK:
                    # about as many samples as rows in memory (sinks get all)
                    self.timeline.trim(self.max_records, self._inbox.oldest_start())
                batch = Batch(rows, encoded, self.outlets.passed_on())
            finally:
                self._draining = False
        if len(batch) and self.outlets.sinks:
            self.outlets.write(batch)

    def flush(self) -> None:
        """Finish every row closed so far and hand it to the sinks (waiting for the device, the writer)."""
        writer = self.outlets.writer
        if writer is not None:
            writer.flush()
        else:
            self._drain(True)

    @property
    def records(self) -> list[dict[str, Any]]:
        """The rows kept in memory (after finishing pending ones), oldest first: every row of a
        run without a file or sink, else the newest ``max_records`` (a run never started: none).
        Fresh dicts on each read, read from the window's lines (kept as bytes, which the garbage
        collector does not track): to read them more than once, keep them, or :meth:`result`,
        whose ``records`` are made once."""
        if self._state == "new":
            warnings.warn(NEVER_STARTED, UserWarning, 2)
        self.flush()
        return RunResult.of_lines(list(self._window)).records  # the rows alone

    # -- sinks ------------------------------------------------------------------------------
    def add_sink(self, sink: Any) -> Sink:
        """Send this run's data to ``sink`` too (a :class:`~gnnmon.record.sinks.Sink` or a function
        ``fn(rows)``), from the next batch on; returns the sink. On a run that has started the
        sink is opened here with the manifest and a writer thread is started if none runs."""
        return self.outlets.add(sink, self._state, self.manifest)

    def remove_sink(self, sink: Sink) -> None:
        """Send ``sink`` every row closed so far, close it (on the writer thread) and stop sending
        it anything. A run left with no sink stops its writer thread."""
        self.outlets.remove(sink, self._state)

    @property
    def lines_lost(self) -> int:
        """Lines (rows, samples, events) a failed write kept out of the file."""
        return self.outlets.lines_lost

    # -- markers ----------------------------------------------------------------------------
    def mark(self, kind: str, value: Any = None, *, carry: bool = True) -> None:
        """Record a marker (``run.mark("epoch", 3)``); rows opened after it carry ``kind=value``.
        ``carry=False`` only records it (values that are not row fields: a dict of settings)."""
        if not isinstance(kind, str) or not kind.isidentifier():
            raise ValueError(f"marker kind must be an identifier string, got {kind!r}")
        if carry:
            check_name(kind, "marker kind")  # one of gnnmon's fields: the rows would hold it in its place
        if carry and not (value is None or isinstance(value, (str, int, float, bool))):
            raise TypeError(f"a carried marker value must be a str, number, bool or None (rows are "
                            f"flat); got {type(value).__name__}: pass carry=False to record it only")
        warn_late_mark(self._state, kind, value, self.path)
        with self._lock:
            if carry:
                self._marks = {**self._marks, kind: value}  # replaced, not changed: rows read it unlocked
            marker = {"kind": kind, "value": value, "t_ns": time.time_ns(), "carry": carry}
            self.markers.append(marker)
            self.outlets.pass_on(MARKER, marker)

    # -- reading ----------------------------------------------------------------------------
    @property
    def points(self) -> list[dict[str, Any]]:
        """The energy counters' points (``key``, ``t_ns``, ``value``), key by key, in time order
        (the file also keeps each one's ``err_ns`` and ``step``)."""
        return self.counters.points()

    def result(self) -> RunResult:
        """What this run holds now (after finishing pending rows) as a plain
        :class:`~gnnmon.data.result.RunResult`, for reports and exports: its window's row lines read
        as a file's are (:meth:`RunResult.of_lines`)."""
        return _result(self, 3)

    def report(self) -> Report:
        """A :class:`gnnmon.report.Report` over this run's rows in memory."""
        return Report(_result(self, 3))

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        return f"<gnnmon.Run {where} {self._state} rows={self.rows_written}>"
