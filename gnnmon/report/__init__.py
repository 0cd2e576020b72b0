"""Explaining a run from its plain data (:mod:`gnnmon.data`): summaries, spikes and dips, step
analysis, GC and energy accounting, markdown, DataFrames and figures, and the exports (each a
module that registers itself in :mod:`gnnmon.report.exports`). Imports no torch and no PyG.

May import: ``gnnmon.data`` and the root modules (it reads rows as dicts; it never measures)."""

from gnnmon.report import csv_export, html, tensorboard, trace  # noqa: F401 - the built-in exports register themselves
from gnnmon.report.report import Report

__all__ = ["Report"]
