"""Explaining a run from its plain data: summaries, spikes and dips, step analysis, GC and energy
accounting, markdown, DataFrames and figures.

May import: the root modules only (it reads rows as dicts; it never measures)."""

from gnnmon.report.report import Report

__all__ = ["Report"]
