"""The report as pandas DataFrames (pandas is an optional extra: imported when asked for)."""

from __future__ import annotations

from typing import Any

from gnnmon.report.stats import STATS


def _pandas() -> Any:
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Report.to_frame() needs pandas: pip install 'gnnmon[report]' (or pandas)"
        ) from exc
    return pd


TEXT_FIELDS = frozenset({"label", "parent", "device", "backend", "device_source", "error", "notes"})
"""Row fields that are text even when every row has None there; any other all-None column is a
figure this run could not measure (e.g. ``gpu_util_pct`` on a CPU), kept as float NaN."""


def rows_frame(records: list[dict[str, Any]]) -> Any:
    """One DataFrame row per call: ``t_start`` / ``t_end`` as UTC timestamps beside the
    nanosecond fields, and figures missing from every row as float NaN rather than ``object``."""
    pd = _pandas()
    frame = pd.DataFrame.from_records(records)
    for column in frame.columns:
        if column not in TEXT_FIELDS and not column.endswith("_source") and frame[column].isna().all():
            frame[column] = frame[column].astype("float64")
    for edge in ("start", "end"):
        if f"t_{edge}_ns" in frame.columns:
            frame[f"t_{edge}"] = pd.to_datetime(frame[f"t_{edge}_ns"], unit="ns", utc=True)
    return frame


def table_frame(rows: list[dict[str, Any]], index: list[str] | None = None) -> Any:
    """A report table (a list of flat dicts) as a DataFrame, indexed by ``index`` if given."""
    frame = _pandas().DataFrame.from_records(rows)
    return frame.set_index(index) if index and not frame.empty else frame


def summary_frame(summary: dict[str, dict[str, dict[str, float]]]) -> Any:
    """The per-label summary indexed by (label, figure), columns count … max."""
    rows = [
        {"label": label, "figure": name, **stats}
        for label, figures in summary.items()
        for name, stats in figures.items()
    ]
    frame = _pandas().DataFrame.from_records(rows, columns=["label", "figure", *STATS])
    return frame.set_index(["label", "figure"])
