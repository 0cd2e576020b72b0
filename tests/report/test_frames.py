"""Notebook display and a DataFrame for every table of the report, against planted rows."""

from __future__ import annotations

import pytest

from gnnmon import Report

pd = pytest.importorskip("pandas")


def planted() -> Report:
    """12 steps of 1 ms and one of 30 ms (index 8) with a 25 ms GC pause in it; a GPU figure
    this machine could not read (None on every row); energy on two rows."""
    rows = []
    for i in range(13):
        slow = i == 8
        rows.append({"label": "step", "index": i, "parent": None, "t_start_ns": 1_000_000_000 * i,
                     "t_end_ns": 1_000_000_000 * i + (30_000_000 if slow else 1_000_000), "device": "cpu",
                     "device_s": 0.03 if slow else 0.001, "gc_pause_s": 0.025 if slow else 0.0,
                     "gc_max_generation": 2 if slow else None, "gpu_util_pct": None, "notes": [],
                     "energy_cpu_j": 2.0 if i < 2 else None, "energy_cpu_j_source": "planted" if i < 2 else None,
                     "epoch": i // 7})
    gc_events = [{"generation": 2, "t_start_ns": 8_001_000_000, "duration_s": 0.025, "reason": "automatic",
                  "requested": False, "row": "step#8"}]
    return Report(rows, manifest={"gnnmon": "x"}, gc_events=gc_events)


def test_a_notebook_shows_the_report_not_an_address():
    report = planted()
    assert report._repr_markdown_() == report.markdown()
    assert repr(report) == "<gnnmon Report: 13 rows, labels ['step']>"


def test_rows_have_timestamps_and_missing_figures_are_nan():
    frame = planted().frame("rows")
    assert frame["t_start"].dt.tz is not None and frame["t_start"].iloc[8] == pd.Timestamp(8_000_000_000, unit="ns",
                                                                                            tz="UTC")
    assert frame["gpu_util_pct"].dtype == "float64" and frame["gpu_util_pct"].isna().all()


@pytest.mark.parametrize("table, index, check", [
    ("spikes", ["label", "index"], lambda f: f.loc[("step", 8), "cause"] == "gc"),
    ("analysis", ["label"], lambda f: f.loc["step", "rows"] == 11 and "raw_p50" in f.columns),  # 2 warm-up
    ("energy", ["figure"], lambda f: f.loc["energy_cpu_j", "total"] == pytest.approx(4.0)
     and f.loc["energy_cpu_j", "sources"] == "planted"),
    ("energy_by_epoch", ["epoch"], lambda f: f.loc[0, "energy_cpu_j"] == pytest.approx(4.0)),
    ("gc", None, lambda f: list(f["duration_s"]) == [0.025]),
    ("summary", ["label", "figure"], lambda f: f.loc[("step", "device_s"), "count"] == 13),
    ("cross_rank", None, lambda f: f.empty),  # one process: no step is matched across ranks
])
def test_every_table_has_a_frame(table, index, check):
    frame = planted().frame(table)
    assert isinstance(frame, pd.DataFrame)
    if index:
        assert list(frame.index.names) == index
    assert check(frame)


def planted_job() -> Report:
    """Two ranks, 20 steps of 60 ms that end together; rank 1 starts step 11 50 ms late."""
    rows = []
    for i in range(20):
        for rank in (0, 1):
            start = i * 100_000_000 + (50_000_000 if (i, rank) == (11, 1) else 0)
            end = i * 100_000_000 + 60_000_000
            rows.append({"label": "step", "index": i, "rank": rank, "parent": None, "backend": "cpu",
                         "t_start_ns": start, "t_end_ns": end, "wall_s": (end - start) / 1e9, "gc_pause_s": 0.0})
    return Report(rows)


def test_the_cross_rank_frame_has_a_row_per_matched_step_naming_the_planted_late_rank():
    frame = planted_job().frame("cross_rank")
    assert list(frame.index.names) == ["label", "index"] and len(frame) == 20
    late = frame.loc[("step", 11)]
    assert late["slowest_rank"] == 1 and late["via"] == "arrival"
    assert late["delay_s"] == pytest.approx(0.05) and late["waited_s"] == pytest.approx(0.05)
    assert (frame.drop(index=("step", 11))["delay_s"] < 1e-9).all()  # no other step was held up


def test_an_unknown_table_is_named():
    with pytest.raises(ValueError, match="table must be one of rows, summary, spikes"):
        planted().frame("spike")
