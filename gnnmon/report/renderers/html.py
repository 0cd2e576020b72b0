"""A run as one self-contained HTML page that works offline: the run's header, its diagnosis (the
findings first, then the time between the measured calls, what was looked for and not found and
what was not looked for, as the markdown report says them; also in the page's data as
``diagnosis``, ``between``, ``looked_for`` and ``unjudged``), a zoomable timeline
(rows, phases, GC pauses, markers and sampled utilisation, memory and power, per rank), each
label's peak memory per call with the memory model's forecast, and the whole markdown report
(per-label tables, step analysis, spikes and dips with their causes, layers, the cross-rank view,
energy) as HTML.

No CDN and no plotting library: the page draws SVG with its own script (``page.js``, 11.2 KB,
and ``page.css``, inlined). Every string of the run is data on the page: HTML-escaped where it is
text or an attribute, in the JSON the script reads with ``<``, ``>``, ``&``, U+2028 and U+2029 as
``\\u`` escapes (:func:`script_json`), and put into the SVG and the tip as text nodes by the script.
The timeline holds one mark per row up to :data:`MAX_ROW_MARKS`; a bigger run is cut into that
many runs of consecutive rows and the longest row of each is drawn (so spikes stay visible), and
its phases with it; GC pauses likewise, up to :data:`MAX_GC_MARKS`, and samples evenly up to
:data:`MAX_SAMPLES`. The page says when it shows fewer than the run has.
"""

from __future__ import annotations

import html
import json
import math
import os
from importlib import resources
from typing import Any

from gnnmon.data.result import RunResult
from gnnmon.figures import BYTES, MEM_PEAK, RSS_PEAK
from gnnmon.report import renderers  # the package: its page.css and page.js
from gnnmon.report.diagnosis.findings_markdown import diagnosis_html, diagnosis_said
from gnnmon.report.escape import no_surrogates, strict_json
from gnnmon.report.exports import register_export
from gnnmon.report.markdown import render_markdown
from gnnmon.report.md_html import markdown_html
from gnnmon.report.renderers.trace import chrome_trace
from gnnmon.report.report import Report

MAX_ROW_MARKS = 20_000
"""Row marks on the timeline at most (see the module doc)."""

MAX_GC_MARKS = 20_000
MAX_SAMPLES = 5_000
"""Sample points per counter track at most."""

MAX_MEMORY_POINTS = 5_000
"""Points per label's memory line at most (every k-th call beyond)."""

MEMORY_FIGURES = (MEM_PEAK.name, RSS_PEAK.name)
"""The figure a label's memory line draws: the first its rows hold."""


def thin(events: list[dict[str, Any]], limit: int) -> tuple[list[dict[str, Any]], int]:
    """At most ``limit`` of ``events`` (in time order): the longest of each run of
    ``ceil(n / limit)`` consecutive ones; returns them and that run length (1: all kept)."""
    n = len(events)
    if n <= limit:
        return events, 1
    every = math.ceil(n / limit)
    ordered = sorted(events, key=lambda e: e["ts"])
    kept = [max(ordered[i: i + every], key=lambda e: e.get("dur", 0)) for i in range(0, n, every)]
    return kept, every


def timeline_events(report: RunResult) -> tuple[dict[str, Any], list[str]]:
    """The Chrome trace of the run, thinned for the page; and what was left out, in words."""
    trace = chrome_trace(report)
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for event in trace["traceEvents"]:
        by_cat.setdefault(event.get("cat", "meta"), []).append(event)
    notes = []
    rows, every = thin(by_cat.get("row", []), MAX_ROW_MARKS)
    if every > 1:
        keys = {f"{e['name']}#{e['args'].get('index')}" for e in rows}
        by_cat["phase"] = [e for e in by_cat.get("phase", []) if e["args"].get("row") in keys]
        notes.append(f"{len(rows):,} of {len(by_cat['row']):,} rows drawn: the longest of every {every} in a row")
        by_cat["row"] = rows
    gcs, every = thin(by_cat.get("gc", []), MAX_GC_MARKS)
    if every > 1:
        notes.append(f"{len(gcs):,} of {len(by_cat['gc']):,} GC pauses drawn: the longest of every {every}")
        by_cat["gc"] = gcs
    samples = by_cat.get("sample", [])
    tracks = len({(e["pid"], e["name"]) for e in samples}) or 1
    if len(samples) > MAX_SAMPLES * tracks:
        step = math.ceil(len(samples) / (MAX_SAMPLES * tracks))
        by_cat["sample"] = samples[::step]
        notes.append(f"every {step}th sample drawn")
    trace["traceEvents"] = [e for events in by_cat.values() for e in events]
    return trace, notes


def memory_lines(report: Report) -> dict[str, dict[str, Any]]:
    """Per label: call numbers, the peak (MiB) of each, and the memory model's forecast for each
    call's batch where the model of that figure can be trusted (``no_forecast``: why not, otherwise)."""
    out: dict[str, dict[str, Any]] = {}
    by_label: dict[str, list[dict[str, Any]]] = {}
    for row in report.records:
        by_label.setdefault(str(row["label"]), []).append(row)
    for label, rows in by_label.items():
        figure = next((f for f in MEMORY_FIGURES if any(isinstance(r.get(f), (int, float)) for r in rows)), None)
        if figure is None:
            continue
        rows = sorted(rows, key=lambda r: r["index"])[:: math.ceil(len(rows) / MAX_MEMORY_POINTS)]
        values = [r[figure] * BYTES.factor if isinstance(r.get(figure), (int, float)) else None for r in rows]
        line: dict[str, Any] = {"figure": figure, "index": [r["index"] for r in rows], "values": values,
                                "forecast": None, "no_forecast": None}
        try:
            model = report.memory_model(label, figure)
        except ValueError as exc:
            model, line["no_forecast"] = None, str(exc)
        if model is not None and not model.trusted:
            line["no_forecast"] = "; ".join(model.problems)
        if model is not None and model.trusted:
            forecast: list[float | None] = []
            for r in rows:
                shape: dict[str, Any] = {t: r.get(t) for t in model.terms}
                ok = all(isinstance(v, (int, float)) for v in shape.values())
                forecast.append(model.predict(**shape).bytes * BYTES.factor if ok else None)
            line["forecast"] = forecast
            line["model"] = model.summary()
        out[label] = line
    return out


def _devices(records: list[dict[str, Any]]) -> str | None:
    """The rows' devices, and how many rows ran on none (a row whose device could not be measured,
    such as ``device='cuda'`` without CUDA, keeps ``device`` None: never a device named "None");
    None where no row was read."""
    named = ", ".join(sorted({str(r["device"]) for r in records if r.get("device") is not None}))
    nowhere = sum(r.get("device") is None for r in records)
    if not nowhere:
        return named or None
    rows = f"{nowhere:,} row{'s' if nowhere != 1 else ''} on no device"
    return f"{named} ({rows})" if named else rows


def _header(report: RunResult) -> str:
    manifest = report.manifest or {}
    ranks = manifest.get("ranks") or []
    facts = [("host", manifest.get("host")), ("started", manifest.get("start_time")),
             ("gnnmon", manifest.get("gnnmon")), ("torch", manifest.get("torch")),
             ("PyG", manifest.get("torch_geometric")), ("python", manifest.get("python")),
             ("devices", _devices(report.records)),
             ("ranks", len(ranks) or None), ("rows", f"{len(report.records):,}")]
    items = "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(str(v))}</li>" for k, v in facts if v is not None)
    config = manifest.get("config") or {}
    table = "".join(f"<tr><td>{html.escape(str(k))}</td><td><code>{html.escape(json.dumps(v, default=str))}</code>"
                    "</td></tr>" for k, v in config.items())
    return f"<ul class=\"meta\">{items}</ul>" + (f"<h3>Config</h3><table>{table}</table>" if table else "")


def render(report: Report, title: str = "gnnmon run") -> str:
    """The page as one HTML string (see the module doc)."""
    trace, notes = timeline_events(report.result)
    ranks = len({e["pid"] for e in trace["traceEvents"] if e.get("ph") != "M"})
    memory = memory_lines(report)
    said = diagnosis_said(report)
    data = {"trace": trace, "memory": memory, "ranks": ranks, "diagnosis": said["findings"],
            "between": said["between"], "looked_for": said["looked_for"], "unjudged": said["unjudged"]}
    payload = script_json(data)
    asset = resources.files(renderers)
    script, style = (asset / "page.js").read_text("utf-8"), (asset / "page.css").read_text("utf-8")
    models = "".join(f"<p>{html.escape(label)}: {html.escape(line['model'])}</p>" if line.get("model") else
                     f"<p>{html.escape(label)}: no forecast line: {html.escape(line['no_forecast'] or 'no model')}</p>"
                     for label, line in memory.items())
    thinned = "".join(f"<p class=\"meta\">{html.escape(n)}.</p>" for n in notes)
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>\n<h1>{html.escape(title)}</h1>\n{_header(report.result)}\n"
            f"<h2>Diagnosis</h2>\n{diagnosis_html(**said)}\n"
            f"<h2>Timeline</h2>{thinned}<div id=\"timeline\"></div>\n"
            f"<h2>Memory per call</h2>{models}<div id=\"memory\"></div>\n"
            f"<h2>Report</h2>\n{markdown_html(no_surrogates(render_markdown(report, diagnosis=False)))}\n"
            "<div id=\"tip\"></div>\n"
            f"<script type=\"application/json\" id=\"gnnmon-data\">{payload}</script>\n"
            f"<script>{script}</script>\n</body></html>\n")
    return no_surrogates(page)  # a lone one (text from the OS) as its escape: UTF-8 holds none


_IN_SCRIPT = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                            "\u2029": "\\u2029"})


def script_json(data: Any) -> str:
    """``data`` as JSON to embed in a ``<script>`` element: every ``<``, ``>`` and ``&`` (which
    only a string can hold) written as its ``\\u`` escape, so that no text in it (``</script>``,
    ``<!--``) can end or change the element; U+2028 and U+2029 too (line ends to older JavaScript)."""
    return strict_json(data).translate(_IN_SCRIPT)


class HtmlExport:
    """The ``html`` export: one self-contained page."""

    name = "html"
    what = ("one self-contained page to open in a browser, offline: header, zoomable timeline, memory per call "
            "with its forecast, and the whole report")

    def write(self, result: RunResult, out: str | os.PathLike[str]) -> str:
        """Write ``result``'s page to ``out`` (an .html file); says what was written."""
        manifest = result.manifest or {}
        file = (manifest.get("distributed") or {}).get("job_path") or manifest.get("file")
        page = render(Report(result), f"gnnmon: {os.path.basename(file)}" if file else "gnnmon run")
        with open(out, "w", encoding="utf-8") as f:
            f.write(page)
        return f"a page of {len(result.table):,} rows ({len(page) / 1024:.0f} KiB)"


register_export(HtmlExport())
