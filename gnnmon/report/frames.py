"""The report as pandas DataFrames, one table a name (pandas is an optional extra: imported when
asked for)."""

from __future__ import annotations

from typing import Any, Protocol

from gnnmon.data.table import Table
from gnnmon.figures import ENERGY_FIELDS
from gnnmon.report.analysis import dips, step_analysis
from gnnmon.report.stats import STATS


def _pandas() -> Any:
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Report.frame() needs pandas: pip install 'gnnmon[report]' (or pandas)"
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


class Tabled(Protocol):
    """What :func:`frame` reads (:class:`gnnmon.report.Report` has all of it)."""

    table: Table
    gc_events: list[dict[str, Any]]

    @property
    def records(self) -> list[dict[str, Any]]: ...

    def summary(self) -> dict[Any, Any]: ...

    def spikes(self) -> list[dict[str, Any]]: ...

    def energy(self) -> dict[str, Any]: ...

    def cross_rank(self) -> dict[str, Any]: ...


TABLES = ("rows", "summary", "spikes", "dips", "analysis", "energy", "energy_by_label", "energy_by_epoch", "gc",
          "cross_rank")
"""The tables :func:`frame` makes, by name."""


def frame(report: Tabled, table: str = "rows") -> Any:
    """The report's table ``table`` (one of :data:`TABLES`) as a DataFrame: ``rows``
    (:func:`rows_frame`), ``summary`` (:func:`summary_frame`), ``spikes`` and ``dips`` indexed by
    (label, index), ``analysis`` one row per label (nested figures flattened: ``raw_p50`` …),
    ``energy`` one row per figure (total, share, sources), ``energy_by_label`` /
    ``energy_by_epoch``, ``gc`` one row per collection, ``cross_rank`` one row per step matched
    across ranks."""
    if table == "rows":
        return rows_frame(report.records)
    if table == "summary":
        return summary_frame(report.summary())
    if table in ("spikes", "dips"):
        return table_frame(report.spikes() if table == "spikes" else dips(report.table), ["label", "index"])
    if table == "analysis":
        flat = []
        for label, a in step_analysis(report.table).items():
            row: dict[str, Any] = {"label": label}
            for key, value in a.items():
                if isinstance(value, dict):
                    row.update({f"{key}_{k}": v for k, v in value.items()})
                else:
                    row[key] = value
            flat.append(row)
        return table_frame(flat, ["label"])
    if table == "energy":  # one row per figure: its total, share and sources
        e = report.energy() or {}
        total, share, sources = e.get("total", {}), e.get("share", {}), e.get("sources", {})
        return table_frame([{"figure": k, "total": total.get(k), "share": share.get(k),
                             "sources": "; ".join(sources.get(k, []))}
                            for k in (*ENERGY_FIELDS, "co2_kg") if k in total], ["figure"])
    if table in ("energy_by_label", "energy_by_epoch"):
        by = (report.energy() or {}).get(table[len("energy_"):]) or {}
        key = table[len("energy_by_"):]
        return table_frame([{key: k, **v} for k, v in by.items()], [key])
    if table == "gc":
        return table_frame(report.gc_events)
    if table == "cross_rank":
        return table_frame((report.cross_rank() or {}).get("steps", []), ["label", "index"])
    raise ValueError(f"table must be one of {', '.join(TABLES)}; got {table!r}")
