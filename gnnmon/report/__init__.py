"""Explaining a run from its plain data (:mod:`gnnmon.data`): summaries, spikes and dips, step
analysis, GC and energy accounting, markdown, DataFrames and figures. Imports no torch and no PyG.

The ground floor holds :class:`Report`, the statistics, loops and text helpers every wing reads, and
the export registry (:mod:`gnnmon.report.exports`); the wings: ``diagnosis/`` (findings),
``compare/`` (runs against runs), ``memory/`` (the memory model) and ``renderers/`` (the exports,
each registering itself as it is imported).

May import: ``gnnmon.data`` and the root modules (it reads rows as dicts; it never measures)."""

from gnnmon.report.compare.comparison import Comparison
from gnnmon.report.renderers import csv_export, html, tensorboard, timeline_plot, trace  # noqa: F401 - they register
from gnnmon.report.report import Report

__all__ = ["Comparison", "Report"]
