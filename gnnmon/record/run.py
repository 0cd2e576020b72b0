"""The run (the collector): a :class:`Run` receives every row, GC event, marker and sample.

``with gnnmon.collect("runs/x.jsonl") as run:`` makes ``run`` the active run. With no active run,
rows go to a bounded default run (:func:`default_run`).

What a row costs the step: closing it appends ``(fields, deferred figures)`` to the run's inbox,
nothing more. The rest happens later, off the step's path, in order: device events are read once
they have completed, the timeline is joined once it covers the row (a sample and every energy
counter's next point after the row's end), and the row
is stored and written. For a run with a file a writer thread does this every 50 ms
(:mod:`gnnmon.record.writer`), and the closing thread helps when more than :data:`BACKLOG` rows
wait; for a run in memory it is done when the inbox fills up and when ``records`` is read. Each row line in the file is final: figures joined from the timeline are in
it.
"""

from __future__ import annotations

import bisect
import errno
import itertools
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from gnnmon.devices.cuda import cuda_uuids
from gnnmon.devices.peaks import hold_pollers, release_pollers
from gnnmon.devices.ranks import clock_offset, current_rank, rank_path
from gnnmon.errors import is_positive_number
from gnnmon.fields import IDENTITY_FIELDS, ROW_FIELD_PREFIXES
from gnnmon.record import state
from gnnmon.record.gc_log import GC_LOG
from gnnmon.record.interrupts import held_section
from gnnmon.record.manifest import build_manifest
from gnnmon.record.storage import JsonlWriter, dumps, typed_line
from gnnmon.record.writer import DEFAULT_INTERVAL, Flusher
from gnnmon.report import Report
from gnnmon.timeline.energy import EnergyJoin, EnergySources
from gnnmon.timeline.join import Counters, RowJoin, energy_balance, sample_time
from gnnmon.timeline.sampler import DEFAULT_INTERVAL as DEFAULT_SAMPLE_INTERVAL
from gnnmon.timeline.sampler import Sampler, start_sampler


class Deferred(Protocol):
    """Figures read later: ``ready()`` must not block; ``resolve(fields)`` may (it adds fields)."""

    def ready(self) -> bool: ...

    def resolve(self, fields: dict[str, Any]) -> None: ...


MAX_PENDING = 1024
"""Rows waiting in the inbox before the oldest is forced out (its events waited for)."""

DRAIN_EVERY = 256
"""Rows a run without a file lets gather in its inbox before it drains them on the closing thread."""

SAMPLE_SLACK = 256
"""Samples a run with ``max_records`` lets gather beyond that bound before it trims the oldest."""

BACKLOG = 4096
"""Rows a run with a file lets wait for its writer thread before the closing thread does the
writing itself (backpressure: rows made faster than they can be written, as in a loop of
microsecond steps, must not pile up in memory)."""

Inbox = deque[tuple[dict[str, Any], "list[Deferred] | None", "RowJoin | None"]]


class Run:
    """One collection of rows. Use :func:`collect` to make one, :func:`load` to read one back.

    ``records`` is the list of row dicts; ``markers`` the ``mark`` calls; ``gc_events`` and
    ``samples`` are filled by the GC log and the utilisation sampler. ``max_records`` keeps only
    the newest rows (and about as many samples) in memory (the file keeps all). See :func:`collect` for ``sample`` and
    ``energy``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        config: Mapping[str, Any] | None = None,
        max_records: int | None = None,
        mode: str = "w",
        sample: float | None = None,
        energy: bool = False,
        country: str | None = None,
        region: str | None = None,
        carbon_intensity: float | None = None,
        cpu_power_w: float | None = None,
        ram_power_w: float | None = None,
        flush_interval: float = DEFAULT_INTERVAL,
        sampler: str = "process",
        distributed: bool = True,
    ) -> None:
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping, not {type(config).__name__}")
        if config is not None:
            try:
                dumps(dict(config))
            except (ValueError, TypeError, RecursionError) as exc:  # e.g. a dict that holds itself
                raise ValueError(f"config cannot be stored as JSON ({type(exc).__name__}: {exc}); give plain "
                                 "values (numbers, strings, lists, dicts)") from None
        if max_records is not None and (not isinstance(max_records, int) or max_records < 1):
            raise ValueError(f"max_records must be a positive int or None, got {max_records!r}")
        if sample is not None and not is_positive_number(sample):
            raise ValueError(f"sample must be a finite interval in seconds > 0 (e.g. 0.5) or None, got {sample!r}")
        if not isinstance(energy, bool):
            raise TypeError(f"energy must be True or False, not {type(energy).__name__}")
        given = [n for n, v in (("country", country), ("region", region), ("carbon_intensity", carbon_intensity),
                                ("cpu_power_w", cpu_power_w), ("ram_power_w", ram_power_w)) if v is not None]
        if given and not energy:
            raise ValueError(f"{', '.join(given)} only shape the energy figures: pass "
                             f"energy=True with {'it' if len(given) == 1 else 'them'}, or leave "
                             f"{'it' if len(given) == 1 else 'them'} out")
        for name, watts in (("cpu_power_w", cpu_power_w), ("ram_power_w", ram_power_w)):
            if watts is not None and not is_positive_number(watts):
                raise ValueError(f"{name} must be a power in watts > 0 (e.g. 65), got {watts!r}")
        if country is not None and (not isinstance(country, str) or len(country) != 3 or not country.isalpha()):
            raise ValueError(f"country must be an ISO 3166 alpha-3 code such as 'FRA', got {country!r}")
        if sampler not in ("process", "thread"):
            raise ValueError(f"sampler must be 'process' (its own process) or 'thread', got {sampler!r}")
        if not is_positive_number(flush_interval):
            raise ValueError(f"flush_interval must be a finite number of seconds > 0, got {flush_interval!r}")
        if not isinstance(distributed, bool):
            raise TypeError(f"distributed must be True or False, not {type(distributed).__name__}")
        self.rank = current_rank()  # in a distributed job: each rank writes a file of its own
        self._collectives = distributed
        self._job_path = Path(os.fspath(path)).name if path is not None else None  # as given: names the job
        self.path = rank_path(path, self.rank) if path is not None else None
        self.config = dict(config or {})
        if energy and sample is None:
            sample = DEFAULT_SAMPLE_INTERVAL  # energy comes from counters read on the timeline
        self.sample_interval = float(sample) if sample is not None else None
        self.flush_interval = float(flush_interval)
        self._energy_options: dict[str, Any] | None = (
            {"country": country, "region": region, "carbon_intensity_g_per_kwh": carbon_intensity,
             "cpu_power_w": cpu_power_w, "ram_power_w": ram_power_w}
            if energy else None
        )
        self.energy: EnergySources | None = None  # while collecting with energy=True
        self._sampler_mode = sampler
        self._sampler: Sampler | None = None
        self.sampler_stats: dict[str, Any] = {}  # the sampler's own cost, after stop
        self.join: RowJoin | None = None  # what rows closed now get from the timeline
        self.max_records = max_records
        self._mode = mode
        self._rows: deque[dict[str, Any]] | list[dict[str, Any]] = (
            deque(maxlen=max_records) if max_records else []
        )
        # GC events arrive from inside gc callbacks: appended without a lock, written later.
        self.gc_events: deque[dict[str, Any]] | list[dict[str, Any]] = (
            deque(maxlen=max_records) if max_records else []
        )
        self.samples: list[dict[str, Any]] = []  # in time order (joined to rows by bisection)
        self.counters = Counters()  # energy counters' points (their steps), for interpolation
        self.markers: list[dict[str, Any]] = []
        self.manifest: dict[str, Any] | None = None
        self.rows_written = 0  # rows stored (in memory and, with a path, in the file)
        self.complete: bool | None = None
        self._marks: dict[str, Any] = {}
        self._counters: dict[str, itertools.count] = {}
        self.holds_gc_hook = False  # True while started: rows then need not install the GC hook
        self._lock = threading.RLock()  # reentrant: a signal handler's row may arrive mid-drain
        self._draining = False  # set under the lock: only this thread can see it True
        self._file: JsonlWriter | None = None
        self._flusher: Flusher | None = None
        self._inbox: Inbox = deque()
        self._lines: deque[dict[str, Any]] = deque()  # GC events, samples, markers to write
        self.write_errors: list[str] = []  # why writing failed (the first MAX_WRITE_ERRORS)
        self.lines_lost = 0  # lines (rows, samples, events) a failed write kept out of the file
        self._write_warned = False
        self.children_forked = 0  # forks while active (DataLoader workers): their rows are not here
        self._state = "new"

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        manifest: dict[str, Any] | None,
        rows: Iterable[dict[str, Any]],
        gc_events: Iterable[dict[str, Any]],
        samples: Iterable[dict[str, Any]],
        markers: Iterable[dict[str, Any]],
        complete: bool,
        points: Iterable[dict[str, Any]] = (),
        end: dict[str, Any] | None = None,
    ) -> Run:
        """A run read back from a file (state ``loaded``; see :func:`gnnmon.load`)."""
        run = cls()
        run.path = Path(path)
        run._state = "loaded"
        run.complete = complete
        run.manifest = manifest
        run.config = dict((manifest or {}).get("config") or {})
        run._rows.extend(rows)
        run.rows_written = len(run._rows)
        run.gc_events.extend(gc_events)
        run.samples.extend(samples)
        run.markers.extend(markers)
        for point in points:
            run.counters.add(point)
        run.sampler_stats = dict((end or {}).get("sampler") or {})
        run.children_forked = int((end or {}).get("children_forked") or 0)
        return run

    # -- life cycle -------------------------------------------------------------------------
    def _distributed_entry(self) -> dict[str, Any] | None:
        """The manifest's ``distributed``: this rank, and its clock's offset to rank 0 where a
        process group can measure it (a collective: every rank entering ``collect`` takes part)."""
        if self.rank is None:
            return None
        entry = self.rank.describe()
        entry["collectives"] = self._collectives
        entry["job_path"] = self._job_path  # the file name every rank was given: finds the others
        if self._collectives and self.rank.source == "process group":
            entry.update(clock_offset())
        return entry

    def start(self) -> Run:
        """Write the manifest and make this the active run (what ``with`` does)."""
        if self._state != "new":
            raise RuntimeError(f"this run is {self._state}; make a new one with gnnmon.collect()")
        options: dict[str, Any] = {"max_records": self.max_records, "sample": self.sample_interval,
                                   "flush_interval": self.flush_interval}
        sampler = None
        if self.sample_interval is not None:
            uuids, mapped_by = cuda_uuids()
            settings = {"interval": self.sample_interval, "uuids": uuids,
                        "energy": self._energy_options is not None}
            sampler = start_sampler(settings, self._take_timeline, self._sampler_mode)
            options["sampler"] = {"mode": sampler.mode, "why": sampler.why, "pid": sampler.hello.get("pid"),
                                  "startup_s": sampler.hello.get("startup_s"), "gpus_mapped_by": mapped_by}
            options["nvml"] = sampler.hello.get("nvml")
        energy_join = None
        try:  # a bad option or an unwritable file: the sampler must not outlive the failed start
            if self._energy_options is not None and sampler is not None:
                self.energy = EnergySources(sampler.hello, **self._energy_options)
                options["energy"] = self.energy.describe()
                energy_join = EnergyJoin(options["energy"], sampler.interval)
            self.manifest = build_manifest(self.config, options)
            self.manifest["distributed"] = self._distributed_entry()
            if self.path is not None:
                self._check_not_written_by_another_run()
                self._file = self._open_file()
        except BaseException:
            if sampler is not None:
                sampler.stop()
            raise
        self._state = "active"
        _watch_forks()
        GC_LOG.acquire()
        self.holds_gc_hook = True
        hold_pollers()
        _push(self)
        if sampler is not None:
            self._sampler = sampler
            self.join = RowJoin(self.samples, self.counters, sampler.interval, energy_join, refresh=sampler.now)
            sampler.go()
            sampler.now()  # a sample and every counter's first step: the first rows have a point before them
        if self._file is not None:
            self._flusher = Flusher(self._drain_ready, self.flush_interval).start()
        return self

    def _check_not_written_by_another_run(self) -> None:
        mine = os.path.realpath(self.path)  # type: ignore[arg-type]
        for other in state.RUNS:
            if other.path is not None and os.path.realpath(other.path) == mine:
                raise ValueError(f"{self.path} is already being written by an active gnnmon.collect(); give the "
                                 "nested run a path of its own (or none, to keep its rows in memory)")

    def _open_file(self) -> JsonlWriter | None:
        """The run's file with its manifest, put in place whole. Out of file descriptors or disk
        space, the run goes on in memory (one warning; ``run.write_errors`` says why): the user's
        run is not stopped by its measurements."""
        try:
            return JsonlWriter(self.path, self._mode, header=self.manifest)  # type: ignore[arg-type]
        except OSError as exc:
            if exc.errno not in RESOURCE_ERRNOS:
                raise  # a bad path, a folder, permissions: the user's to fix
            self.write_errors.append(f"{type(exc).__name__}: {exc}")
            warnings.warn(f"gnnmon could not open {self.path} ({exc}); this run keeps its rows in memory only "
                          "(run.records)", RuntimeWarning, 4)
            return None

    def stop(self) -> None:
        """Take the last sample, resolve and write every row, write the closing line, close the
        file, stop being active. Every thread the run started is joined."""
        if self._state != "active":
            return
        if self._sampler is not None:
            # its last sample and every counter's next step cover every row closed before it
            self._sampler.stop()
            self.sampler_stats = dict(self._sampler.bye)
            self.sampler_stats.pop("m", None)
            if self._sampler.errors:  # a sink that raised, a sampler that failed mid-run
                self.sampler_stats["errors"] = list(self._sampler.errors)
        _pop(self)
        GC_LOG.release()
        self.holds_gc_hook = False
        release_pollers()
        if self._flusher is not None:
            self._flusher.stop()
        with self._lock:
            self._drain(force=True)
            self._state = "stopped"
            self.complete = True
            self._write_lines(end=True)
            if self._file is not None:
                try:
                    self._file.close()
                except OSError as exc:
                    self.write_errors.append(f"{type(exc).__name__}: {exc}")

    def __enter__(self) -> Run:
        with held_section():  # a Ctrl-C waits until the run is whole (record/interrupts.py)
            return self.start()

    def __exit__(self, *exc: Any) -> None:
        with held_section():
            self.stop()

    def __del__(self) -> None:  # a run dropped without stop(): never leave a thread running
        if getattr(self, "_state", None) == "active":
            for part in (getattr(self, "_sampler", None), getattr(self, "_flusher", None)):
                if part is not None:
                    part.stop()

    @property
    def active(self) -> bool:
        return self._state == "active"

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
        inbox.append((fields, deferred, self.join))  # deque.append is atomic: no lock
        if len(inbox) >= (DRAIN_EVERY if self._flusher is None else BACKLOG):
            self._drain_ready()

    def add_gc_event(self, event: dict[str, Any]) -> None:
        """Take a GC event (called from inside a gc callback: no lock, no I/O here)."""
        self.gc_events.append(event)
        if self._file is not None:
            self._lines.append({"type": "gc", **event})

    def _take_timeline(self, message: dict[str, Any]) -> None:
        """What the sampler sends (on its reader thread): a sample or a counter's point."""
        if message.pop("type", None) == "point":
            self.add_point(message)
        else:
            self.add_sample(message)

    def add_sample(self, sample: dict[str, Any]) -> None:
        """Take a utilisation sample (from the sampler's reader thread): kept, written by the writer."""
        self.samples.append(sample)
        if self._file is not None:
            self._lines.append({"type": "sample", **sample})

    @property
    def points(self) -> list[dict[str, Any]]:
        """The energy counters' points (``key``, ``t_ns``, ``value``), key by key, in time order
        (the file also keeps each one's ``err_ns`` and ``step``)."""
        return self.counters.points()

    def add_point(self, point: dict[str, Any]) -> None:
        """Take a counter's point (``key``, ``t_ns``, ``value``, ``err_ns``, ``step``): kept
        (compactly), written."""
        self.counters.add(point)
        if self._file is not None:
            self._lines.append({"type": "point", **point})

    def _drain_ready(self) -> None:
        """Store the rows that are ready (never waits for the device); force the oldest out only
        when too many wait."""
        with self._lock:
            self._drain(force=False)

    def _drain(self, force: bool) -> None:
        """Move rows from the inbox to storage, in order. A row is ready when its deferred figures
        are (checked without blocking) and the timeline covers it. ``force`` (flush, stop): every
        row, waiting for the device where needed, after asking the sampler for a sample now so
        the timeline covers them. Without ``force`` only rows waiting for their device events
        are forced out, the oldest first, when more than :data:`MAX_PENDING` wait."""
        if self._draining:  # this thread is inside a drain already (a signal handler's row): later
            return
        self._draining = True
        try:
            self._drain_now(force)
        finally:
            self._draining = False

    def _drain_now(self, force: bool) -> None:
        inbox = self._inbox
        out: list[dict[str, Any]] = []
        overflow = len(inbox) - MAX_PENDING
        popleft, append = inbox.popleft, out.append
        refreshed: list[RowJoin] = []
        while inbox:
            fields, deferred, join = inbox[0]
            if not force and overflow <= 0 and deferred and not all(item.ready() for item in deferred):
                break
            if join is not None and not join.covers(fields):
                if not force:
                    break
                if join not in refreshed:
                    refreshed.append(join)
                    join.refresh()  # a sample now: it covers every row closed before it
            popleft()
            overflow -= 1
            if deferred:
                for item in deferred:
                    try:
                        item.resolve(fields)
                    except Exception as exc:  # noqa: BLE001 - keep the row, say what failed
                        fields.setdefault("notes", []).append(f"deferred figure failed: {exc}")
            if join is not None:
                join.join(fields)
            append(fields)
        if out:
            self._rows.extend(out)
            self.rows_written += len(out)
        self._write_lines(out)
        if self.max_records is not None and len(self.samples) > self.max_records + SAMPLE_SLACK:
            self._trim_samples()

    def _trim_samples(self) -> None:
        """With ``max_records``, keep about that many samples in memory too (the file keeps all),
        never one that a row still waiting for its join may need (called under the run's lock,
        where rows are joined; the sampler's thread only appends)."""
        samples = self.samples
        cut = len(samples) - self.max_records if self.max_records is not None else 0
        if self._inbox:
            oldest = self._inbox[0][0]["t_start_ns"]
            cut = min(cut, bisect.bisect_left(samples, oldest, key=sample_time) - 1)
        if cut > 0:
            del samples[:cut]

    def _write_lines(self, rows: Sequence[dict[str, Any]] = (), end: bool = False) -> None:
        """Write pending GC events, samples and markers, then ``rows`` (then the end line), in one
        write. A failed write (a full disk) warns: the rows stay in memory, the call goes on."""
        file = self._file
        if file is None or file.closed:
            return
        lines = self._lines
        batch = [dumps(lines.popleft()) for _ in range(len(lines))]
        batch.extend([typed_line("row", fields) for fields in rows])
        if end:
            batch.append(dumps(self._end_line()))
        if not batch:
            return
        try:
            file.write_lines(batch)
        except Exception as exc:  # noqa: BLE001 - the user's run comes first; the rows are in memory
            self.lines_lost += len(batch)
            if len(self.write_errors) < MAX_WRITE_ERRORS:
                self.write_errors.append(f"{type(exc).__name__}: {exc}")
            if not self._write_warned:  # one warning for the whole run
                self._write_warned = True
                warnings.warn(f"gnnmon could not write to {self.path}: {exc!r}; this run's rows stay in "
                              "run.records; later failures are counted in run.lines_lost, not warned again",
                              RuntimeWarning, 2)

    def _end_line(self) -> dict[str, Any]:
        end: dict[str, Any] = {"type": "end", "rows": self.rows_written, "end_ns": time.time_ns(),
                               "sampler": self.sampler_stats}
        if self.children_forked:
            end["children_forked"] = self.children_forked
            end["notes"] = [FORKED_NOTE]
        return end

    def flush(self) -> None:
        """Resolve and store every row closed so far (waits for the device where needed)."""
        with self._lock:
            self._drain(force=True)

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every row kept in memory (after resolving pending ones), in completion order."""
        self.flush()
        return list(self._rows)

    # -- markers ----------------------------------------------------------------------------
    def mark(self, kind: str, value: Any = None, *, carry: bool = True) -> None:
        """Record a marker (e.g. ``run.mark("epoch", 3)``); rows opened after it carry
        ``kind=value``. ``carry=False`` only records it (for values that are not row fields, such as
        a dict of settings read back from a loader)."""
        if not isinstance(kind, str) or not kind.isidentifier():
            raise ValueError(f"marker kind must be an identifier string, got {kind!r}")
        if carry and (kind in IDENTITY_FIELDS or kind.startswith(ROW_FIELD_PREFIXES)):
            raise ValueError(f"marker kind {kind!r} would shadow a row field; pick another name")
        if carry and not (value is None or isinstance(value, (str, int, float, bool))):
            raise TypeError(f"a carried marker value must be a str, number, bool or None (rows are "
                            f"flat); got {type(value).__name__}: pass carry=False to record it only")
        with self._lock:
            if carry:
                self._marks = {**self._marks, kind: value}  # replaced, not changed: rows read it unlocked
            marker = {"kind": kind, "value": value, "t_ns": time.time_ns(), "carry": carry}
            self.markers.append(marker)
            if self._file is not None:
                self._lines.append({"type": "marker", **marker})

    # -- reading ----------------------------------------------------------------------------
    def report(self) -> Report:
        """A :class:`gnnmon.report.Report` over this run's rows."""
        records = self.records
        balance = energy_balance(records, self.counters) if self.counters.keys() else {}
        return Report(records, manifest=self.manifest, gc_events=list(self.gc_events),
                      samples=self.samples, markers=self.markers, energy_balance=balance)

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        return f"<gnnmon.Run {where} {self._state} rows={self.rows_written}>"


# -- the active run -----------------------------------------------------------------------------
MAX_WRITE_ERRORS = 10

FORKED_NOTE = ("processes forked during this run (DataLoader workers) kept the rows of their decorated calls "
               "to themselves: they are not in this run")

RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.EDQUOT, errno.ENOMEM}
"""What a machine runs out of (descriptors, disk, quota, memory): it costs the run its file, never
the user's code."""

DEFAULT_MAX_RECORDS = 10_000
CHILD_MAX_RECORDS = 1_000
"""Rows a forked child (a DataLoader worker) keeps of the runs it inherited."""

_fork_hook: list[bool] = []


def _in_forked_child() -> None:
    """After a fork, in the child: the runs it inherited are the parent's. Their writer thread
    and the sampler's reader thread did not come along, their locks may have been held at the
    fork, and their file and sampler process are the parent's. The child keeps its newest rows in
    memory only (no file, no timeline, fresh locks), never writes into the parent's file and
    never talks to the parent's sampler."""
    for run in [*state.RUNS, *state.DEFAULT]:
        run._file = None
        run._flusher = None
        run._sampler = None
        run.join = None
        run._lock = threading.RLock()
        run._draining = False
        run._inbox.clear()
        run._lines.clear()
        run._rows = deque(list(run._rows)[-CHILD_MAX_RECORDS:], maxlen=CHILD_MAX_RECORDS)
        run.gc_events = deque(list(run.gc_events)[-CHILD_MAX_RECORDS:], maxlen=CHILD_MAX_RECORDS)


def _forked_parent() -> None:
    """After a fork, in the parent: each active run counts it (its end line says how many)."""
    for run in state.RUNS:
        run.children_forked += 1


def _watch_forks() -> None:
    if not _fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_in_forked_child, after_in_parent=_forked_parent)
        _fork_hook.append(True)


def _push(run: Run) -> None:
    with state.LOCK:
        state.RUNS.append(run)


def _pop(run: Run) -> None:
    with state.LOCK:
        if run in state.RUNS:
            state.RUNS.remove(run)


def default_run() -> Run:
    """The run that takes rows when no ``collect`` is active (in memory, newest 10,000 rows)."""
    if not state.DEFAULT:
        with state.LOCK:
            if not state.DEFAULT:
                run = Run(max_records=DEFAULT_MAX_RECORDS)
                run._state = "active"
                state.DEFAULT.append(run)
    return state.DEFAULT[0]


def active_run() -> Run:
    """The innermost active ``collect`` run, else the default run."""
    runs = state.RUNS
    if runs:
        return runs[-1]
    return default_run()


def collect(
    path: str | os.PathLike[str] | None = None,
    *,
    config: Mapping[str, Any] | None = None,
    max_records: int | None = None,
    mode: str = "w",
    sample: float | None = None,
    energy: bool = False,
    country: str | None = None,
    region: str | None = None,
    carbon_intensity: float | None = None,
    cpu_power_w: float | None = None,
    ram_power_w: float | None = None,
    flush_interval: float = DEFAULT_INTERVAL,
    sampler: str = "process",
    distributed: bool = True,
) -> Run:
    """A new :class:`Run`; use it as ``with gnnmon.collect(path) as run:``.

    ``path``: JSON Lines file the rows stream to (None keeps them in memory only). In a distributed
    job (an initialised process group of more than one rank, or torchrun's ``RANK`` / ``WORLD_SIZE``)
    each rank writes its own file: ``{rank}`` in ``path`` is replaced by the rank, otherwise
    ``.rank<N>`` goes before the suffix (``job.jsonl`` -> ``job.rank0.jsonl``, ``job.rank1.jsonl``);
    the manifest's ``distributed`` says which rank wrote it and, inside a process group, its
    clock's offset to rank 0 (measured at start by all-gathers: every rank must enter ``collect``,
    as with any collective; ``distributed=False`` records this rank alone, with no collective),
    and ``gnnmon.load(path)`` reads the job back as one run whose rows carry ``rank``. ``config``: your
    settings, stored in the manifest. ``mode``: ``"w"`` overwrites, ``"x"`` refuses an existing file.
    ``sample``: seconds between utilisation samples (e.g. 0.5; None: no sampler).
    ``energy``: add ``energy_gpu_j``, ``energy_cpu_j``, ``energy_ram_j`` and ``co2_kg`` to every row,
    from counters the sampler reads (it then samples every ``sample`` seconds, 0.5 if not given);
    ``country`` (ISO alpha-3, e.g. ``"FRA"``) and ``region`` pick CodeCarbon's offline carbon
    intensity, or give ``carbon_intensity`` in g CO2eq/kWh. Without RAPL the CPU and RAM energy
    are CodeCarbon's model (its TDP guess for this CPU, probed once per machine);
    ``cpu_power_w`` (the CPU's power at full load, W) and ``ram_power_w`` (W) replace its
    guesses. ``flush_interval``: seconds between
    two writes of the rows that are ready (a kill loses at most the rows of the last interval,
    plus those still waiting for their device events or for the timeline to cover them).
    ``sampler``: where the sampler runs, ``"process"`` (its own: no busy loop or GC pause here
    stalls it; a thread where a process cannot be started, said in the manifest) or
    ``"thread"``.
    """
    if mode not in ("w", "x"):
        raise ValueError(f"mode must be 'w' (overwrite) or 'x' (refuse an existing file), got {mode!r}")
    return Run(path, config=config, max_records=max_records, mode=mode, sample=sample, energy=energy,
               country=country, region=region, carbon_intensity=carbon_intensity,
               cpu_power_w=cpu_power_w, ram_power_w=ram_power_w,
               flush_interval=flush_interval, sampler=sampler, distributed=distributed)
