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


def rows_frame(records: list[dict[str, Any]]) -> Any:
    """One DataFrame row per call."""
    return _pandas().DataFrame.from_records(records)


def summary_frame(summary: dict[str, dict[str, dict[str, float]]]) -> Any:
    """The per-label summary indexed by (label, figure), columns count … max."""
    rows = [
        {"label": label, "figure": name, **stats}
        for label, figures in summary.items()
        for name, stats in figures.items()
    ]
    frame = _pandas().DataFrame.from_records(rows, columns=["label", "figure", *STATS])
    return frame.set_index(["label", "figure"])
