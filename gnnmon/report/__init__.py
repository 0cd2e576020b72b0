"""Explaining a run from its plain data (:mod:`gnnmon.data`): summaries, spikes and dips, step
analysis, GC and energy accounting, markdown, DataFrames and figures. Imports no torch and no PyG.

The ground floor holds :class:`Report`, the statistics, loops and text helpers every wing reads, and
the export registry (:mod:`gnnmon.report.exports`); the wings: ``diagnosis/`` (findings),
``compare/`` (runs against runs), ``memory/`` (the memory model) and ``renderers/`` (the exports,
each registering itself as it is imported).

May import: ``gnnmon.data`` and the root modules (it reads rows as dicts; it never measures)."""

from gnnmon.data.result import REPORTERS
from gnnmon.report import moved
from gnnmon.report.compare import comparison, cross_rank
from gnnmon.report.compare import text as compare_text
from gnnmon.report.compare.comparison import Comparison
from gnnmon.report.diagnosis import creep, gc_finding, input_finding, memory_findings, time_findings
from gnnmon.report.diagnosis import text as diagnosis_text
from gnnmon.report.memory import extrapolation, least_squares, model, oom
from gnnmon.report.renderers import csv_export, html, tensorboard, timeline_plot, trace
from gnnmon.report.report import Report

moved.install({f"gnnmon.report.{old}": module for old, module in {
    "comparison": comparison, "compare_text": compare_text, "cross_rank": cross_rank,
    "diagnosis_text": diagnosis_text, "creep": creep, "gc_finding": gc_finding,
    "input_finding": input_finding, "memory_findings": memory_findings, "time_findings": time_findings,
    "memory_model": model, "least_squares": least_squares, "extrapolation": extrapolation, "oom_report": oom,
    "csv_export": csv_export, "html": html, "tensorboard": tensorboard, "timeline_plot": timeline_plot,
    "trace": trace,
}.items()})  # the built-in exports (renderers) registered themselves as they were imported
REPORTERS.append(Report)  # what the deprecated RunResult.report() makes

__all__ = ["Comparison", "Report"]
