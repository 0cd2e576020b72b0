"""The utilisation sampler: cadence (deadline scheduling), stop under exceptions, no thread left;
joining samples to rows by time."""

from __future__ import annotations

import os
import threading
import time

import pytest

import gnnmon
from gnnmon.timeline.join import join_utilisation, samples_in
from gnnmon.timeline.sampler import UtilisationSampler


def sampler_threads():
    return [t for t in threading.enumerate() if t.name == "gnnmon-sampler"]


def test_cadence_does_not_drift_even_when_sampling_takes_time():
    times = []

    def slow_sink(sample):
        times.append(time.perf_counter())
        time.sleep(0.015)  # 30 % of the interval: a sleep-after-work loop would drift by it

    s = UtilisationSampler(slow_sink, 0.05)
    with s:
        time.sleep(1.02)
    assert s.samples_taken == len(times)
    times = times[:-1]  # the last sample is taken at stop, off the grid
    n = len(times)
    assert 19 <= n <= 22, n  # one at start, then one every 50 ms
    span = times[-1] - times[0]
    assert abs(span - (n - 1) * 0.05) < 0.05, (n, span)  # on the grid, not (n - 1) × 0.065
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert max(abs(g - 0.05) for g in gaps) < 0.04
    assert not sampler_threads()


def test_a_stall_skips_deadlines_instead_of_bunching_samples():
    times = []

    def sink(sample):
        times.append(time.perf_counter())
        if len(times) == 3:
            time.sleep(0.26)  # a 260 ms pause (a gen-2 GC stalls the sampler too)

    s = UtilisationSampler(sink, 0.05)
    with s:
        time.sleep(0.8)
    times = times[:-1]  # the last sample is taken at stop, off the grid
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) > 0.02  # no burst of catch-up samples after the stall
    assert s.skipped >= 4


def test_samples_are_timestamped_and_have_process_figures():
    got = []
    with UtilisationSampler(got.append, 0.02):
        x = sum(i * i for i in range(2_000_000))  # keep a core busy
    assert x > 0 and got
    s = got[-1]
    assert s["t_ns"] > 0 and s["rss_bytes"] > 10 * 2**20 and s["ram_used_bytes"] > s["rss_bytes"]
    assert max(g["cpu_util_pct"] for g in got) > 50
    assert [g["t_ns"] for g in got] == sorted(g["t_ns"] for g in got)


def test_a_sample_at_start_and_at_stop_bracket_every_row():
    got = []
    with UtilisationSampler(got.append, 10.0) as s:  # no sample from the loop in this block
        t_in = time.time_ns()
        time.sleep(0.02)
    assert len(got) == 2 and s.samples_taken == 2
    assert got[0]["t_ns"] < t_in < got[1]["t_ns"]
    assert got[0]["interval_s"] == 10.0 and got[1]["cpu_time_s"] >= got[0]["cpu_time_s"]


def test_sampler_stops_when_the_body_raises():
    with pytest.raises(RuntimeError, match="planted"):
        with UtilisationSampler(lambda s: None, 0.01):
            assert sampler_threads()
            raise RuntimeError("planted")
    assert not sampler_threads()

    with pytest.raises(KeyError):
        with gnnmon.collect(sample=0.01) as run:
            time.sleep(0.05)
            raise KeyError("x")
    assert not sampler_threads() and len(run.samples) >= 2


def test_bad_intervals():
    with pytest.raises(ValueError, match="interval"):
        UtilisationSampler(lambda s: None, 0)
    with pytest.raises(ValueError, match="sample must be"):
        gnnmon.collect(sample=-1)


def planted_samples():
    # one sample every 100 ms from t = 1 s; CPU % = 10 × k; GPU 0 util = k, GPU 1 util = 100 - k
    return [{"t_ns": 1_000_000_000 + k * 100_000_000, "cpu_util_pct": 10.0 * k,
             "gpu0_util_pct": float(k), "gpu1_util_pct": 100.0 - k} for k in range(10)]


def test_join_planted_timestamps():
    samples = planted_samples()
    assert [s["cpu_util_pct"] for s in samples_in(samples, 1_150_000_000, 1_400_000_000)] == [20, 30, 40]
    row = {"t_start_ns": 1_150_000_000, "t_end_ns": 1_400_000_000, "device": "cuda:1", "notes": []}
    join_utilisation(row, samples, 0.1)
    assert row["util_samples"] == 3 and row["cpu_util_pct"] == 30.0
    assert row["gpu_util_pct"] == 97.0 and row["gpu_util_pct_source"] == "measured:nvml@100ms"
    cpu_row = {"t_start_ns": 1_000_000_000, "t_end_ns": 1_000_000_000, "device": "cpu", "notes": []}
    join_utilisation(cpu_row, samples, 0.1)
    assert cpu_row["cpu_util_pct"] == 0.0 and cpu_row["gpu_util_pct"] is None
    assert "gpu_util_pct: not a CUDA row" in cpu_row["notes"]


def test_a_row_between_samples_gets_none_and_a_reason():
    row = {"t_start_ns": 1_010_000_000, "t_end_ns": 1_090_000_000, "device": "cpu", "notes": []}
    join_utilisation(row, planted_samples(), 0.1)
    assert row["cpu_util_pct"] is None and row["util_samples"] == 0
    assert any("no sample fell in the row's window" in n for n in row["notes"])


def test_rows_of_a_sampled_run_get_utilisation(tmp_path):
    import torch

    @gnnmon.cuda_timed(label="busy")
    def busy():  # torch work, which releases the GIL as real training does
        a = torch.ones(200, 200)
        t = time.perf_counter()
        while time.perf_counter() - t < 0.25:
            a = (a @ a).clamp_(max=1.0)

    path = tmp_path / "s.jsonl"
    with gnnmon.collect(path, sample=0.02) as run:
        busy()
    (row,) = run.records
    assert row["util_samples"] >= 5
    assert 50 <= row["cpu_util_pct"] <= 100 * (os.cpu_count() or 1) + 10  # busy on up to every core
    loaded = gnnmon.load(path)
    assert len(loaded.samples) == len(run.samples) and loaded.samples[0]["t_ns"] == run.samples[0]["t_ns"]


def test_sample_utilisation_block():
    @gnnmon.cuda_timed(label="inside")
    def inside():
        time.sleep(0.1)

    with gnnmon.collect() as run:
        with gnnmon.sample_utilisation(0.01):
            inside()
        inside()  # after the block: no sampling, no join
    a, b = run.records
    assert a["util_samples"] >= 3 and "util_samples" not in b
    assert run.sample_interval is None and not sampler_threads()
