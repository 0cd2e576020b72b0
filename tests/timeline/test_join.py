"""The join of the timeline to rows by time (gnnmon/timeline/join.py) on its own, on planted samples
and counter points at known times: a row gets the mean of the samples inside its window, or, with
none inside, the value at its middle interpolated from the samples on each side, a window's mean
(CPU %) the next sample's (``util_samples`` 0 says so); a row with no sample after it lacks the
figure (absent: no null, no note, no source on the row: how each is had is the run's
``gauge_statement``, said once); a CUDA row reads its own GPU's gauges and a CPU row none;
``covers()`` is True once a sample and every counter's point have reached the row's end; and a
cumulative counter is shared out so that the rows and the gaps between them add up to its delta."""

from __future__ import annotations

import pytest

from gnnmon.data.points import Counters
from gnnmon.timeline.energy_join import EnergyJoin
from gnnmon.timeline.join import GAUGES, RowJoin, gauge_at, gauge_statement, join_gauges, samples_in

S = 1_000_000_000  # ns a second
MS = 1_000_000


def planted_samples() -> list[dict]:
    """One sample every 100 ms from t = 1 s, k = 0..9: CPU % = k² (so a mean is neither a
    median nor an end), RAM = 1000 k bytes, workers' RSS = 7 k, GPU 0 util = k, GPU 1 util =
    100 - k, GPU 1 power = 200 + k² W."""
    return [{"t_ns": S + k * 100 * MS, "cpu_util_pct": float(k * k), "ram_used_bytes": 1000 * k,
             "children_rss_bytes": 7 * k, "gpu0_util_pct": float(k), "gpu1_util_pct": 100.0 - k,
             "gpu1_power_w": 200.0 + k * k} for k in range(10)]


def row(a_ns: int, b_ns: int, device: str | None = "cpu") -> dict:
    return {"t_start_ns": a_ns, "t_end_ns": b_ns, "device": device}


# -- gauges --------------------------------------------------------------------------------------

def test_a_row_gets_the_mean_of_the_samples_inside_its_window():
    """Row 1.15-1.45 s holds samples k = 2, 3, 4 (at 1.2, 1.3, 1.4 s): CPU (4 + 9 + 16) / 3, RAM
    3000, workers 21; three samples. A gauge is kept to the resolution its samples have (percent to
    two decimals, bytes whole: timeline/join.py). The row holds no source: the run's statement says
    each is measured at 100 ms."""
    fields = row(S + 150 * MS, S + 450 * MS)
    join_gauges(fields, planted_samples())
    assert fields["util_samples"] == 3
    assert fields["cpu_util_pct"] == round(29 / 3, 2)
    assert fields["ram_used_bytes"] == 3000 and fields["workers_rss_bytes"] == 21
    assert not [k for k in fields if k.endswith("_source")] and "notes" not in fields
    said = gauge_statement(0.1)["sources"]
    assert said["cpu_util_pct"] == said["ram_used_bytes"] == "measured:psutil@100ms"


def test_a_window_holds_the_samples_at_its_two_ends():
    """Row 1.2-1.4 s, exactly on samples: k = 2, 3, 4 again (both ends inside)."""
    fields = row(S + 200 * MS, S + 400 * MS)
    join_gauges(fields, planted_samples())
    assert fields["util_samples"] == 3 and fields["cpu_util_pct"] == round(29 / 3, 2)
    assert [s["t_ns"] for s in samples_in(planted_samples(), S + 200 * MS, S + 400 * MS)] == [
        S + 200 * MS, S + 300 * MS, S + 400 * MS]


def test_a_cuda_row_gets_its_own_gpus_figures_and_a_cpu_row_none():
    """cuda:1 reads gpu1_* (util 100 - k, power 200 + k²); ``cuda`` is GPU 0 (util k, and no
    power sample: no power figure); a CPU row gets no GPU figure, and no note on any row (the
    run's statement says the GPU figures are a CUDA row's only)."""
    samples = planted_samples()
    one = row(S + 150 * MS, S + 350 * MS, "cuda:1")  # k = 2, 3
    join_gauges(one, samples)
    assert one["gpu_util_pct"] == 97.5 and one["gpu_power_w"] == 206.5
    assert gauge_statement(0.1)["sources"]["gpu_power_w"] == "measured:nvml@100ms"
    assert gauge_statement(0.1)["cuda_only"] == ["gpu_util_pct", "gpu_power_w"]
    zero = row(S + 150 * MS, S + 350 * MS, "cuda")
    join_gauges(zero, samples)
    assert zero["gpu_util_pct"] == 2.5 and "gpu_power_w" not in zero and "notes" not in zero
    cpu = row(S + 150 * MS, S + 350 * MS, "cpu")
    join_gauges(cpu, samples)
    assert not [k for k in cpu if k.startswith("gpu_")] and "notes" not in cpu
    assert cpu["cpu_util_pct"] == 6.5


def test_a_row_between_two_samples_gets_a_reading_interpolated_and_a_windows_mean_from_the_next():
    """Row 1.32-1.36 s, between k = 3 (1.3 s) and k = 4 (1.4 s); its middle, 1.34 s, is 40 % of
    the way: RAM (a reading at each sample's moment) 3400; CPU % (a mean over the 100 ms before
    each sample) k = 4's, 16, whose window 1.3-1.4 s holds the row (k = 3's measured 1.2-1.3 s,
    before it); no sample inside (``util_samples`` 0)."""
    fields = row(S + 320 * MS, S + 360 * MS)
    join_gauges(fields, planted_samples())
    assert fields["util_samples"] == 0
    assert fields["cpu_util_pct"] == 16.0
    assert fields["ram_used_bytes"] == pytest.approx(3400.0, rel=1e-12)
    assert "notes" not in fields
    assert "(cpu_util_pct, gpu_util_pct, idle_cpu_pct, others_cpu_pct) the next sample's" in \
        gauge_statement(0.1)["rule"]


def test_a_first_sample_taken_before_the_loop_never_blends_into_its_first_rows():
    """The sampler's first reading, 0 % at 1.0 s, measured the time before the loop; the loop ran
    at 100 % from 1.0 s on (the next sample, 1.1 s, says so): a 10 ms row at 1.02 s reads 100,
    not 0 and 100 interpolated (20)."""
    samples = [{"t_ns": S, "cpu_util_pct": 0.0, "others_cpu_pct": 0.0, "idle_cpu_pct": 200.0},
               {"t_ns": S + 100 * MS, "cpu_util_pct": 100.0, "others_cpu_pct": 50.0, "idle_cpu_pct": 50.0}]
    fields = row(S + 15 * MS, S + 25 * MS)
    join_gauges(fields, samples)
    assert (fields["cpu_util_pct"], fields["others_cpu_pct"], fields["idle_cpu_pct"]) == (100.0, 50.0, 50.0)


def test_a_row_after_the_last_sample_lacks_every_figure():
    """Row 2.0-2.05 s, after the last sample (1.9 s): every gauge absent (no null, no source, no
    note: the run's statement says a row with no sample on one side lacks it); and the join does
    not cover it."""
    fields = row(2 * S, 2 * S + 50 * MS, "cuda:1")
    join_gauges(fields, planted_samples())
    assert fields == row(2 * S, 2 * S + 50 * MS, "cuda:1") | {"util_samples": 0}
    assert all(name not in fields for name, _, _ in GAUGES)
    assert "absent where no sample on one side of the row has it" in gauge_statement(0.1)["rule"]
    assert not RowJoin(planted_samples(), Counters()).covers(fields)


def test_a_row_before_the_first_sample_gets_that_samples_value_as_it_measured_the_window_holding_it():
    """The samples from 1.1 s on (CPU 1, RAM 1000 there): row 1.05-1.08 s, before the first, takes
    that sample's value, as a figure that is a mean over the window ending at each sample does
    (its window holds the row)."""
    samples = planted_samples()[1:]  # first at 1.1 s: CPU 1
    fields = row(S + 50 * MS, S + 80 * MS)
    join_gauges(fields, samples)
    assert fields["cpu_util_pct"] == 1.0 and fields["ram_used_bytes"] == 1000.0 and fields["util_samples"] == 0


def test_samples_without_a_number_for_a_figure_are_passed_over():
    """CPU None in k = 2 and 3 (the sampler's first reading has none) and a bool in k = 4: row
    1.15-1.45 s holds those three, none with a CPU number, so its CPU (a mean over the window
    ending at each sample) is the next sample's that has one, k = 5 (1.5 s: 25); its RAM still
    averages all three."""
    samples = planted_samples()
    samples[2]["cpu_util_pct"] = samples[3]["cpu_util_pct"] = None
    samples[4]["cpu_util_pct"] = True
    fields = row(S + 150 * MS, S + 450 * MS)
    join_gauges(fields, samples)
    assert fields["cpu_util_pct"] == 25.0
    assert fields["ram_used_bytes"] == 3000 and fields["util_samples"] == 3


def test_gauge_at_interpolates_between_the_samples_on_each_side():
    """On a sample: its value; between: linear; before the first: None, or with ``window`` the
    first's; after the last: None; the position hint ``i`` changes nothing."""
    samples = planted_samples()
    assert gauge_at(samples, "cpu_util_pct", S + 300 * MS) == 9.0
    assert gauge_at(samples, "cpu_util_pct", S + 375 * MS) == pytest.approx(9 + 0.75 * 7, rel=1e-12)
    assert gauge_at(samples, "cpu_util_pct", S + 375 * MS, i=4) == pytest.approx(9 + 0.75 * 7, rel=1e-12)
    assert gauge_at(samples, "cpu_util_pct", S - 1) is None
    assert gauge_at(samples, "cpu_util_pct", S - 1, window=True) == 0.0
    assert gauge_at(samples, "cpu_util_pct", S + 900 * MS + 1) is None
    assert gauge_at(samples, "cpu_util_pct", S + 900 * MS + 1, window=True) is None
    assert gauge_at(samples, "gpu7_util_pct", S + 300 * MS) is None  # no sample has it


# -- covers and the join ---------------------------------------------------------------------------

def test_covers_once_a_sample_and_every_counters_point_reach_the_rows_end():
    """The join holds the run's lists (it sees samples and points as they arrive): no sample, a
    sample before the end, one at the end; then a counter whose last point is before the end
    holds it back until its next point."""
    samples: list[dict] = []
    counters = Counters()
    join = RowJoin(samples, counters)
    fields = row(S, S + 250 * MS)
    assert not join.covers(fields)
    samples.append({"t_ns": S + 200 * MS, "cpu_util_pct": 50.0})
    assert not join.covers(fields)
    samples.append({"t_ns": S + 250 * MS, "cpu_util_pct": 60.0})
    assert join.covers(fields)
    counters.add({"key": "gpu0_energy_mj", "t_ns": S + 100 * MS, "value": 0.0})
    assert not join.covers(fields)
    counters.add({"key": "gpu0_energy_mj", "t_ns": S + 300 * MS, "value": 900.0})
    assert join.covers(fields)


class Arriving(dict):
    """A counter's point that, when its value is read, runs ``meanwhile``: the writer thread
    asking ``covers()`` while the sampler's reader thread is inside ``Counters.add`` (the GIL
    may switch threads between any two bytecodes)."""

    def __init__(self, meanwhile, **point) -> None:
        super().__init__(point)
        self.meanwhile = meanwhile
        self.seen: list = []

    def __getitem__(self, key):
        if key == "value":
            self.seen.append(self.meanwhile())
        return super().__getitem__(key)


def test_covers_asked_while_a_counters_first_point_arrives_says_not_yet_or_yes_never_raises():
    """A second counter's first point arrives (at 1.3 s) while the join asks whether a row ending
    at 1.25 s is covered: the answer is a bool, and once the point is in, True (it raised
    IndexError: the new counter's times were in place before their first point, and
    take_ready lost the rows it had taken before the question)."""
    samples = [{"t_ns": S + 300 * MS, "cpu_util_pct": 50.0}]
    counters = Counters([{"key": "gpu0_energy_mj", "t_ns": S + 300 * MS, "value": 0.0}])
    join = RowJoin(samples, counters)
    fields = row(S, S + 250 * MS)
    point = Arriving(lambda: join.covers(fields), key="rapl_package_j", t_ns=S + 300 * MS, value=5.0)
    counters.add(point)
    assert len(point.seen) == 1 and point.seen[0] in (True, False)
    assert join.covers(fields) and counters.value_at("rapl_package_j", S + 300 * MS) == 5.0


def test_refresh_asks_for_a_sample_now():
    asked: list[int] = []
    RowJoin([], Counters(), refresh=lambda: asked.append(1)).refresh()
    RowJoin([], Counters()).refresh()  # no sampler to ask: nothing
    assert asked == [1]


class PlantedEnergy:
    """Fills a planted figure and keeps what it was given."""

    def __init__(self) -> None:
        self.given: list[tuple] = []

    def fill(self, fields, samples, counters) -> None:
        self.given.append((samples, counters))
        fields["energy_gpu_j"] = 1.5


def test_join_adds_the_gauges_and_hands_the_same_timeline_to_the_energy_join():
    samples, counters, energy = planted_samples(), Counters(), PlantedEnergy()
    join = RowJoin(samples, counters, energy)
    fields = row(S + 150 * MS, S + 450 * MS, "cuda:1")
    join.join(fields)
    assert fields["cpu_util_pct"] == round(29 / 3, 2) and fields["gpu_util_pct"] == 97.0
    assert fields["energy_gpu_j"] == 1.5 and energy.given == [(samples, counters)]
    assert samples[0]["t_ns"] == S  # the join reads the timeline, never changes it


def test_an_energy_counter_is_shared_out_so_rows_and_gaps_add_up_to_its_delta():
    """GPU 0's counter steps every 100 ms: 0, 10, 30, 60, 100 J at 1.0 .. 1.4 s. Rows
    1.05-1.15 s (20 - 5 = 15 J), 1.15-1.32 s (68 - 20 = 48 J), 1.35-1.40 s (100 - 80 = 20 J):
    each row gets the counter interpolated at its ends, and the rows with the gaps before and
    between them (5 J and 12 J) add up to the counter's 100 J."""
    points = [{"key": "gpu0_energy_mj", "t_ns": S + k * 100 * MS, "value": v * 1000.0}
              for k, v in enumerate([0, 10, 30, 60, 100])]
    counters = Counters(points)
    samples = [{"t_ns": S + k * 100 * MS, "cpu_util_pct": 50.0} for k in range(5)]
    join = RowJoin(samples, counters, EnergyJoin({"nvml_energy_counter": {"0": True}, "gpus": [0]}, 0.1))
    windows = [(S + 50 * MS, S + 150 * MS), (S + 150 * MS, S + 320 * MS), (S + 350 * MS, S + 400 * MS)]
    rows = [row(a, b, "cuda:0") for a, b in windows]
    for fields in rows:
        assert join.covers(fields)
        join.join(fields)
    assert [f["energy_gpu_j"] for f in rows] == pytest.approx([15.0, 48.0, 20.0], rel=1e-12)
    assert rows[0]["energy_gpu_j_source"] == "measured:nvml-energy-counter(interpolated between 100ms steps)"
    assert rows[2]["energy_gpu_j_source"] == "measured:nvml-energy-counter(share of a 100ms step, by time)"
    gaps = (counters.delta("gpu0_energy_mj", S, S + 50 * MS)
            + counters.delta("gpu0_energy_mj", S + 320 * MS, S + 350 * MS))
    assert sum(f["energy_gpu_j"] for f in rows) + gaps / 1000 == pytest.approx(100.0, rel=1e-12)
    late = row(S + 350 * MS, S + 450 * MS, "cuda:0")
    assert not join.covers(late)  # no sample and no point after 1.4 s yet
