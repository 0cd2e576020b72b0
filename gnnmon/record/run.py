"""The run (the collector): a :class:`Run` receives every row, GC event, marker and sample.

``with gnnmon.collect("runs/x.jsonl") as run:`` makes ``run`` the active run; rows stream to the
file as they complete. With no active run, rows go to a bounded default run (:func:`default_run`).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from gnnmon.devices.nvml import Nvml
from gnnmon.fields import IDENTITY_FIELDS, ROW_FIELD_PREFIXES
from gnnmon.record import state
from gnnmon.record.gc_log import GC_LOG
from gnnmon.record.manifest import build_manifest
from gnnmon.record.storage import JsonlWriter
from gnnmon.report import Report
from gnnmon.timeline.energy import EnergyMeter
from gnnmon.timeline.join import join_utilisation
from gnnmon.timeline.sampler import UtilisationSampler


class Deferred(Protocol):
    """Figures read later: ``ready()`` must not block; ``resolve(fields)`` may (it adds fields)."""

    def ready(self) -> bool: ...

    def resolve(self, fields: dict[str, Any]) -> None: ...


MAX_PENDING = 1024
"""Rows waiting for deferred figures (CUDA events) before the oldest is resolved by blocking."""


class Run:
    """One collection of rows. Use :func:`collect` to make one, :func:`load` to read one back.

    ``records`` is the list of row dicts; ``markers`` the ``mark`` calls; ``gc_events`` and
    ``samples`` are filled by the GC log and the utilisation sampler. ``max_records`` keeps only
    the newest rows in memory (the file keeps all). See :func:`collect` for ``sample`` and
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
    ) -> None:
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping, not {type(config).__name__}")
        if max_records is not None and (not isinstance(max_records, int) or max_records < 1):
            raise ValueError(f"max_records must be a positive int or None, got {max_records!r}")
        if sample is not None and (isinstance(sample, bool) or not isinstance(sample, (int, float)) or sample <= 0):
            raise ValueError(f"sample must be an interval in seconds > 0 (e.g. 0.5) or None, got {sample!r}")
        if not isinstance(energy, bool):
            raise TypeError(f"energy must be True or False, not {type(energy).__name__}")
        if country is not None and (not isinstance(country, str) or len(country) != 3 or not country.isalpha()):
            raise ValueError(f"country must be an ISO 3166 alpha-3 code such as 'FRA', got {country!r}")
        self.path = Path(path) if path is not None else None
        self.config = dict(config or {})
        self.sample_interval = float(sample) if sample is not None else None
        self._energy_options: dict[str, Any] | None = (
            {"country": country, "region": region, "carbon_intensity_g_per_kwh": carbon_intensity}
            if energy else None
        )
        self.energy: Any = None  # an EnergyMeter while collecting with energy=True
        self._sampler: Any = None
        self._nvml: Any = None
        self.max_records = max_records
        self._mode = mode
        self._rows: deque[dict[str, Any]] | list[dict[str, Any]] = (
            deque(maxlen=max_records) if max_records else []
        )
        # GC events arrive from inside gc callbacks: appended without a lock, written later.
        self.gc_events: deque[dict[str, Any]] | list[dict[str, Any]] = (
            deque(maxlen=max_records) if max_records else []
        )
        self._gc_unwritten: deque[dict[str, Any]] = deque()
        self.samples: list[dict[str, Any]] = []  # in time order (joined to rows by bisection)
        self.markers: list[dict[str, Any]] = []
        self.manifest: dict[str, Any] | None = None
        self.rows_written = 0
        self.complete: bool | None = None
        self._marks: dict[str, Any] = {}
        self._counters: dict[str, itertools.count] = {}
        self.holds_gc_hook = False  # True while started: rows then need not install the GC hook
        self._lock = threading.RLock()
        self._writer: JsonlWriter | None = None
        self._pending: deque[tuple[dict[str, Any], list[Deferred]]] = deque()
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
        return run

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> Run:
        """Write the manifest and make this the active run (what ``with`` does)."""
        if self._state != "new":
            raise RuntimeError(f"this run is {self._state}; make a new one with gnnmon.collect()")
        options: dict[str, Any] = {"max_records": self.max_records, "sample": self.sample_interval}
        if self.sample_interval is not None or self._energy_options is not None:
            self._nvml = Nvml()
            if not self._nvml.open():
                options["nvml"] = self._nvml.reason
        if self._energy_options is not None:
            self.energy = EnergyMeter(nvml=self._nvml, **self._energy_options)
            options["energy"] = self.energy.describe()
        self.manifest = build_manifest(self.config, options)
        if self.path is not None:
            self._writer = JsonlWriter(self.path, self._mode)
            self._writer.write(self.manifest)
        self._state = "active"
        GC_LOG.acquire()
        self.holds_gc_hook = True
        _push(self)
        if self.sample_interval is not None:
            self._sampler = UtilisationSampler(self.add_sample, self.sample_interval, nvml=self._nvml)
            self._sampler.start()
        return self

    def stop(self) -> None:
        """Resolve pending rows, write the closing line, close the file, stop being active."""
        if self._state != "active":
            return
        if self._sampler is not None:
            self._sampler.stop()  # joined: no thread left behind
        _pop(self)
        GC_LOG.release()
        self.holds_gc_hook = False
        self.flush()
        with self._lock:
            self._write_gc_events()
            self._state = "stopped"
            self.complete = True
            if self._writer is not None:
                self._writer.write(
                    {"type": "end", "rows": self.rows_written, "end_ns": time.time_ns()}
                )
                self._writer.close()
            if self._nvml is not None:
                self._nvml.close()

    def __enter__(self) -> Run:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:  # a run dropped without stop(): never leave the sampler running
        sampler = getattr(self, "_sampler", None)
        if sampler is not None and getattr(self, "_state", None) == "active":
            sampler.stop()

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
        """Take a finished row. Rows with deferred figures wait, in order, until those are ready
        (checked without blocking each time a row arrives) or until :meth:`flush`."""
        with self._lock:
            if deferred or self._pending:
                self._pending.append((fields, deferred or []))
                self._drain(block=len(self._pending) > MAX_PENDING)
            else:
                self._store(fields)

    def add_gc_event(self, event: dict[str, Any]) -> None:
        """Take a GC event (called from inside a gc callback: no lock, no I/O here)."""
        self.gc_events.append(event)
        if self._writer is not None:
            self._gc_unwritten.append(event)

    def _drain(self, block: bool) -> None:
        pending = self._pending
        while pending:
            fields, items = pending[0]
            if not block and not all(item.ready() for item in items):
                return
            pending.popleft()
            for item in items:
                try:
                    item.resolve(fields)
                except Exception as exc:  # noqa: BLE001 - keep the row, say what failed
                    fields.setdefault("notes", []).append(f"deferred figure failed: {exc}")
            self._store(fields)
            block = False  # only the oldest is forced when too many wait

    def add_sample(self, sample: dict[str, Any]) -> None:
        """Take a utilisation sample (from the sampler thread): kept, and written at once."""
        self.samples.append(sample)
        self._write("sample", sample)

    def _store(self, fields: dict[str, Any]) -> None:
        if self.sample_interval is not None:
            join_utilisation(fields, self.samples, self.sample_interval)
        if self.energy is not None:
            self.energy.finish(fields, self.samples, self.sample_interval)
        self._rows.append(fields)
        self.rows_written += 1
        if self._writer is not None and self._state == "active":
            self._write_gc_events()
            self._writer.write({"type": "row", **fields})

    def _write_gc_events(self) -> None:
        queue, writer = self._gc_unwritten, self._writer
        while queue and writer is not None:
            writer.write({"type": "gc", **queue.popleft()})

    def _write(self, kind: str, obj: dict[str, Any]) -> None:
        if self._writer is not None and self._state == "active":
            self._writer.write({"type": kind, **obj})

    def flush(self) -> None:
        """Resolve every pending deferred figure and store those rows (may wait for the device)."""
        with self._lock:
            while self._pending:
                self._drain(block=True)
            if self._writer is not None and self._state == "active":
                self._write_gc_events()

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
            self._write("marker", marker)

    # -- reading ----------------------------------------------------------------------------
    def report(self) -> Report:
        """A :class:`gnnmon.report.Report` over this run's rows."""
        return Report(self.records, manifest=self.manifest, gc_events=list(self.gc_events),
                      samples=self.samples, markers=self.markers)

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        return f"<gnnmon.Run {where} {self._state} rows={self.rows_written}>"


# -- the active run -----------------------------------------------------------------------------
DEFAULT_MAX_RECORDS = 10_000


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
) -> Run:
    """A new :class:`Run`; use it as ``with gnnmon.collect(path) as run:``.

    ``path``: JSON Lines file the rows stream to (None keeps them in memory only). ``config``: your
    settings, stored in the manifest. ``mode``: ``"w"`` overwrites, ``"x"`` refuses an existing file.
    ``sample``: seconds between utilisation samples (e.g. 0.5; None: no sampler thread).
    ``energy``: add ``energy_gpu_j``, ``energy_cpu_j``, ``energy_ram_j`` and ``co2_kg`` to every row;
    ``country`` (ISO alpha-3, e.g. ``"FRA"``) and ``region`` pick CodeCarbon's offline carbon
    intensity, or give ``carbon_intensity`` in g CO2eq/kWh.
    """
    if mode not in ("w", "x"):
        raise ValueError(f"mode must be 'w' (overwrite) or 'x' (refuse an existing file), got {mode!r}")
    return Run(path, config=config, max_records=max_records, mode=mode, sample=sample, energy=energy,
               country=country, region=region, carbon_intensity=carbon_intensity)
