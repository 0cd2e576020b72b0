"""Energy counters' points (gnnmon/data/points.py) against planted ramps: a counter rising at a
known rate gives, between any two times its points cover, exactly rate x time, interpolated
linearly between points (and None outside them); points out of order or repeated are dropped;
each key is its own series; a stepped counter's period is the median spacing of its newest
points; a key names its device and its unit."""

from __future__ import annotations

import pytest

from gnnmon.data.points import Counters, counter_device, joules_per_unit

T0 = 1_795_374_289_000_000_000  # an epoch time in ns, as the sampler stamps points
MS = 1_000_000


def ramp(key: str, rate_per_s: float, start: float, times_ns: list[int], **extra) -> list[dict]:
    """A counter rising at ``rate_per_s`` from ``start`` at ``T0``, read at ``times_ns``."""
    return [{"key": key, "t_ns": t, "value": start + rate_per_s * (t - T0) / 1e9, **extra} for t in times_ns]


@pytest.mark.parametrize("key, device", [
    ("gpu0_energy_mj", "cuda:0"), ("gpu1_energy_mj", "cuda:1"), ("gpu12_energy_mj", "cuda:12"),
    ("rapl_package_j", None), ("rapl_dram_j", None), ("gpu_energy_mj", None), ("gpux_energy_mj", None),
    ("gpu", None),
])
def test_a_counter_key_names_its_device(key, device):
    assert counter_device(key) == device


def test_a_counter_key_names_its_unit():
    assert joules_per_unit("gpu0_energy_mj") == 1e-3
    assert joules_per_unit("rapl_package_j") == 1.0


@pytest.mark.parametrize("watts", [75.0, 312.5])
def test_the_energy_between_two_times_of_a_planted_ramp_is_rate_times_time(watts):
    """A GPU drawing ``watts`` (its counter in mJ rises 1000 x watts a second), read every 100 ms
    with a jitter: the energy between any two covered times, at points or between them, is
    watts x seconds."""
    times = [T0 + k * 100 * MS + (k * 7919 % 13) * 1000 for k in range(50)]
    counters = Counters(ramp("gpu0_energy_mj", 1000 * watts, 5e6, times))
    for a, b in [(times[0], times[-1]), (times[3], times[4]), (T0 + 123_456_789, T0 + 4_321_000_000),
                 (T0 + 250 * MS, T0 + 251 * MS), (times[10] + 1, times[10] + 2)]:
        joules = counters.delta("gpu0_energy_mj", a, b) * joules_per_unit("gpu0_energy_mj")
        assert joules == pytest.approx(watts * (b - a) / 1e9, rel=1e-9, abs=1e-9)
    assert counters.value_at("gpu0_energy_mj", times[7]) == pytest.approx(5e6 + 1000 * watts * (times[7] - T0) / 1e9)


def test_between_two_points_a_counter_is_linear_and_at_a_point_its_value():
    counters = Counters([{"key": "k", "t_ns": 1000, "value": 10.0}, {"key": "k", "t_ns": 2000, "value": 30.0},
                         {"key": "k", "t_ns": 4000, "value": 31.0}])
    assert [counters.value_at("k", t) for t in (1000, 1250, 1500, 2000, 3000, 4000)] == [10.0, 15.0, 20.0, 30.0,
                                                                                          30.5, 31.0]
    assert counters.delta("k", 1500, 3000) == 10.5
    assert counters.delta("k", 3000, 1500) == -10.5  # as asked


def test_outside_its_points_a_counter_is_not_known():
    counters = Counters([{"key": "k", "t_ns": 1000, "value": 10.0}, {"key": "k", "t_ns": 2000, "value": 30.0}])
    assert counters.value_at("k", 999) is None and counters.value_at("k", 2001) is None
    assert counters.delta("k", 999, 1500) is None and counters.delta("k", 1500, 2001) is None
    assert counters.value_at("other", 1500) is None and counters.delta("other", 1000, 2000) is None
    one = Counters([{"key": "k", "t_ns": 1000, "value": 4.0}])
    assert one.value_at("k", 1000) == 4.0 and one.value_at("k", 1001) is None and one.delta("k", 1000, 1000) == 0.0


def test_each_key_is_its_own_series_and_points_come_back_key_by_key_in_time_order():
    gpu = ramp("gpu0_energy_mj", 100_000.0, 0.0, [T0 + k * 100 * MS for k in range(5)])
    host = ramp("rapl_package_j", 40.0, 1e4, [T0 + 50 * MS + k * 200 * MS for k in range(3)])
    counters = Counters([gpu[0], host[0], gpu[1], gpu[2], host[1], gpu[3], host[2], gpu[4]])  # interleaved
    assert counters.keys() == ["gpu0_energy_mj", "rapl_package_j"]
    assert counters.points() == gpu + host
    assert counters.delta("rapl_package_j", T0 + 100 * MS, T0 + 400 * MS) == pytest.approx(40.0 * 0.3)
    assert counters.delta("gpu0_energy_mj", T0 + 100 * MS, T0 + 400 * MS) == pytest.approx(100_000.0 * 0.3)


def test_a_point_out_of_order_or_repeated_is_dropped():
    counters = Counters()
    for t, v in [(1000, 1.0), (3000, 3.0), (2000, 99.0), (3000, 42.0), (5000, 5.0), (500, -1.0)]:
        counters.add({"key": "k", "t_ns": t, "value": v})
    assert counters.points() == [{"key": "k", "t_ns": 1000, "value": 1.0}, {"key": "k", "t_ns": 3000, "value": 3.0},
                                 {"key": "k", "t_ns": 5000, "value": 5.0}]
    assert counters.value_at("k", 2000) == 2.0  # the dropped point is no part of the series


def test_values_and_times_are_kept_as_numbers_whatever_they_came_as():
    counters = Counters([{"key": "k", "t_ns": 1000, "value": 10}, {"key": "k", "t_ns": 2000.0, "value": "30"}])
    assert [type(p["t_ns"]) for p in counters.points()] == [int, int]
    assert [p["value"] for p in counters.points()] == [10.0, 30.0] and counters.value_at("k", 1500) == 20.0


def test_covers_says_whether_every_counter_has_a_point_at_or_after_a_time():
    counters = Counters([{"key": "a", "t_ns": 1000, "value": 0.0}, {"key": "a", "t_ns": 5000, "value": 1.0},
                         {"key": "b", "t_ns": 3000, "value": 0.0}])
    assert counters.covers(3000) and not counters.covers(3001)
    counters.add({"key": "b", "t_ns": 6000, "value": 2.0})
    assert counters.covers(5000) and not counters.covers(5001)
    assert Counters().covers(10**18)  # no counter: nothing missing


def test_a_stepped_counters_period_is_the_median_spacing_of_its_newest_points():
    counters = Counters()
    assert counters.period_s("k") is None
    counters.add({"key": "k", "t_ns": 0, "value": 0.0})
    assert counters.period_s("k") is None and counters.stepped["k"] is True  # a step unless said otherwise
    gaps = [100, 100, 500, 100, 100, 20, 100, 100, 100]  # ms: one late read, one early
    t = 0
    for gap in gaps:
        t += gap * MS
        counters.add({"key": "k", "t_ns": t, "value": t / 1e9})
    assert counters.period_s("k") == 0.1
    for _ in range(12):  # the newest ten points only: the spacing becomes 50 ms
        t += 50 * MS
        counters.add({"key": "k", "t_ns": t, "value": t / 1e9, "step": False})
    assert counters.period_s("k") == 0.05 and counters.stepped["k"] is False
    assert Counters([{"key": "j", "t_ns": 0, "value": 0.0, "step": False}]).stepped["j"] is False
