"""A run's options, declared once: :func:`gnnmon.collect`, :class:`gnnmon.Run` and the Lightning
callback all take them as keywords and check them here (a frozen :class:`Options`)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from gnnmon.data.format import dumps
from gnnmon.devices.sched import AVAILABLE as SCHED_AVAILABLE
from gnnmon.errors import is_positive_number

WINDOW = 10_000
"""Rows (and as many GC events and samples) a run keeps in memory by default when they also leave
through its file or a sink: the window that ``run.records`` shows. A run with neither keeps all."""

FLUSH_INTERVAL = 0.05
"""Seconds between two drains of a run's writer thread."""

AUTO = "auto"


@dataclasses.dataclass(frozen=True)
class Options:
    """What a run records and how. Every field is a keyword of :func:`gnnmon.collect`.

    ``config``: your settings, stored in the manifest (plain JSON values). ``max_records``: rows
    kept in memory (the newest; the file and sinks get all): ``"auto"`` keeps :data:`WINDOW`
    when rows also go to a file or a sink, else all; ``None`` keeps all. ``mode``: ``"w"``
    overwrites the file, ``"x"`` refuses an existing one. ``sample``: seconds between utilisation
    samples (None: no sampler). ``energy``: energy and CO2 figures per row (samples every 0.5 s
    unless ``sample`` says otherwise); ``country`` (ISO alpha-3), ``region`` or
    ``carbon_intensity`` (g CO2eq/kWh) pick the carbon intensity; ``cpu_power_w`` and
    ``ram_power_w`` (W) replace CodeCarbon's guesses. ``flush_interval``: seconds between two
    drains of the writer thread (a kill loses at most about this much). ``sampler``: ``"process"``
    or ``"thread"``. ``distributed``: measure the clock offset between ranks with collectives.
    ``memory_history``: keep PyTorch's CUDA allocation history (its newest N events; a private
    PyTorch API, see :mod:`gnnmon.record.memory_history`) and dump it at the run's first out-of-memory
    error, next to the run's file (None: off). ``sched``: each top-level row's thread CPU time,
    context switches and run-queue time, in it and since the thread's previous row (``thread_*``
    fields; Linux; 22-29 µs a row on the 2-core VM, ``benchmarks/sched_cost.py``): ``"auto"``
    records them in a distributed job, where the cross-rank report tells a rank the OS descheduled
    from one that waited or computed. ``compress``: the file as a gzip stream, flushed at every
    batch the writer hands it (``zcat``, jq, pandas, polars and DuckDB read it as it is; a kill
    loses at most the batch being written): None compresses a path ending in ``.gz``.
    """

    config: Mapping[str, Any] | None = None
    max_records: int | str | None = AUTO
    mode: str = "w"
    sample: float | None = None
    energy: bool = False
    country: str | None = None
    region: str | None = None
    carbon_intensity: float | None = None
    cpu_power_w: float | None = None
    ram_power_w: float | None = None
    flush_interval: float = FLUSH_INTERVAL
    sampler: str = "process"
    distributed: bool = True
    memory_history: int | None = None
    sched: bool | str = AUTO
    compress: bool | None = None

    def __post_init__(self) -> None:
        config = self.config
        if config is not None:
            if not isinstance(config, Mapping):
                raise TypeError(f"config must be a mapping, not {type(config).__name__}")
            try:
                dumps(dict(config))
            except (ValueError, TypeError, RecursionError) as exc:  # e.g. a dict that holds itself
                raise ValueError(f"config cannot be stored as JSON ({type(exc).__name__}: {exc}); give plain "
                                 "values (numbers, strings, lists, dicts)") from None
            object.__setattr__(self, "config", dict(config))
        m = self.max_records
        if m != AUTO and m is not None and (not isinstance(m, int) or isinstance(m, bool) or m < 1):
            raise ValueError(f"max_records must be a positive int, None (keep all) or 'auto', got {m!r}")
        if self.mode not in ("w", "x"):
            raise ValueError(f"mode must be 'w' (overwrite) or 'x' (refuse an existing file), got {self.mode!r}")
        if self.sample is not None and not is_positive_number(self.sample):
            raise ValueError(f"sample must be a finite interval in seconds > 0 (e.g. 0.5) or None, "
                             f"got {self.sample!r}")
        if not isinstance(self.energy, bool):
            raise TypeError(f"energy must be True or False, not {type(self.energy).__name__}")
        given = [n for n in ("country", "region", "carbon_intensity", "cpu_power_w", "ram_power_w")
                 if getattr(self, n) is not None]
        if given and not self.energy:
            it = "it" if len(given) == 1 else "them"
            raise ValueError(f"{', '.join(given)} only shape the energy figures: pass energy=True with {it}, "
                             f"or leave {it} out")
        for name in ("cpu_power_w", "ram_power_w"):
            watts = getattr(self, name)
            if watts is not None and not is_positive_number(watts):
                raise ValueError(f"{name} must be a power in watts > 0 (e.g. 65), got {watts!r}")
        c = self.country
        if c is not None and (not isinstance(c, str) or len(c) != 3 or not c.isalpha()):
            raise ValueError(f"country must be an ISO 3166 alpha-3 code such as 'FRA', got {c!r}")
        if self.sampler not in ("process", "thread"):
            raise ValueError(f"sampler must be 'process' (its own process) or 'thread', got {self.sampler!r}")
        if not is_positive_number(self.flush_interval):
            raise ValueError(f"flush_interval must be a finite number of seconds > 0, got {self.flush_interval!r}")
        h = self.memory_history
        if h is not None and (not isinstance(h, int) or isinstance(h, bool) or h < 1):
            raise ValueError(f"memory_history must be a positive number of allocation events (e.g. 100000) "
                             f"or None, got {h!r}")
        if self.sched != AUTO and not isinstance(self.sched, bool):
            raise TypeError(f"sched must be True, False or 'auto' (on in a distributed job), got {self.sched!r}")
        if not isinstance(self.distributed, bool):
            raise TypeError(f"distributed must be True or False, not {type(self.distributed).__name__}")
        if self.compress is not None and not isinstance(self.compress, bool):
            raise TypeError(f"compress must be True (a gzip stream), False (plain lines) or None (by the path: "
                            f"run.jsonl.gz is compressed), got {self.compress!r}")

    @classmethod
    def of(cls, where: str, options: Mapping[str, Any]) -> Options:
        """Options from keywords, naming an unknown one and the known ones."""
        unknown = sorted(set(options) - NAMES)
        if unknown:
            raise TypeError(f"{where} got unknown option(s) {', '.join(map(repr, unknown))}; "
                            f"the options: {', '.join(sorted(NAMES))}")
        return cls(**options)

    def compressed(self, path: str | os.PathLike[str]) -> bool:
        """Whether the run's file at ``path`` is written as a gzip stream (see ``compress``)."""
        return os.fspath(path).endswith(".gz") if self.compress is None else self.compress

    def window(self, streams: bool) -> int | None:
        """Rows kept in memory: ``max_records``, resolved for a run whose rows do (``streams``)
        or do not also leave through a file or sink."""
        if self.max_records == AUTO:
            return WINDOW if streams else None
        return self.max_records  # type: ignore[return-value]

    def sched_on(self, distributed: bool) -> bool:
        """Whether rows record their thread's scheduler counters: ``sched``, resolved for a run
        that is (``distributed``) or is not one rank of a distributed job; never where the OS has no
        per-thread usage (:data:`gnnmon.devices.sched.AVAILABLE`)."""
        return SCHED_AVAILABLE and (distributed if self.sched == AUTO else bool(self.sched))

    @property
    def sample_interval(self) -> float | None:
        """Seconds between samples: ``sample``, else 0.5 s with ``energy`` (energy is read from
        counters on the timeline), else None."""
        if self.sample is not None:
            return float(self.sample)
        return 0.5 if self.energy else None

    def energy_options(self) -> dict[str, Any] | None:
        """The keywords of :class:`gnnmon.timeline.energy_sources.EnergySources` (None without energy)."""
        if not self.energy:
            return None
        return {"country": self.country, "region": self.region,
                "carbon_intensity_g_per_kwh": self.carbon_intensity,
                "cpu_power_w": self.cpu_power_w, "ram_power_w": self.ram_power_w}


NAMES = frozenset(f.name for f in dataclasses.fields(Options))
