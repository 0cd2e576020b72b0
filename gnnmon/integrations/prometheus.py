"""A Prometheus endpoint per process with each step's figures, labelled with the step's label, rank,
host and device: what a scrape of a training job can show that DCGM's (no step, no rank) cannot.

Usage::

    from gnnmon.integrations.prometheus import PrometheusSink
    with gnnmon.collect("runs/job.jsonl", sinks=[PrometheusSink(9180)]):
        ...

serves ``http://127.0.0.1:9180/metrics`` (under torchrun rank ``LOCAL_RANK`` serves ``9180 + LOCAL_RANK``).
What it serves, each name prefixed ``gnnmon_``, in base units (seconds, bytes, joules):

* gauges of the latest finished row of each label: every numeric figure of the row
  (``gnnmon_wall_seconds``, ``gnnmon_<figure>`` for a figure in bytes, ``gnnmon_phase_seconds{phase="forward"}``,
  ``gnnmon_layer_forward_seconds{layer="conv1"}``, ``gnnmon_num_nodes_by_type{type="paper"}`` beside
  ``gnnmon_num_nodes``; ``gnnmon_row_gc_pause_seconds``, apart from the process's counter), and the
  row's ``gnnmon_step_index``; fields of
  yours that hold numbers (markers, fields set on a row) as ``gnnmon_user_field{field="epoch"}``:
  a name of yours is a label's value, never a series' name, so none overwrites the sink's own
  (``run.mark("rows", 7)`` leaves ``gnnmon_rows_total`` counting rows);
* counters: ``gnnmon_rows_total``, ``gnnmon_failed_rows_total``, energy and emissions summed over
  the rows (``gnnmon_energy_gpu_joules_total``), ``gnnmon_gc_pauses_total`` and
  ``gnnmon_gc_pause_seconds_total`` from every collection the run saw;
* a histogram of the step's host time, ``gnnmon_step_seconds``;
* gauges of the newest sample of the machine when the run samples (``gnnmon_sampled_cpu_util_percent``).

Prometheus pulls: between two scrapes only the newest row of a label is seen in the gauges (the
counters and the histogram keep every row). The sink works on the run's writer thread; a scrape
reads a copy made under a lock. Nothing runs on the step's path. If the port cannot be bound the
run goes on without the endpoint (one warning; the file keeps every row). ``linger``: seconds
``close`` waits for one more scrape, so the job's last figures reach Prometheus before it exits.

Needs ``prometheus_client`` (``pip install prometheus-client`` or ``gnnmon[prometheus]``).
"""

from __future__ import annotations

import bisect
import os
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

from gnnmon.integrations.metrics import Metric, prometheus_metric, row_figures, sample_figures, yours
from gnnmon.record.sinks import Batch, register_sink

try:
    from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
    from prometheus_client.exposition import start_http_server
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("gnnmon.integrations.prometheus needs prometheus_client: pip install prometheus-client "
                      "(or 'gnnmon[prometheus]')") from exc

__all__ = ["PrometheusSink", "DEFAULT_PORT", "STEP_BUCKETS", "row_metric"]

DEFAULT_PORT = 9180
"""The base port; rank ``LOCAL_RANK`` of a torchrun job serves ``port + LOCAL_RANK``."""

PREFIX = "gnnmon_"

STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Upper bounds of ``gnnmon_step_seconds``'s buckets, in seconds (a launch-bound step to a minute)."""

USER_FIELD = "user_field"
"""The family of your fields that hold numbers: ``gnnmon_user_field{field="epoch", ...}``."""

OWN_SERIES = frozenset({"rows", "failed_rows", "step_index", "step_seconds", "gc_pauses", "gc_pause_seconds",
                        USER_FIELD})
"""The names (after ``gnnmon_``) of the sink's own series; a row's figure that would take one is
served with ``row_`` before it (``gc_pause_s`` -> ``gnnmon_row_gc_pause_seconds``)."""

ROW_LABELS = ("label", "rank", "host", "device")
PROCESS_LABELS = ("rank", "host")

Key = tuple[str, ...]


class _Series:
    """One metric family's values by label values (a gauge's newest, a counter's total)."""

    __slots__ = ("kind", "doc", "labels", "values")

    def __init__(self, kind: str, doc: str, labels: tuple[str, ...]) -> None:
        self.kind, self.doc, self.labels = kind, doc, labels
        self.values: dict[Key, float] = {}


def row_metric(field: str) -> Metric:
    """The series a row's figure is served as: its :func:`prometheus_metric`, with ``row_`` before
    a name that is one of the sink's own (:data:`OWN_SERIES`)."""
    metric = prometheus_metric(field)
    return metric._replace(name="row_" + metric.name) if metric.name in OWN_SERIES else metric


class PrometheusSink:
    """Serves the run's step figures on ``http://addr:port/metrics`` (see the module doc)."""

    def __init__(self, port: int | None = DEFAULT_PORT, *, addr: str = "127.0.0.1", linger: float = 0.0,
                 per_local_rank: bool = True) -> None:
        if port is not None and not (0 <= int(port) < 65536):
            raise ValueError(f"port must be between 0 and 65535 (0: any free port), got {port!r}")
        if linger < 0:
            raise ValueError(f"linger is seconds to wait for a last scrape, >= 0; got {linger!r}")
        self.base_port = DEFAULT_PORT if port is None else int(port)
        self.addr = addr
        self.linger = float(linger)
        self.per_local_rank = per_local_rank
        self.port: int | None = None  # the port served, once open
        self.error: str | None = None  # why the endpoint could not be served
        self.scrapes = 0
        self._lock = threading.Lock()
        self._series: dict[str, _Series] = {}
        self._hist: dict[Key, list[float]] = {}  # row labels -> bucket counts + [count, sum]
        self._process: Key = ("0", socket.gethostname())
        self._server: Any = None
        self._thread: threading.Thread | None = None

    # -- the sink ---------------------------------------------------------------------------
    def open(self, manifest: dict[str, Any]) -> None:
        dist = manifest.get("distributed") or {}
        rank = dist.get("rank")
        self._process = ("0" if rank is None else str(rank), str(manifest.get("host") or socket.gethostname()))
        port = self.base_port
        local = dist.get("local_rank", os.environ.get("LOCAL_RANK"))
        if self.per_local_rank and port and local is not None:
            port += int(local)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        try:
            self._server, self._thread = start_http_server(port, addr=self.addr, registry=registry)
        except OSError as exc:
            self.error = f"cannot serve on {self.addr}:{port}: {exc}"
            warnings.warn(f"gnnmon's Prometheus endpoint {self.error}; the run goes on without it (its file "
                          "keeps every row)", RuntimeWarning, 2)
            return
        self.port = int(self._server.server_port)

    def write(self, batch: Batch) -> None:
        rank, host = self._process
        with self._lock:
            for row in batch.rows:
                self._row(row, (str(row.get("label")), rank, host, str(row.get("device") or "")))
            for event in batch.gc_events:
                self._add("gc_pauses", "counter", "garbage collections seen", PROCESS_LABELS, self._process, 1.0)
                self._add("gc_pause_seconds", "counter", "time garbage collections paused the process",
                          PROCESS_LABELS, self._process, float(event.get("duration_s") or 0.0))
            for sample in batch.samples:
                for field, value in sample_figures(sample):
                    metric = prometheus_metric(field)
                    self._set("sampled_" + metric.name, "the newest sample of the machine", PROCESS_LABELS,
                              self._process, value)

    def close(self, end: dict[str, Any]) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        if self.linger > 0:
            seen, deadline = self.scrapes, time.monotonic() + self.linger
            while self.scrapes == seen and time.monotonic() < deadline:
                time.sleep(0.02)
        self._server = self._thread = None
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(5)

    # -- filling the series ----------------------------------------------------------------
    def _row(self, row: dict[str, Any], key: Key) -> None:
        failed = row.get("error") is not None
        self._add("rows", "counter", "rows finished", ROW_LABELS, key, 1.0)
        self._add("failed_rows", "counter", "rows whose call raised", ROW_LABELS, key, 1.0 if failed else 0.0)
        self._set("step_index", "the call number of the label's newest row", ROW_LABELS, key, row.get("index", 0))
        for field, value in row_figures(row):
            if yours(field):  # under a family of its own: never one of the sink's series
                self._set(USER_FIELD, "a field of yours (a marker, a field set on a row) on the label's newest row",
                          ROW_LABELS + ("field",), key + (field,), value)
                continue
            metric = row_metric(field)
            labels, values = self._labels(metric, key)
            if metric.accumulated:
                self._add(metric.name, "counter", f"{field} summed over the rows", labels, values, value)
            else:
                self._set(metric.name, f"{field} of the label's newest row", labels, values, value)
        wall = row.get("wall_s")
        if isinstance(wall, (int, float)) and not failed:
            counts = self._hist.get(key)
            if counts is None:
                counts = self._hist[key] = [0.0] * (len(STEP_BUCKETS) + 2)
            counts[bisect.bisect_left(STEP_BUCKETS, wall)] += 1
            counts[-1] += wall

    @staticmethod
    def _labels(metric: Metric, key: Key) -> tuple[tuple[str, ...], Key]:
        if metric.part is None:
            return ROW_LABELS, key
        return ROW_LABELS + (metric.part[0],), key + (metric.part[1],)

    def _family(self, name: str, kind: str, doc: str, labels: tuple[str, ...]) -> _Series:
        series = self._series.get(name)
        if series is None:
            series = self._series[name] = _Series(kind, doc, labels)
        return series

    def _set(self, name: str, doc: str, labels: tuple[str, ...], key: Key, value: float) -> None:
        self._family(name, "gauge", doc, labels).values[key] = float(value)

    def _add(self, name: str, kind: str, doc: str, labels: tuple[str, ...], key: Key, value: float) -> None:
        values = self._family(name, kind, doc, labels).values
        values[key] = values.get(key, 0.0) + value

    # -- the collector prometheus_client calls on each scrape ------------------------------
    def describe(self) -> list[Any]:
        return []  # the families are known only as rows arrive

    def collect(self) -> Iterator[Any]:
        with self._lock:
            self.scrapes += 1
            series = [(name, s.kind, s.doc, s.labels, dict(s.values)) for name, s in self._series.items()]
            hist = {key: list(counts) for key, counts in self._hist.items()}
        for name, kind, doc, labels, values in series:
            family = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(PREFIX + name, doc,
                                                                                     labels=labels)
            for key, value in values.items():
                family.add_metric(key, value)
            yield family
        if hist:
            histogram = HistogramMetricFamily(PREFIX + "step_seconds", "host time of the calls that returned",
                                           labels=ROW_LABELS)
            for key, counts in hist.items():
                running, buckets = 0.0, []
                for bound, count in zip((*map(str, STEP_BUCKETS), "+Inf"), counts[:-1], strict=True):
                    running += count
                    buckets.append((bound, running))
                histogram.add_metric(key, buckets, counts[-1])
            yield histogram

    def __repr__(self) -> str:
        return f"PrometheusSink({self.addr}:{self.port or self.base_port})"


register_sink("prometheus", PrometheusSink)
