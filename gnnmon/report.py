"""The report over a run's rows: per-label summaries as a dict, markdown text or DataFrames."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from gnnmon import analysis
from gnnmon.accounting import energy_markdown, energy_summary
from gnnmon.stats import STATS, describe

MAX_TABLE = 20
"""Rows shown in the markdown spike and short-step tables (all are in ``spikes()`` / ``dips()``)."""

# Numeric fields that identify a row rather than measure it: never summarised.
NOT_FIGURES = frozenset({"index", "t_start_ns", "t_end_ns"})


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def figure_names(records: Iterable[Mapping[str, Any]], skip: Iterable[str] = ()) -> list[str]:
    """Numeric field names across rows, in first-seen order (identity fields and ``skip`` left out)."""
    skipped = NOT_FIGURES.union(skip)
    seen: dict[str, None] = {}
    for row in records:
        for k, v in row.items():
            if k not in seen and k not in skipped and _is_number(v):
                seen[k] = None
    return list(seen)


def _unit(field: str) -> tuple[str, float]:
    if field.endswith("_bytes"):
        return "MiB", 1 / 2**20
    if field.endswith("_s"):
        return "ms", 1e3
    return "", 1.0


def _fmt(v: float | None, scale: float) -> str:
    if v is None:
        return "–"
    x = v * scale
    if x == int(x) and abs(x) < 1e12:
        return f"{int(x):d}"
    return f"{x:.3f}" if abs(x) < 1000 else f"{x:,.1f}"


class Report:
    """Explains a run's rows. Built by :meth:`gnnmon.Run.report`."""

    def __init__(
        self,
        records: list[dict[str, Any]],
        *,
        manifest: Mapping[str, Any] | None = None,
        gc_events: list[dict[str, Any]] | None = None,
        samples: list[dict[str, Any]] | None = None,
        markers: list[dict[str, Any]] | None = None,
    ) -> None:
        self.records = records
        self.manifest = dict(manifest or {})
        self.gc_events = gc_events or []
        self.samples = samples or []
        self.markers = markers or []

    def labels(self) -> list[str]:
        """Row labels in first-seen order."""
        return list(dict.fromkeys(r["label"] for r in self.records))

    def summary(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{label: {field: {count, mean, p50, p90, p99, max}}}`` over every numeric field.

        ``count`` is the number of rows where the figure was measured (not None).
        """
        by_label: dict[str, list[Mapping[str, Any]]] = {}
        for row in self.records:
            by_label.setdefault(row["label"], []).append(row)
        # A figure None in one label still shows there, count 0; marker values are not figures.
        names = figure_names(self.records, skip={m["kind"] for m in self.markers if m.get("carry", True)})
        out: dict[str, dict[str, dict[str, float]]] = {}
        for label, rows in by_label.items():
            present = {k for r in rows for k in r}
            out[label] = {
                name: describe([r[name] for r in rows if _is_number(r.get(name))])
                for name in names
                if name in present
            }
        return out

    def spikes(self, **options: Any) -> list[dict[str, Any]]:
        """Slow rows, each with ``label``, ``index``, ``cause``, ``excess_s`` and ``detail``.

        Options (``k``, ``min_ratio``, ``warmup``, ``gc_share``, ``shape_tol``, ``min_rows``):
        see :func:`gnnmon.analysis.spikes`."""
        return analysis.spikes(self.records, **options)

    def dips(self, **options: Any) -> list[dict[str, Any]]:
        """Rows far faster than usual (e.g. partial last batches), with a cause each."""
        return analysis.dips(self.records, **options)

    def analysis(self, warmup: int = 2) -> dict[str, dict[str, Any]]:
        """Per label: time per node/edge, phase shares and residual, GC cost, raw vs clean
        percentiles (see :func:`gnnmon.analysis.step_analysis`)."""
        return analysis.step_analysis(self.records, warmup=warmup)

    def energy(self) -> dict[str, Any]:
        """Energy totals per source (J, kWh, share, source labels), per label, per epoch and per
        graph, over top-level rows ({} without ``collect(energy=True)``)."""
        return energy_summary(self.records)

    def plot_timeline(self, path: Any = None, **options: Any) -> Any:
        """Utilisation samples over time with rows and GC events under them (a matplotlib
        Figure; saved as PNG if ``path`` is given)."""
        from gnnmon.timeline import plot_timeline

        return plot_timeline(self.records, self.samples, self.gc_events, path, **options)

    def gc_summary(self) -> dict[str, Any]:
        """Collections per generation and reason, total and longest pause."""
        return analysis.gc_summary(self.gc_events)

    def markdown(self) -> str:
        """The report as markdown: one table of figures per label (bytes in MiB, seconds in ms),
        then the step analysis, GC and spikes where the rows have times."""
        lines: list[str] = []
        m = self.manifest
        if m:
            lines.append(
                f"gnnmon {m.get('gnnmon')} · torch {m.get('torch')} · "
                f"PyG {m.get('torch_geometric')} · host {m.get('host')} · {m.get('start_time')}"
            )
            lines.append("")
        summary = self.summary()
        if not summary:
            return "\n".join(lines + ["(no rows recorded)"]) + "\n"
        for label, figures in summary.items():
            rows = [r for r in self.records if r["label"] == label]
            errors = sum(1 for r in rows if r.get("error"))
            backends = sorted({str(r.get("device")) for r in rows})
            lines.append(f"### {label} — {len(rows)} call(s) on {', '.join(backends)}"
                         + (f", {errors} raised" if errors else ""))
            lines.append("")
            lines.append("| figure | unit | " + " | ".join(STATS) + " |")
            lines.append("| --- | --- | " + " | ".join("---:" for _ in STATS) + " |")
            for name, stats in figures.items():
                unit, scale = _unit(name)
                cells = [str(stats["count"])] + [
                    _fmt(stats.get(s), scale) for s in STATS[1:]
                ]
                lines.append(f"| {name} | {unit} | " + " | ".join(cells) + " |")
            notes = sorted({n for r in rows for n in (r.get("notes") or [])})
            if notes:
                lines.append("")
                lines.extend(f"- note: {n}" for n in notes)
            lines.append("")
        lines.extend(self._analysis_markdown())
        lines.extend(energy_markdown(self.energy()))
        return "\n".join(lines)

    def _analysis_markdown(self) -> list[str]:
        lines: list[str] = []
        steps = self.analysis()
        if any(info["rows"] >= 2 for info in steps.values()):
            lines += ["### Step analysis (after 2 warm-up calls per label; ms)", "",
                      "| label | rows | p50 | p90 | p99 | p50 no GC | p90 no GC | p99 no GC | GC share "
                      "| µs / node | ns / edge |",
                      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
            for label, i in steps.items():
                raw, clean = i["raw"], i["clean"]
                share = "–" if i["gc_share"] is None else f"{100 * i['gc_share']:.1f} %"
                node = "–" if i["per_node_s"] is None else f"{i['per_node_s'] * 1e6:.3f}"
                edge = "–" if i["per_edge_s"] is None else f"{i['per_edge_s'] * 1e9:.2f}"
                lines.append(
                    f"| {label} | {i['rows']} | " + " | ".join(
                        f"{d[q] * 1e3:.2f}" for d in (raw, clean) for q in ("p50", "p90", "p99"))
                    + f" | {share} | {node} | {edge} |")
            lines.append("")
            shares = {label: i["phase_share"] for label, i in steps.items() if "phase_share" in i}
            if shares:
                lines += ["Share of step time per phase (residual: what no phase covered):", ""]
                for label, share in shares.items():
                    lines.append(f"- {label}: " + ", ".join(
                        f"{name} {100 * v:.1f} %" for name, v in share.items()))
                lines.append("")
        if self.gc_events:
            g = self.gc_summary()
            gens = ", ".join(f"gen {gen}: {d['count']} ({d['pause_s'] * 1e3:.1f} ms, longest "
                             f"{d['max_s'] * 1e3:.1f} ms)" for gen, d in g["by_generation"].items()
                             if d["count"])
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(g["by_reason"].items()))
            lines += ["### Garbage collection", "",
                      f"{g['collections']} collection(s), {g['pause_total_s'] * 1e3:.1f} ms in all; "
                      f"{gens}. By reason: {reasons}; {g['in_rows']} inside a row.", ""]
        spikes = self.spikes()
        if any(info["rows"] >= 2 for info in steps.values()):
            lines += [f"### Spikes ({len(spikes)})", ""]
            if spikes:
                causes: dict[str, int] = {}
                for sp in spikes:
                    causes[sp["cause"]] = causes.get(sp["cause"], 0) + 1
                lines += ["By cause: " + ", ".join(f"{c} {n}" for c, n in sorted(causes.items()))
                          + (f"; the {MAX_TABLE} with the largest excess:" if len(spikes) > MAX_TABLE else ""),
                          ""]
                lines += ["| label | index | time ms | median ms | excess ms | cause | detail |",
                          "| --- | ---: | ---: | ---: | ---: | --- | --- |"]
                shown = sorted(spikes, key=lambda sp: -sp["excess_s"])[:MAX_TABLE]
                shown.sort(key=lambda sp: (sp["label"], sp["index"]))
                for sp in shown:
                    lines.append(
                        f"| {sp['label']} | {sp['index']} | {sp['time_s'] * 1e3:.2f} | "
                        f"{sp['median_s'] * 1e3:.2f} | {sp['excess_s'] * 1e3:.2f} | {sp['cause']} | "
                        f"{sp['detail']} |")
            else:
                lines.append("No row exceeded its label's threshold.")
            lines.append("")
            dips = self.dips()
            if dips:
                lines += [f"### Short steps ({len(dips)})", "",
                          "| label | index | time ms | median ms | cause | detail |",
                          "| --- | ---: | ---: | ---: | --- | --- |"]
                lines += [f"| {d['label']} | {d['index']} | {d['time_s'] * 1e3:.2f} | "
                          f"{d['median_s'] * 1e3:.2f} | {d['cause']} | {d['detail']} |"
                          for d in dips[:MAX_TABLE]]
                if len(dips) > MAX_TABLE:
                    lines.append(f"| … {len(dips) - MAX_TABLE} more | | | | | |")
                lines.append("")
        return lines

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame (one row per call)."""
        pd = _pandas()
        return pd.DataFrame.from_records(self.records)

    def summary_frame(self) -> Any:
        """The summary as a pandas DataFrame indexed by (label, figure), columns count … max."""
        pd = _pandas()
        rows = [
            {"label": label, "figure": name, **stats}
            for label, figures in self.summary().items()
            for name, stats in figures.items()
        ]
        frame = pd.DataFrame.from_records(rows, columns=["label", "figure", *STATS])
        return frame.set_index(["label", "figure"])


def _pandas() -> Any:
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Report.to_frame() needs pandas: pip install 'gnnmon[report]' (or pandas)"
        ) from exc
    return pd
