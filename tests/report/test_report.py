"""The report's summaries against planted rows of known figures."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gnnmon
from gnnmon.report import Report
from gnnmon.report.stats import describe, mad, percentile

MiB = 2**20


def planted_rows():
    rows = []
    for i in range(101):  # 0..100 MiB: percentiles land exactly on whole MiB
        rows.append({"label": "train", "index": i, "t_start_ns": i, "t_end_ns": i + 1,
                     "mem_peak_bytes": i * MiB, "wall_s": 0.01, "error": None, "notes": [],
                     "device": "cpu", "flag": True})
    rows.append({"label": "eval", "index": 0, "t_start_ns": 0, "t_end_ns": 1, "mem_peak_bytes": None,
                 "wall_s": 0.5, "error": "ValueError", "notes": ["mem missing: planted"], "device": "cpu"})
    return rows


def test_summary_statistics_are_exact():
    s = Report(planted_rows()).summary()
    mem = s["train"]["mem_peak_bytes"]
    assert mem == {"count": 101, "mean": 50 * MiB, "p50": 50 * MiB, "p90": 90 * MiB,
                   "p99": 99 * MiB, "max": 100 * MiB}
    assert "index" not in s["train"] and "t_start_ns" not in s["train"]
    assert "flag" not in s["train"]  # booleans are not figures
    assert s["eval"]["mem_peak_bytes"] == {"count": 0}  # None is "not measured", not zero
    assert s["eval"]["wall_s"]["max"] == 0.5


def test_markdown_has_units_errors_and_notes():
    text = Report(planted_rows()).markdown()
    assert "### train — 101 call(s) on cpu" in text
    assert "| mem_peak_bytes | MiB | 101 | 50 | 50 | 90 | 99 | 100 |" in text
    assert "| wall_s | ms | 101 | 10 | 10 | 10 | 10 | 10 |" in text
    assert "1 raised" in text and "note: mem missing: planted" in text
    assert "(no rows recorded)" in Report([]).markdown()


def test_frames():
    pd = pytest.importorskip("pandas")
    rep = Report(planted_rows())
    frame = rep.frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 102
    summary = rep.frame("summary")
    assert summary.loc[("train", "mem_peak_bytes"), "p90"] == 90 * MiB


def test_stats_helpers():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert describe([]) == {"count": 0}
    assert mad([1, 2, 3, 4, 100]) == 1
    with pytest.raises(ValueError):
        percentile([], 50)


def test_cli_prints_the_report(tmp_path):
    path = tmp_path / "r.jsonl"

    # a GPU in use elsewhere in the process: still the CPU
    @gnnmon.monitor_memory_device(label="cli-step", device="cpu")
    def f():
        return 1

    with gnnmon.collect(path):
        f()
    out = subprocess.run([sys.executable, "-m", "gnnmon", "report", str(path)],
                         capture_output=True, text=True, check=True).stdout
    assert "### cli-step — 1 call(s) on cpu" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text("nope\n")
    proc = subprocess.run([sys.executable, "-m", "gnnmon", "report", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "not a gnnmon report" in proc.stderr


def test_marker_values_are_not_summarised():
    with gnnmon.collect() as run:
        run.mark("epoch", 3)
        with gnnmon.memory_scope(label="blk"):
            pass
    assert run.records[0]["epoch"] == 3
    assert "epoch" not in run.report().summary()["blk"]


def test_failed_calls_are_named_and_left_out_of_the_figures():
    """Two of 20 planted calls raise after 500 ms (the OOM a user hunts); the 18 that returned took
    10 ms each: the table's figures are theirs, and the section names the failed calls."""
    rows = [{"label": "train", "index": i, "t_start_ns": i, "t_end_ns": i + 1, "device": "cpu", "notes": [],
             "wall_s": 0.5 if i in (4, 11) else 0.01, "error": {4: "OutOfMemoryError", 11: "KeyError"}.get(i)}
            for i in range(20)]
    report = Report(rows)
    assert report.summary()["train"]["wall_s"] == {"count": 18, "mean": 0.01, "p50": 0.01, "p90": 0.01,
                                                   "p99": 0.01, "max": 0.01}
    assert report.failures() == [{"label": "train", "index": 4, "error": "OutOfMemoryError", "parent": None},
                                 {"label": "train", "index": 11, "error": "KeyError", "parent": None}]
    text = report.markdown()
    assert "### train — 20 call(s) on cpu, 2 raised" in text
    assert "Raised — call 4: OutOfMemoryError; call 11: KeyError. The figures are over the calls that returned." in text
    assert "| wall_s | ms | 18 | 10 | 10 | 10 | 10 | 10 |" in text
    alone = Report([{**rows[4], "index": 0}])  # no call returned: its figures are all there is
    assert alone.summary()["train"]["wall_s"]["max"] == 0.5
    assert "No call returned: the figures are the failed calls'." in alone.markdown()


def test_the_label_table_shows_each_figure_once_with_its_unit_in_one_format():
    """CPU rows whose rss_* equal mem_* and device_s equals wall_s: those show once (with a note);
    utilisation says what 100 % is, energy shows J, emissions grams, power W; a row of numbers
    reaching 1,000 has one decimal throughout, a row of whole numbers none."""
    rows = [{"label": "s", "index": i, "t_start_ns": i, "t_end_ns": i + 1, "device": "cpu", "error": None,
             "notes": [], "wall_s": 0.002 * (i + 1), "device_s": 0.002 * (i + 1),
             "mem_peak_bytes": (500 + i) * MiB, "rss_peak_bytes": (500 + i) * MiB, "cpu_util_pct": 190.0 + i,
             "energy_cpu_j": 1.5, "co2_kg": 2e-5, "gpu_power_w": 250.0, "num_nodes": 1000 + 333 * i,
             "num_graphs": 1} for i in range(4)]
    text = Report(rows).markdown()
    assert "| rss_peak_bytes |" not in text and "| device_s |" not in text
    assert "note: rss_peak_bytes, device_s not shown: equal to mem_peak_bytes, wall_s here" in text
    assert "| cpu_util_pct | % (100 = one core) | 4 | 191.500 |" in text
    assert "| energy_cpu_j | J | 4 | 1.500 |" in text and "| gpu_power_w | W | 4 | 250 |" in text
    assert "| co2_kg | g | 4 | 0.020 | 0.020 |" in text
    assert ("| num_nodes |  | 4 | 1,499.5 | 1,499.5 | 1,899.1 | 1,989.0 | 1,999.0 |" in text
            and "| num_graphs |  | 4 | 1 | 1 | 1 | 1 | 1 |" in text)
    rows[2]["rss_peak_bytes"] += MiB  # no longer a repeat: both show
    assert "| rss_peak_bytes |" in Report(rows).markdown()


def test_small_figures_keep_their_significant_digits_and_a_column_keeps_one_format():
    """A step's CO2 in grams (0.000412) is not '0.000'; numbers side by side share decimals."""
    from gnnmon.report.markdown import _fmt_row

    assert _fmt_row([4.12e-7, 3.9e-7, None], 1e3) == ["0.00041", "0.00039", "–"]
    assert _fmt_row([1.5, 1234.25], 1.0) == ["1.5", "1,234.2"]
    assert _fmt_row([0.5, 0.02], 1.0) == ["0.500", "0.020"]
    assert _fmt_row([3e-15, 1e-14], 1.0) == ["3e-15", "1e-14"]
    rows = [{"label": "s", "index": i, "wall_s": 0.01 + i * 1e-4, "co2_kg": 4e-7 * (1 + i / 10)} for i in range(10)]
    text = gnnmon.Report(rows).markdown()
    co2 = next(line for line in text.splitlines() if line.startswith("| co2_kg"))
    assert co2.endswith("| 0.00058 | 0.00058 | 0.00072 | 0.00076 | 0.00076 |"), co2
