"""The report over a run's rows: the door to what the report's modules compute (summaries, spikes,
energy, the memory model, the diagnosis) and write (markdown, DataFrames, the exports). Figures a
single module owns whole are that module's functions over the report's table: the step analysis,
dips and GC summary (:mod:`gnnmon.report.analysis`), the timeline figure
(:mod:`gnnmon.report.renderers.timeline_plot`), the Chrome trace as a dict
(:mod:`gnnmon.report.renderers.trace`)."""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gnnmon.data.column import sorted_numbers
from gnnmon.data.load import load
from gnnmon.data.result import RunResult
from gnnmon.data.table import Table, returned
from gnnmon.fields import is_number, row_key
from gnnmon.figures import ENERGY_FIELDS, MEM_PEAK_DELTA
from gnnmon.report import analysis  # the module: Report calls its functions by name
from gnnmon.report.compare.comparison import Comparison, run_name
from gnnmon.report.compare.cross_rank import cross_rank
from gnnmon.report.diagnosis.findings import diagnose, looked_for
from gnnmon.report.diagnosis.findings_markdown import diagnosis_lines, diagnosis_said
from gnnmon.report.energy_balance import result_balance
from gnnmon.report.energy_totals import energy_summary
from gnnmon.report.escape import md, no_surrogates
from gnnmon.report.exports import export
from gnnmon.report.frames import frame
from gnnmon.report.layer_table import layer_table
from gnnmon.report.markdown import MAX_TABLE, ending_lines, header_lines, render_markdown
from gnnmon.report.memory.model import MemoryModel, fit
from gnnmon.report.memory.oom import oom_report
from gnnmon.report.stats import describe

__all__ = ["MAX_TABLE", "Report"]

def _natural(value: Any) -> tuple[int, float, str]:
    """Sort key: numbers by value, then text, then None."""
    if is_number(value):
        return (0, float(value), "")
    return (2, 0.0, "") if value is None else (1, 0.0, str(value))


def _gc_events_by(markers: Sequence[Mapping[str, Any]], gc_events: Iterable[dict[str, Any]], by: str,
                  group_of_row: dict[str, Any]) -> dict[Any, list[dict[str, Any]]]:
    """The GC events per value of marker ``by``: an event in a row goes with the row, one
    between rows with the value marked last before it (None before the first)."""
    marks = sorted(((m["t_ns"], m.get("value")) for m in markers if m.get("kind") == by and "t_ns" in m),
                   key=lambda m: m[0])
    times = [t for t, _ in marks]
    out: dict[Any, list[dict[str, Any]]] = {}
    for event in gc_events:
        if event.get("row") in group_of_row:
            value = group_of_row[event["row"]]
        else:
            i = bisect.bisect_right(times, event.get("t_start_ns") or 0) - 1
            value = marks[i][1] if i >= 0 else None
        out.setdefault(value, []).append(event)
    return out


def _cpus(manifest: Mapping[str, Any] | None) -> dict[str, int | None]:
    """The recording machine's CPUs and those its process could run on, where the manifest says
    (the memory model and the OOM report bound the host's RSS with them)."""
    host = (manifest or {}).get("devices") or {}
    return {k: v if isinstance(v := host.get(key), int) else None
            for k, key in (("cpus", "cpu_count"), ("usable", "cpu_usable"))}


class Report:
    """Explains a run: ``Report(result)`` over a run's plain result (``run.result()``,
    ``gnnmon.load(path)``; :meth:`gnnmon.Run.report` makes one), ``Report.load(path)`` over a file,
    or ``Report(rows, manifest=..., gc_events=..., samples=..., markers=...)`` over rows given as
    dicts (made into a :class:`~gnnmon.data.result.RunResult`: the one thing a report and its
    exports read)."""

    def __init__(
        self,
        source: RunResult | Table | Iterable[Mapping[str, Any]],
        *,
        manifest: Mapping[str, Any] | None = None,
        gc_events: list[dict[str, Any]] | None = None,
        samples: list[dict[str, Any]] | None = None,
        markers: list[dict[str, Any]] | None = None,
    ) -> None:
        if not isinstance(source, RunResult):
            source = RunResult(source if isinstance(source, Table) else Table(source),
                               manifest=dict(manifest or {}), gc_events=gc_events or (),
                               samples=samples or (), markers=markers or ())
        elif manifest is not None or gc_events is not None or samples is not None or markers is not None:
            raise TypeError("Report(result) reads the result's own manifest, GC events, samples and markers")
        self.result = source
        self.table = source.table
        self.manifest = dict(source.manifest or {})
        self.gc_events = source.gc_events
        self.samples = source.samples
        self.markers = source.markers
        self._balance: dict[str, dict[str, Any]] | None = None

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, strict: bool = True, job: bool = True) -> Report:
        """The report over a run file (or a distributed job's files): ``gnnmon.load`` with the same
        options (see :func:`gnnmon.data.load.load`), then ``Report(result)``."""
        return cls(load(path, strict=strict, job=job))

    @property
    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts, in the order they finished, made on each read from the result's table
        (:meth:`Table.records`: changing them changes nothing the report or its exports read; for a
        long run, iterate ``table.rows()`` or use the report's tables instead)."""
        return self.table.records()

    def groups(self, by: str) -> dict[Any, Report]:
        """The report split by the value of marker ``by`` on each row (e.g. ``"config"``, set by
        ``run.mark("config", 128)``), in natural order (numbers by value: 32, 64, 128; rows
        without it last, under None). Each part keeps the GC events of its own rows, and those
        between rows made while its value was marked (the collection after a ``@gc_controlled``
        step, outside its row)."""
        if not isinstance(by, str) or not by:
            raise ValueError(f"by must be a marker's name, e.g. 'config'; got {by!r}")
        if not any(by in part.cols for part in self.table.parts.values()):
            kinds = sorted({m["kind"] for m in self.markers}) or sorted(
                {k for part in self.table.parts.values() for k in part.cols if k in {"epoch", "stage", "config"}})
            hint = (f"; collect(config=...) describes the run (its manifest), it does not mark rows: "
                    f"split a run with run.mark({by!r}, value)" if by in (self.manifest or {}).get("config", {})
                    or by == "config" else "")
            raise ValueError(f"no row carries {by!r}; the markers here: {', '.join(kinds) or 'none'}{hint}")
        parts = self.table.where(by)
        events = _gc_events_by(self.markers, self.gc_events, by,
                               {row_key(r): value for value, table in parts.items() for r in table.rows()})
        return {value: Report(parts[value], manifest=self.manifest, samples=self.samples, markers=self.markers,
                              gc_events=events.get(value, [])) for value in sorted(parts, key=_natural)}

    def summary(self, by: str | None = None) -> dict[Any, Any]:
        """``{label: {field: {count, mean, p50, p90, p99, max}}}`` over every numeric field;
        with ``by`` (a marker), ``{value: that}`` per value of the marker (see :meth:`groups`).

        ``count`` is the number of rows where the figure was measured (not None). Calls that
        raised are left out where some returned (an OOM's peak is not a step's): ``failures()``
        lists them.
        """
        if by is not None:
            return {value: part.summary() for value, part in self.groups(by).items()}
        # A figure None in one label still shows there, count 0; marker values and the loader's
        # setting (data_workers: the diagnosis reads it) are not figures.
        names = self.table.figures(skip={m["kind"] for m in self.markers if m.get("carry", True)} | {"data_workers"})
        out: dict[str, dict[str, dict[str, float]]] = {}
        for label, part in self.table.parts.items():
            cols, keep = part.cols, returned(part)
            out[label] = {name: describe(sorted_numbers(cols[name], keep)) for name in names if name in cols}
        return out

    def failures(self) -> list[dict[str, Any]]:
        """The calls that raised, in order: ``label``, ``index``, ``error`` (the exception's type)
        and ``parent``."""
        return [{"label": r["label"], "index": r["index"], "error": r["error"], "parent": r.get("parent")}
                for r in self.records if r.get("error")]

    def spikes(self, by: str | None = None, **options: Any) -> list[dict[str, Any]]:
        """Slow rows, each with ``label``, ``index``, ``cause``, ``excess_s`` and ``detail``;
        with ``by`` (a marker), judged within each value's rows (a slower configuration is not a
        spike of a faster one's) and each carrying ``by``'s value.

        Options (``k``, ``min_ratio``, ``warmup``, ``gc_share``, ``shape_tol``, ``min_rows``):
        see :func:`gnnmon.report.analysis.spikes`."""
        if by is not None:
            return [{**s, by: value} for value, part in self.groups(by).items() for s in part.spikes(**options)]
        options.setdefault("one_thread", self.result.one_thread)  # CPU time is then the step's work
        return analysis.spikes(self.table, **options)

    def energy(self) -> dict[str, Any]:
        """Energy totals per source (J, kWh, share, source labels), per label, per epoch and per
        graph, over top-level rows, and per rank for a distributed job ({} without
        ``collect(energy=True)``); ``balance``: per energy counter, rows + gaps between them +
        before/after them against the counter's own delta (a job's: ``rank<N>:<counter>``)."""
        if not any(k in part.cols for part in self.table.parts.values() for k in ENERGY_FIELDS):
            return {}
        out = energy_summary(self.table.rows())
        if out and self._balance is None:
            self._balance = result_balance(self.result)  # once: the page and the diagnosis read it again
        if out and self._balance:
            out["balance"] = self._balance
        return out

    def cross_rank(self, **options: Any) -> dict[str, Any]:
        """For a distributed job's rows (``gnnmon.load`` of its files): per step the slowest rank,
        its delay, the time the others waited and why; stragglers; per-rank summaries (see
        :func:`gnnmon.report.compare.cross_rank.cross_rank`). ``{}`` for a single process."""
        if not any("rank" in part.cols for part in self.table.parts.values()):
            return {}
        return cross_rank(self.records, self.manifest, **options)

    def memory_model(self, label: str | None = None, figure: str = MEM_PEAK_DELTA.name, *,
                     device: str | None = None, warmup: int = 2, terms: Sequence[str] | None = None,
                     confidence: float = 0.95) -> MemoryModel:
        """The peak memory of ``label``'s calls (None: the label with most rows that carry a batch
        shape) as ``const + a·num_nodes + b·num_edges (+ c·num_graphs)`` bytes, fitted on its rows
        after ``warmup`` calls, failures and outliers left out; on ``device``'s rows where they ran
        on more than one kind. ``figure``: the name of the peak above the call's start
        (:data:`~gnnmon.figures.MEM_PEAK_DELTA`, the default), of the absolute peak
        (:data:`~gnnmon.figures.MEM_PEAK`: what must fit in the device), or of the host's RSS ones; ``terms``:
        the shape fields to fit on (per type for a ``HeteroData`` batch: ``num_nodes__paper`` ...).
        The model's ``predict(num_nodes=..., num_edges=...)`` gives bytes and an upper bound at
        ``confidence``; ``summary()`` says it in words, or why it cannot be trusted. See
        :mod:`gnnmon.report.memory.model`."""
        pid = (self.manifest or {}).get("pid")
        return fit(self.table, label, figure, device=device, warmup=warmup, terms=terms, confidence=confidence,
                   pid=pid if isinstance(pid, int) else None, **_cpus(self.manifest))

    def layers(self, label: str | None = None) -> list[dict[str, Any]]:
        """Per label and watched layer (``gnnmon.watch_layers``): median forward and backward time,
        peaks, saved, message and output bytes, the layer's share of the layers' time, and advice in
        words (an edge-bound layer, the layer that takes the time, one worth checkpointing); see
        :mod:`gnnmon.report.layer_table`. ``[]`` where no layer was watched."""
        return layer_table(self.table, label)

    def oom(self) -> list[dict[str, Any]]:
        """The calls that ran out of memory: each one's batch shape (and against its label's median),
        the device's memory at the failure, the forecast for that batch, the largest batch that
        fit, the allocation-history snapshot, and ``words`` (see :mod:`gnnmon.report.memory.oom`)."""
        return oom_report(self.table, **_cpus(self.manifest))

    def export(self, name: str, out: Any) -> str:
        """Write the run with the export ``name`` (``trace``, ``tensorboard``, ``html``, ``csv``, or one
        a package registers; see :mod:`gnnmon.report.exports`) to ``out`` (``"-"``: the standard
        output, for an export that writes streams); returns what was written, in words."""
        return export(name, self.result, out)

    def diagnosis(self) -> list[dict[str, Any]]:
        """What the run's time and memory went to, ranked by the share at stake: each finding's
        ``kind``, ``label``, ``share`` (of the measured time, or of the memory: ``of``), ``at_stake``
        (seconds or bytes), ``words``, ``evidence`` (figure, value, unit, where it was measured) and
        ``next`` (``every_call``: a wait in every call, not an excess); [] when nothing stands out
        beyond the run's own noise. See
        :mod:`gnnmon.report.diagnosis.findings`."""
        return diagnose(self)

    def looked_for(self) -> list[dict[str, Any]]:
        """What the diagnosis looked for and did not find, each with what could hide in the run's
        noise (a leak: ``hidden_bytes_per_epoch``). See :func:`gnnmon.report.diagnosis.findings.looked_for`."""
        return looked_for(self)

    def compare(self, other: Report, *, max_slowdown: float | None = None,
                max_memory_growth: float | None = None) -> Comparison:
        """This run (the base) against ``other`` (the new one), one run a side: per label and phase,
        time per step and per 1,000 nodes and edges, peak memory and the memory models, GC,
        recompilations, data wait and energy per graph, each change with its bounds; the limits
        (shares: 0.05 is 5 %) decide each judged line. Several runs a side: ``Comparison(bases,
        news)``. See :mod:`gnnmon.report.compare.lines` and :mod:`gnnmon.report.compare.gate`."""
        return Comparison(self.result, other.result, run_name(self.manifest, "BASE"), run_name(other.manifest, "NEW"),
                          max_slowdown=max_slowdown, max_memory_growth=max_memory_growth)

    def markdown(self, by: str | None = None) -> str:
        """The report as markdown: one table of figures per label (bytes in MiB, seconds in ms),
        then the step analysis, GC and spikes where the rows have times, then energy; with ``by``
        (a marker), all of it once per value of the marker, in natural order."""
        if by is None:
            return no_surrogates(render_markdown(self))
        text = (ending_lines(self.result) + header_lines(self.manifest)
                + diagnosis_lines(**diagnosis_said(self)))
        for value, part in self.groups(by).items():
            text += [f"## {md(by)} = {md(value)} ({len(part.table)} rows)", "", render_markdown(part, header=False)]
        return no_surrogates("\n".join(text))

    def frame(self, table: str = "rows") -> Any:
        """Any table of the report as a pandas DataFrame: ``rows`` (one row per call), ``summary``,
        ``spikes``, ``dips``, ``analysis`` (one row per label; percentiles as ``raw_p50`` …),
        ``energy`` (one row per figure: total, share, sources), ``energy_by_label``,
        ``energy_by_epoch``, ``gc`` (one row per collection) or ``cross_rank`` (one row per step
        matched across ranks); see :func:`gnnmon.report.frames.frame`."""
        return frame(self, table)

    def _repr_markdown_(self) -> str:
        """How a notebook shows a report: its markdown."""
        return self.markdown()

    def __repr__(self) -> str:
        labels = self.table.labels()
        return (f"<gnnmon Report: {len(self.table)} rows, labels {labels[:5]}"
                f"{' …' if len(labels) > 5 else ''}>")
