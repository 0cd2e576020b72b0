"""Energy per row: NVML against a fake pynvml, RAPL against a fake powercap tree, CodeCarbon's
model for real on this machine, and every missing-dependency path."""

from __future__ import annotations

import bisect
import os
import re
import sys
import time

import pytest

import gnnmon
from gnnmon import cuda_timed, monitor_memory_device
from gnnmon.data.points import Counters
from gnnmon.devices.cuda import cuda_uuids
from gnnmon.devices.nvml import Nvml
from gnnmon.devices.rapl import RaplReader, find_zones
from gnnmon.report.renderers.timeline_plot import plot_timeline
from gnnmon.timeline import carbon
from gnnmon.timeline.agent import Agent
from gnnmon.timeline.counters import SteppedCounter
from gnnmon.timeline.energy_join import EnergyJoin
from gnnmon.timeline.energy_sources import EnergySources
from tests.energy_truth import COUNTER_RES_J, misplacing, period_slack_ms, placing_slack_j
from tests.fake_nvml import FakeNvml, hide_pynvml, logged_calls

J_PER_KWH = 3.6e6


# -- NVML ---------------------------------------------------------------------------------------

def assert_energy(got_j: float, planted_j: float, rel: float, slack_j: float, shown: object) -> None:
    """``got_j`` within ``rel`` of the planted energy plus what placing allows, and never more than
    half the plant off however much a loaded machine misplaced the points: a bound no load makes
    vacuous (a reading half off is wrong, whatever held it up)."""
    allowed = min(rel * planted_j + slack_j, planted_j / 2)
    assert abs(got_j - planted_j) <= allowed, (got_j, planted_j, allowed, shown)


def test_fake_nvml_counter_ramping_at_a_known_power_gives_the_row_energy(fake_cuda, monkeypatch, tmp_path):
    """The counter ramps at 150 W on CUDA 1 (NVML 0: the orders differ, mapped by UUID) and 900 W
    on the other GPU: a row on cuda:1 gets 150 W × its duration, from points the sampler process
    sends, interpolated to the row's ends. The training process itself never calls NVML."""
    nv = FakeNvml(n=2, ramp_w=150.0, calls_log=str(tmp_path / "calls")).install(monkeypatch, tmp_path)
    nv.ramp_w[1] = 900.0  # CUDA 0: not this row's GPU (in this process only: never read here)
    fake_cuda.current_device()  # the model is on the GPU: CUDA in use, UUIDs from torch

    @cuda_timed(device="cuda:1")
    def step():
        time.sleep(0.3)

    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path, energy=True, sample=0.05, carbon_intensity=100.0) as run:
        step()
    (row,) = run.records
    duration = (row["t_end_ns"] - row["t_start_ns"]) / 1e9
    slack_j = placing_slack_j(path, "gpu1_energy_mj", nv, 0, row["t_start_ns"], row["t_end_ns"])
    assert_energy(row["energy_gpu_j"], 150.0 * duration, 0.01, slack_j, row)
    # a counter that moves at every read is read with the samples, not hunted for steps
    assert row["energy_gpu_j_source"] == "measured:nvml-energy-counter(interpolated between reads@50ms)"
    joules = sum(row[k] for k in ("energy_gpu_j", "energy_cpu_j", "energy_ram_j") if row[k] is not None)
    assert row["co2_kg"] == pytest.approx(joules / J_PER_KWH * 0.1)
    assert row["co2_kg_source"] == "user:100g/kWh"
    assert not [c for c in nv.calls if c[0].startswith("nvmlDevice")]  # no query in this process
    # (CodeCarbon's own import calls nvmlInit here, once)
    child = logged_calls(tmp_path / "calls")
    assert "nvmlDeviceGetTotalEnergyConsumption" in child and child.count("nvmlShutdown") == 1


# The bar: 300 W for 1 s, then 100 W for 1 s, the counter updated every 100 ms; rows of
# 50-500 ms back to back, each within 3 % of the planted energy in its own window; the rows plus
# the gaps between them add up to the counter's delta within 1 %.
DURATIONS = [0.05, 0.3, 0.12, 0.5, 0.07, 0.2, 0.25, 0.06, 0.15, 0.3]


def test_energy_per_row_from_a_stepped_counter_against_a_planted_power_profile(fake_cuda, monkeypatch, tmp_path):
    carbon.codecarbon_model()  # warm (imports codecarbon once): the run starts at once
    # 200 W until the cue, given once the run has started (however long that took); rows start there
    nv = FakeNvml(n=2, period=0.1, schedule=[(None, 200.0), (1.0, 300.0), (1.0, 100.0)]).install(monkeypatch, tmp_path)
    path = tmp_path / "profile.jsonl"
    with gnnmon.collect(path, energy=True, sample=0.5) as run:
        time.sleep(max(0.0, nv.cue() - time.time()))
        for d in DURATIONS:
            with gnnmon.timed(device="cuda:0", label="row"):
                time.sleep(d)
        time.sleep(0.05)
    rows = run.records
    assert [r["label"] for r in rows] == ["row"] * len(DURATIONS)
    key = "gpu0_energy_mj"  # CUDA 0 is NVML 1
    points, _, off = misplacing(path, key, nv, 1)
    # the period learned from the points, 100 ms within what placing them allows, as learned from
    # each newest 10 (a row's name: the period so far; the balance's: the last)
    slack_ms = period_slack_ms(off, 100.0)
    for r in rows:
        # each row within the 3 % of the planted energy in its own window, plus what
        # placing the points around its ends allows at the power planted there (a 300->100 W
        # step inside a row moves its energy by 300 W x a point's misplacing)
        planted = nv.joules(1, r["t_start_ns"] / 1e9, r["t_end_ns"] / 1e9)
        slack_j = placing_slack_j(path, key, nv, 1, r["t_start_ns"], r["t_end_ns"])
        assert_energy(r["energy_gpu_j"], planted, 0.03, slack_j, r)
        short = r["wall_s"] < 0.1
        # the source names the period learned so far from the steps seen (whole ms): 100 ms
        how = (r"measured:nvml-energy-counter\(share of a (\d+)ms step, by time\)" if short else
               r"measured:nvml-energy-counter\(interpolated between (\d+)ms steps\)")
        named = re.fullmatch(how, r["energy_gpu_j_source"])
        assert named and abs(int(named.group(1)) - 100) <= max(slack_ms) + 0.5, (r["energy_gpu_j_source"], slack_ms)
    balance = run.report().energy()["balance"][key]
    assert balance["rows"] == len(rows) and balance["period_s"] == pytest.approx(0.1, abs=slack_ms[-1] / 1e3)
    added = balance["rows_j"] + balance["gaps_j"] + balance["outside_j"]
    assert added == pytest.approx(balance["counter_j"], rel=0.01)
    first, last = points[0]["t_ns"], points[-1]["t_ns"]
    assert_energy(balance["counter_j"], nv.joules(1, first / 1e9, last / 1e9), 0.01,
                  placing_slack_j(path, key, nv, 1, first, last), balance)
    span = rows[-1]["t_end_ns"] / 1e9 - rows[0]["t_start_ns"] / 1e9
    assert_energy(balance["rows_j"] + balance["gaps_j"],
                  nv.joules(1, rows[0]["t_start_ns"] / 1e9, rows[-1]["t_end_ns"] / 1e9), 0.01,
                  placing_slack_j(path, key, nv, 1, rows[0]["t_start_ns"], rows[-1]["t_end_ns"]), balance)
    assert span > 1.9
    # the file keeps the points: a loaded run gives the same balance, and the report shows it
    loaded = gnnmon.load(path)
    assert loaded.points == run.points and loaded.records == rows
    assert gnnmon.Report(loaded).energy()["balance"] == run.report().energy()["balance"]
    text = gnnmon.Report(loaded).markdown()
    assert "| counter | rows | in rows J | between rows J | before/after J | counter delta J | step |" in text
    assert f"| gpu0_energy_mj | {len(rows)} |" in text


RANK_POWER_W = {0: 120.0, 1: 480.0}
RANK_STEPS_S = {0: [0.1, 0.2, 0.15], 1: [0.25, 0.1]}


def test_a_two_rank_job_read_back_has_each_ranks_energy_and_the_jobs_total(fake_cuda, monkeypatch, tmp_path):
    """Two ranks of one job (torchrun's variables), each with its GPU's counter ramping at its own
    planted power: read back with gnnmon.load, each rank's rows have that power × their time, each
    rank's counter balances against its own delta, the job's total is the sum, and each rank's
    end line (its sampler's cost) survives the merge."""
    carbon.codecarbon_model()  # imported once: each run starts at once
    fake_cuda.current_device()
    monkeypatch.setenv("WORLD_SIZE", "2")
    planted: dict[int, float] = {}
    fakes: dict[int, FakeNvml] = {}
    ends: dict[int, list[int]] = {}
    for rank, watts in RANK_POWER_W.items():
        monkeypatch.setenv("RANK", str(rank))
        fakes[rank] = FakeNvml(n=2, ramp_w=watts).install(monkeypatch, tmp_path / f"nvml{rank}")
        with gnnmon.collect(tmp_path / "job.jsonl", energy=True, sample=0.05, distributed=False) as run:
            for seconds in RANK_STEPS_S[rank]:
                with gnnmon.timed(device="cuda:0", label="step"):
                    time.sleep(seconds)
        ends[rank] = [t for r in run.records for t in (r["t_start_ns"], r["t_end_ns"])]
        planted[rank] = sum(fakes[rank].joules(1, r["t_start_ns"] / 1e9, r["t_end_ns"] / 1e9) for r in run.records)
    job = gnnmon.load(tmp_path / "job.jsonl")
    assert sorted(job.ranks) == [0, 1] and len(job.records) == 5
    assert [e["rank"] for e in job.end["ranks"]] == [0, 1] and job.end["rows"] == 5
    assert all(job.ranks[r].sampler_stats["samples"] > 0 for r in (0, 1))  # each rank's sampler cost
    assert {p["rank"] for p in job.points} == {0, 1}
    energy = gnnmon.Report(job).energy()
    key = "gpu0_energy_mj"  # CUDA 0 is NVML 1
    total_slack_j = 0.0
    for rank, watts in RANK_POWER_W.items():
        # What placing this rank's points allows its rows, from the plant (each point's true
        # instant on its fake's ramp against where gnnmon placed it), never from their err_ns:
        # each end of each row may move by the misplacing of the points around it, at this
        # rank's planted power.
        path, nv = tmp_path / f"job.rank{rank}.jsonl", fakes[rank]
        rows_slack_j = placing_slack_j(path, key, nv, 1, *ends[rank])
        total_slack_j += rows_slack_j
        assert_energy(energy["by_rank"][rank]["energy_gpu_j"], planted[rank], 0.01, rows_slack_j, energy["by_rank"])
        balance = energy["balance"][f"rank{rank}:{key}"]
        assert balance["rows"] == len(RANK_STEPS_S[rank])
        assert_energy(balance["rows_j"], planted[rank], 0.01, rows_slack_j, balance)
        # the counter's delta is the planted energy between its first and last points' true
        # instants; the span is between where gnnmon placed them: the two differ by those points'
        # misplacings (and the counter's whole mJ at each end) at this rank's power
        _, _, off = misplacing(path, key, nv, 1)
        res_ns = COUNTER_RES_J / watts * 1e9 + 1_000
        span_slack_j = watts * (off[0] + off[-1] + 2 * res_ns) / 1e9
        assert_energy(balance["counter_j"], watts * balance["span_s"], 0.01, span_slack_j, (balance, off[0], off[-1]))
        added = balance["rows_j"] + balance["gaps_j"] + balance["outside_j"]
        assert added == pytest.approx(balance["counter_j"], rel=0.01)
    assert_energy(energy["total"]["energy_gpu_j"], planted[0] + planted[1], 0.01, total_slack_j, energy["total"])


def test_a_read_held_up_mid_call_is_taken_again_and_the_tightest_kept():
    """A counter ramping at 1000 W, read on the real clock; the 4th read is held up 40 ms after it
    took its value (the sampler preempted mid-call, as on a loaded machine), so its middle is 20 ms
    after the value's instant. The read is taken again: the point is placed within 5 ms of the
    instant its value belongs to, and the reread is counted."""
    from gnnmon.timeline.counters import ReadCounter

    calls = [0]

    def read():
        a = time.time_ns()
        t_value = time.time_ns()
        calls[0] += 1
        if calls[0] == 4:
            time.sleep(0.04)  # held up after taking its value
        b = time.time_ns()
        return t_value * 1e-6, (a + b) // 2  # 1000 W: mJ = ns × 1e-6

    counter = ReadCounter("gpu0_energy_mj", read)
    points = []
    for _ in range(5):
        points.append(counter.poll())
        time.sleep(0.005)
    off_ns = [abs(p["t_ns"] - p["value"] * 1e6) for p in points]
    assert max(off_ns) < 5_000_000, off_ns  # the held-up read alone would be 20 ms off
    assert counter.rereads >= 1 and counter.describe()["rereads"] == counter.rereads
    assert counter.reads == 5 + counter.rereads


def test_steps_are_found_where_they_happened_on_a_simulated_clock():
    """A counter stepping every 97-103 ms (the spread measured on an H100; phase 37 ms), each read
    taking 0.2 ms, driven on a simulated clock: every step is placed within half a read interval
    of where it happened, the period is learned, and once learned a step costs a few dozen reads
    in a window before it is due (not one every 0.5 ms for the whole 100 ms)."""
    import random

    rng = random.Random(3)
    steps = [37_000_000]
    for _ in range(39):
        steps.append(steps[-1] + 100_000_000 + rng.randint(-3_000_000, 3_000_000))
    clock = [0]

    def read():
        t = clock[0]
        clock[0] += 200_000  # the read takes 0.2 ms
        done = sum(1 for s in steps if s <= t + 100_000)  # the value at the read's middle
        return float(done * 10_000), t + 100_000

    counter = SteppedCounter("gpu0_energy_mj", read)
    found = []
    while clock[0] < steps[-1] + 50_000_000:
        clock[0] = max(clock[0], counter.due_ns(clock[0]))
        point = counter.poll()
        if point is not None:
            found.append(point)
    assert len(found) == len(steps)
    placed = [abs(p["t_ns"] - s) for p, s in zip(found, steps, strict=True)]
    assert max(placed[1:]) <= 450_000, placed  # 0.5 ms between reads at most: ±0.25 ms, plus the read
    assert all(p["err_ns"] <= 450_000 for p in found[1:]) and found[0]["step"]
    assert counter.period_ns == pytest.approx(100_000_000, abs=3_000_000)
    assert counter.reads < 40 * 60, counter.reads  # vs 40 × 143 reading every 0.7 ms throughout


def _held_up_reads(steps: list[int], hold_at_ns: int, hold_ns: int) -> tuple[SteppedCounter, list[dict]]:
    """A counter at 300 W stepping at the instants ``steps`` (ns on a simulated clock; whole mJ:
    a step's value is the planted energy up to it), read as the sampler does (each read 0.1 ms,
    its value the counter's at its middle); the first read due at or after ``hold_at_ns`` comes
    ``hold_ns`` late (the sampler got no CPU). Returns the counter and its points."""
    clock = [0]

    def read():
        t = clock[0] + 50_000
        clock[0] += 100_000
        done = [s for s in steps if s <= t]
        return float(300 * done[-1] // 1_000_000 if done else 0), t  # 300 W: mJ = 300 × ns / 1e6

    counter = SteppedCounter("gpu0_energy_mj", read)
    points, held = [], False
    while clock[0] < steps[-1] + 50_000_000:
        clock[0] = max(clock[0], counter.due_ns(clock[0]))
        if not held and clock[0] >= hold_at_ns:
            clock[0] += hold_ns
            held = True
        if (point := counter.poll()) is not None:
            points.append(point)
    return counter, points


@pytest.mark.parametrize("late_step_ns, hold_at_ns, hold_ns", [
    (0, 995_000_000, 250_000_000),  # held up across three steps: the read after shows the third
    (8_500_000, 1_001_000_000, 8_000_000),  # one step 8.5 ms after the period's say, seen 8 ms late
])
def test_a_step_seen_late_is_placed_where_its_value_was_and_its_err_ns_holds(late_step_ns, hold_at_ns, hold_ns):
    """Once the period is learned, a read held up (a loaded machine) may see a step after it
    happened. Its value is the counter's at the newest step in the gap: held up 250 ms past three
    steps, a point placed at the first is 200 ms early (err_ns half the gap: 125 ms), and a 0.4 s
    window ending there reads 180 J against the 120 J planted, where its points' err_ns allow 38 J
    (as the benchmark's energy split read 178.04 J against 120.00 J). A step later than the period
    says, seen 8 ms late and placed at the read before it, is 7.9 ms off: err_ns must reach the
    gap's far end, not half the gap (4.3 ms). Planted on a simulated clock, steps every 100 ms at
    300 W: every point lies within its err_ns of the planted step its value shows, the late one
    within half a period of it (its own step, not an earlier one), and every 0.4 s window between
    steps reads the planted energy within what the err_ns of the two points around each end allow
    at 300 W (the end interpolated between them), and the counter's whole mJ at each end."""
    steps = [k * 100_000_000 + (late_step_ns if k == 10 else 0) for k in range(1, 21)]
    counter, points = _held_up_reads(steps, hold_at_ns, hold_ns)
    assert counter.period_ns == pytest.approx(100_000_000, abs=1_000_000)
    step_of = {300 * s // 1_000_000: s for s in steps}
    true_ns = [step_of[p["value"]] for p in points]  # the planted step each value shows
    off_ns = [abs(p["t_ns"] - t) for p, t in zip(points, true_ns, strict=True)]
    late = max(range(len(points)), key=lambda i: points[i]["err_ns"])
    assert points[late]["err_ns"] >= hold_ns / 2, points[late]  # the held-up read's point
    assert off_ns[late] < 50_000_000, (points[late], true_ns[late])  # its own step, not an earlier one
    assert all(o <= p["err_ns"] for o, p in zip(off_ns, points, strict=True)), [
        (p, o) for o, p in zip(off_ns, points, strict=True) if o > p["err_ns"]]
    counters = Counters(points)
    times = [p["t_ns"] for p in points]

    def bracket_err_ns(t: int) -> int:
        i = bisect.bisect_right(times, t)
        return max(p["err_ns"] for p in points[max(0, i - 1):i + 1])

    for a, b in zip(steps[2:-5], steps[6:-1], strict=True):  # windows of four steps, inside the points
        window_mj = counters.delta("gpu0_energy_mj", a, b)
        planted_mj = 300 * b // 1_000_000 - 300 * a // 1_000_000
        allowed_mj = 300 * (bracket_err_ns(a) + bracket_err_ns(b)) / 1e6 + 2
        assert window_mj is not None and abs(window_mj - planted_mj) <= allowed_mj, (a, b, window_mj, allowed_mj)


def _late_reads(step_ns: int | None, late_ns: int, sample_ns: int = 50_000_000, until_ns: int = 500_000_000):
    """A counter at 150 W on a simulated clock (whole mJ; moving at every instant with ``step_ns``
    None, else at every ``step_ns``), polled as the sampler does on a busy machine: a read due later
    waits for it and then ``late_ns`` more at least (the scheduler gives the CPU back only so
    often), one due at once comes at once; once continuous, read with the samples, every
    ``sample_ns``. Returns the counter and its points."""
    clock = [0]

    def read():
        t = clock[0] + 50_000  # the value's instant: the read's middle (it takes 0.1 ms)
        clock[0] += 100_000
        at = t if step_ns is None else t // step_ns * step_ns
        return float(int(150.0 * at / 1e6)), t  # 150 W: mJ = 150 × s × 1000

    counter = SteppedCounter("gpu0_energy_mj", read)
    points, next_sample = [], 0
    while clock[0] < until_ns:
        if counter.continuous:
            clock[0] = max(clock[0], next_sample)
            point = counter.read_now()
            next_sample += sample_ns
        else:
            due = counter.due_ns(clock[0])
            if due > clock[0]:  # the sampler sleeps, and wakes when the scheduler lets it
                clock[0] = max(due, clock[0] + late_ns)
            point = counter.poll()
        if point is not None:
            points.append(point)
    return counter, points


def test_a_counter_moving_at_every_read_is_read_not_hunted_however_late_the_reads_come():
    """Beside four CPU burners and a second test process the sampler's reads came 2.7-5.7 ms apart,
    not 0.5 ms: no step was placed precisely, the period was never learned, and a counter moving
    every 6.7 µs was hunted as if it stepped, its points placed midway between reads (1.3-2.9 ms
    off each) and its rows said to be "interpolated between 4ms (or 6ms) steps". Planted on a
    simulated clock: reads 5.7 ms apart that each moved, then the next at once; ``MOVING_READS``
    reads in a row that moved hold one step each, so the steps come at most their span / (n - 1)
    apart: under ``CONTINUOUS_S``. The counter is then read with the samples, each point at a
    read's middle, its value the ramp's there (whole mJ). A counter stepping every 5.5 ms, read as
    late, moves at almost every such read too, and is still hunted: its reads made at once do not
    move, and no run of moving reads spans under 5 ms a step."""
    from gnnmon.timeline.counters import CONTINUOUS_S, MOVING_READS

    for late_ns in (2_700_000, 5_700_000):
        counter, points = _late_reads(None, late_ns)
        assert counter.continuous, late_ns
        continuous = [p for p in points if not p["step"]]
        assert points[-len(continuous):] == continuous and len(continuous) >= 9
        assert len(points) - len(continuous) < MOVING_READS  # the moving reads before it was known
        for p in continuous:
            assert p["value"] <= 150.0 * p["t_ns"] / 1e6 < p["value"] + 1, p  # whole mJ at its t_ns

    slow, stepped = _late_reads(5_500_000, late_ns=5_700_000)
    assert 5_500_000 / 1e9 > CONTINUOUS_S
    assert not slow.continuous and all(p["step"] for p in stepped) and len(stepped) > 50


FAILED_READS_SHIM = """
_read_energy = nvmlDeviceGetTotalEnergyConsumption


def nvmlDeviceGetTotalEnergyConsumption(handle):
    import time
    try:
        return _read_energy(handle)
    except _fake.NVMLError:
        with open({path!r}, "a") as f:
            f.write(f"{{handle[1]}} {{time.time_ns()}}\\n")
        raise
"""


def failed_reads(path) -> dict[int, list[int]]:
    """The energy reads that raised in the sampler process's fake (see ``FAILED_READS_SHIM``), per
    NVML index: when each raised (epoch ns). A line still being written is not one yet."""
    out: dict[int, list[int]] = {}
    text = path.read_text() if path.exists() else ""
    for line in text.split("\n")[:-1]:
        index, t_ns = line.split()
        out.setdefault(int(index), []).append(int(t_ns))
    return out


def test_an_energy_counter_that_starts_failing_mid_run_is_given_up_not_fatal(fake_cuda, monkeypatch, tmp_path):
    """NVML's energy read raises from some point on: the sampler retries (each retry at least
    ``RETRY_NS`` after the failure before), gives the counter up after three failures in a row
    (about a second), and keeps sampling; rows still get utilisation, and those the counter cannot
    cover say so instead of waiting for it."""
    from gnnmon.timeline.counters import MAX_FAILURES, RETRY_NS

    carbon.codecarbon_model()  # imported once: the run starts at once
    nv = FakeNvml(n=2, ramp_w=100.0, period=0.1, energy_fails_at_cue=True).install(monkeypatch, tmp_path)
    failed = tmp_path / "failed_reads"  # the sampler process's fake writes there each read that raised
    with open(tmp_path / "pynvml.py", "a") as shim:
        shim.write(FAILED_READS_SHIM.format(path=str(failed)))
    fake_cuda.current_device()

    @cuda_timed(device="cuda:0")
    def step():
        time.sleep(0.05)

    with gnnmon.collect(energy=True, sample=0.05) as run:
        for _ in range(4):
            step()
        nv.cue()  # from here on every read raises
        # the counters fail, are retried and given up: as late as the sampler's reads come
        deadline = time.monotonic() + 60.0
        while min(len(failed_reads(failed).get(i, [])) for i in range(nv.n)) < MAX_FAILURES:
            assert time.monotonic() < deadline, failed_reads(failed)
            time.sleep(0.02)
        step()
    for times in failed_reads(failed).values():
        assert len(times) == MAX_FAILURES  # given up: never read again
        assert all(b - a >= RETRY_NS for a, b in zip(times, times[1:], strict=False)), times
    rows = run.records
    assert rows[0]["energy_gpu_j"] is not None  # before the failures
    last = rows[-1]
    assert last["energy_gpu_j"] is None and any("gpu0_energy_mj" in n for n in last["notes"])
    assert last["gpu_util_pct"] == 47.0  # the rest of the sampling went on
    counter = run.sampler_stats["counters"]["gpu0_energy_mj"]
    assert counter["given_up"] is True and "Unknown Error" in counter["error"]


def test_fake_nvml_samples(fake_cuda, monkeypatch, tmp_path):
    FakeNvml(n=2, power_w=150).install(monkeypatch, tmp_path)
    fake_cuda.current_device()  # CUDA in use: torch's own UUIDs give the exact mapping
    uuids, how = cuda_uuids()
    assert how == "torch device properties"
    nvml = Nvml(uuids)
    assert nvml.open()
    s = nvml.sample()
    # CUDA 0 is NVML 1: util 47 %, 2 GiB used
    assert s["gpu0_util_pct"] == 47.0 and s["gpu0_mem_used_bytes"] == 2 * 2**30
    assert s["gpu1_util_pct"] == 37.0 and s["gpu1_power_w"] == 150.0
    assert s["gpu0_sm_clock_mhz"] == 1410 and s["gpu0_temp_c"] == 55
    nvml.close()


def test_without_energy_counter_power_is_integrated_over_samples(fake_cuda, monkeypatch, tmp_path):
    FakeNvml(n=2, energy=False, power_w=200).install(monkeypatch, tmp_path)
    fake_cuda.current_device()  # CUDA in use: CUDA 0 is NVML's GPU 1 (util 47 %)

    @cuda_timed(device="cuda:0")
    def step():
        time.sleep(0.3)

    with gnnmon.collect(energy=True, sample=0.05) as run:
        step()
    (row,) = run.records
    duration = (row["t_end_ns"] - row["t_start_ns"]) / 1e9
    assert row["energy_gpu_j"] == pytest.approx(200 * duration)
    assert row["energy_gpu_j_source"] == "estimated:nvml-power-x-time@50ms"
    assert row["gpu_util_pct"] == 47.0


def test_no_counter_and_no_power_reading_says_why(fake_cuda, monkeypatch, tmp_path):
    FakeNvml(n=2, energy=False, power_w=None).install(monkeypatch, tmp_path)  # the power query fails too
    with gnnmon.collect(energy=True) as run:
        with gnnmon.timed(device="cuda:0"):
            pass
    (row,) = run.records
    assert row["energy_gpu_j"] is None
    assert any("no energy counter and no power sample" in n for n in row["notes"])


def test_gpus_are_mapped_without_starting_cuda(fake_cuda, monkeypatch):
    """CUDA not started yet when the run starts: gnnmon does not start it (a run that samples must
    not change what the process does), and maps CUDA indices to NVML's GPUs through NVML's UUIDs
    and CUDA_VISIBLE_DEVICES, as torch's own device count does; the manifest says how."""
    nvml_order = fake_cuda.raw_device_uuid_nvml()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    uuids, how = cuda_uuids()
    assert uuids == [nvml_order[1]] and "CUDA_VISIBLE_DEVICES" in how
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", nvml_order[0][4:12])  # a UUID prefix, as CUDA accepts
    assert cuda_uuids()[0] == [nvml_order[0]]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert cuda_uuids()[0] == nvml_order
    with gnnmon.collect(sample=0.05) as run:
        pass
    assert not fake_cuda.is_initialized()
    assert "CUDA not started by gnnmon" in run.manifest["options"]["sampler"]["gpus_mapped_by"]
    fake_cuda.current_device()
    assert cuda_uuids() == ([f"GPU-{u}" for u in fake_cuda.uuids], "torch device properties")


def test_pynvml_missing_or_no_library(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    nvml = Nvml()
    assert not nvml.open() and "pynvml not installed" in nvml.reason
    monkeypatch.delitem(sys.modules, "pynvml")
    __import__("pynvml")  # the real module imports; the NVIDIA library it needs is absent here
    if Nvml().open():
        pytest.skip("a real NVIDIA GPU is present")
    nvml = Nvml()
    assert not nvml.open() and "NVML unavailable" in nvml.reason


# -- RAPL ---------------------------------------------------------------------------------------

def make_powercap(root, package_uj=1_000_000, dram_uj=500, max_range=2**32):
    for zone, name, value in (("intel-rapl:0", "package-0", package_uj),
                              ("intel-rapl:0:0", "core", 7),
                              ("intel-rapl:0:1", "dram", dram_uj)):
        d = root / zone
        d.mkdir(parents=True)
        (d / "name").write_text(name + "\n")
        (d / "energy_uj").write_text(f"{value}\n")
        (d / "max_energy_range_uj").write_text(f"{max_range}\n")
    return root


def set_uj(root, zone, value):
    (root / zone / "energy_uj").write_text(f"{value}\n")


def test_rapl_reader_and_wrap_around(tmp_path):
    root = make_powercap(tmp_path, package_uj=2**32 - 1_000_000)
    zones, why = find_zones(root)
    assert why == "" and sorted(z.kind for z in zones) == ["dram", "package"]  # core is inside package
    reader = RaplReader(zones)
    a = reader.read()
    set_uj(root, "intel-rapl:0", 2_500_000)  # wrapped: 1.0 J to the top + 2.5 J after
    set_uj(root, "intel-rapl:0:1", 500 + 3_000_000)
    assert reader.delta_j(a, reader.read()) == {"package": 3.5, "dram": 3.0}


def test_rapl_counters_are_read_cumulatively_and_interpolated_to_the_row(tmp_path):
    root = make_powercap(tmp_path, package_uj=2**32 - 2_000_000)
    agent = Agent({"pid": os.getpid(), "interval": 1.0, "energy": True, "rapl_root": str(root),
                   "mode": "thread"})
    assert agent.hello["rapl_kinds"] == ["dram", "package"] and agent.hello["rapl"] == "ok"
    counters = Counters()
    for p in agent.sample(time.time_ns()):  # read with the sample: RAPL is current when read
        if p["m"] == "point":
            counters.add(p | {"t_ns": 0})
    set_uj(root, "intel-rapl:0", 40_000_000)  # wrapped: 2 J to the top + 40 J after
    set_uj(root, "intel-rapl:0:1", 500 + 1_500_000)
    points = [p for p in agent.sample(time.time_ns()) if p["m"] == "point"]
    for p in points:
        counters.add(p | {"t_ns": 1_000_000_000})
    assert {p["key"]: p["value"] for p in points} == {"rapl_dram_j": 1.5, "rapl_package_j": 42.0}
    sources = EnergySources(agent.hello, use_codecarbon=False)
    assert sources.model is None  # RAPL measures CPU and DRAM: CodeCarbon not even asked
    join = EnergyJoin(sources.describe(), 1.0)
    row = {"device": "cpu", "notes": [], "t_start_ns": 250_000_000, "t_end_ns": 750_000_000}
    join.fill(row, [], counters)
    assert row["energy_cpu_j"] == 21.0  # half the interval: half the energy (linear in time)
    assert row["energy_cpu_j_source"] == "measured:rapl-package(interpolated@1000ms)"
    assert row["energy_ram_j"] == 0.75 and row["energy_ram_j_source"] == "measured:rapl-dram(interpolated@1000ms)"
    late = {"device": "cpu", "notes": [], "t_start_ns": 500_000_000, "t_end_ns": 2_000_000_000}
    join.fill(late, [], counters)
    assert late["energy_cpu_j"] is None and any("no rapl_package_j reading" in n for n in late["notes"])
    agent.nvml.close()


def test_unreadable_rapl_says_why(tmp_path):
    root = make_powercap(tmp_path)
    for z in ("intel-rapl:0", "intel-rapl:0:1"):
        (root / z / "energy_uj").unlink()  # as when only root may read it
    zones, why = find_zones(root)
    assert zones == [] and "no readable RAPL counter" in why and "energy_uj" in why
    assert find_zones(tmp_path / "nope")[1].startswith("no RAPL")


# -- CodeCarbon, for real, offline --------------------------------------------------------------

@pytest.fixture(scope="module")
def cc_model():
    pytest.importorskip("codecarbon")
    model, why = carbon.codecarbon_model()
    assert model is not None, why
    return model


def test_the_codecarbon_probe_runs_in_a_child_process_and_touches_nothing_here(monkeypatch, tmp_path):
    """CodeCarbon's set-up queries every GPU through NVML from a thread pool (on a GPU machine:
    nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex): the probe runs it in a child process, so the
    training process makes no NVML query and starts no thread for it, and gets the same model."""
    import concurrent.futures

    import codecarbon

    nv = FakeNvml(n=1).install(monkeypatch, tmp_path)
    pools: list = []
    real_submit = concurrent.futures.ThreadPoolExecutor.submit
    monkeypatch.setattr(concurrent.futures.ThreadPoolExecutor, "submit",
                        lambda self, *a, **k: (pools.append(a), real_submit(self, *a, **k))[1])
    model, why = carbon._probe()
    assert model is not None, why
    assert model.version == codecarbon.__version__ and model.cpu_count >= 1
    assert pools == [] and not [c for c in nv.calls if c[0].startswith("nvml")]


def test_codecarbon_model_is_read_and_labelled(cc_model):
    import codecarbon

    assert cc_model.version == codecarbon.__version__
    assert cc_model.cpu_mode in ("cpu_load", "constant") and cc_model.tdp_w > 0
    assert cc_model.ram_w > 0 and cc_model.cpu_count >= 1
    assert f"TDP={cc_model.tdp_w:g}W" in cc_model.cpu_label() or "0.5xTDP" in cc_model.cpu_label()
    assert not [t for t in __import__("threading").enumerate() if "Timer" in type(t).__name__]


def sleep_and_busy(seconds: float):
    """Two decorated calls: one that sleeps ``seconds`` (no CPU), one that spends ``seconds``
    CPU-seconds on one thread."""

    @cuda_timed(label="sleep")
    def sleep():
        time.sleep(seconds)

    @cuda_timed(label="busy")
    def busy():
        t = time.process_time()
        while time.process_time() - t < seconds:
            pass

    return sleep, busy


def test_codecarbon_estimates_of_planted_sleep_and_busy_rows(cc_model):
    sleep, busy = sleep_and_busy(0.3)
    with gnnmon.collect(energy=True, country="FRA") as run:
        sleep()
        busy()
    s, b = run.records
    for row in (s, b):
        assert row["energy_cpu_j_source"] == cc_model.cpu_label()
        assert row["energy_ram_j_source"] == cc_model.ram_label()
        assert row["energy_ram_j"] == pytest.approx(cc_model.ram_w * row["wall_s"], rel=0.05)
    if cc_model.cpu_mode == "cpu_load":  # TDP × CPU-seconds / cores
        assert s["energy_cpu_j"] < cc_model.tdp_w * 0.02 / cc_model.cpu_count
        assert b["energy_cpu_j"] == pytest.approx(cc_model.tdp_w * 0.3 / cc_model.cpu_count, rel=0.15)
    else:  # constant: 0.5 × TDP × wall
        assert s["energy_cpu_j"] == pytest.approx(0.5 * cc_model.tdp_w * s["wall_s"], rel=0.05)
    kg, source = carbon.carbon_intensity("FRA")
    assert 0.01 < kg < 0.2 and source.startswith("estimated:codecarbon-offline(FRA,")
    total = b["energy_cpu_j"] + b["energy_ram_j"]
    assert b["co2_kg"] == pytest.approx(total / J_PER_KWH * kg)
    report = run.report().energy()
    assert report["total"]["energy_j"] == pytest.approx(
        sum(r["energy_cpu_j"] + r["energy_ram_j"] for r in (s, b)))


def test_carbon_intensity_arguments():
    with pytest.raises(ValueError, match="alpha-3"):
        carbon.carbon_intensity("France")
    with pytest.raises(ValueError, match="alpha-3"):
        gnnmon.collect(energy=True, country="FR")
    with pytest.raises(ValueError, match="carbon_intensity"):
        EnergySources({}, carbon_intensity_g_per_kwh=-1, use_codecarbon=False)


# -- nothing available --------------------------------------------------------------------------

def test_nothing_available_still_works(monkeypatch, tmp_path):
    for name in [m for m in sys.modules if m == "codecarbon" or m.startswith("codecarbon.")] + ["codecarbon"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    hide_pynvml(monkeypatch, tmp_path / "shim")
    monkeypatch.setattr(carbon, "_CACHE", {})

    @monitor_memory_device
    def step():
        return 7

    with gnnmon.collect(tmp_path / "r.jsonl", energy=True, country="FRA", sample=0.05) as run:
        assert step() == 7
    (row,) = run.records
    for k in ("energy_gpu_j", "energy_cpu_j", "energy_ram_j", "co2_kg"):
        assert row[k] is None and row[f"{k}_source"] is None
    notes = " | ".join(row["notes"])
    assert "energy_cpu_j: no RAPL and no CodeCarbon model" in notes
    assert "co2_kg: no carbon intensity" in notes
    energy = run.manifest["options"]["energy"]
    assert any("codecarbon not installed" in n for n in energy["notes"])
    assert any("pynvml not installed" in n for n in energy["notes"])
    assert "(no rows recorded)" not in gnnmon.Report.load(tmp_path / "r.jsonl").markdown()


def test_energy_summary_of_planted_rows():
    from gnnmon.report import Report

    rows = []
    for i in range(4):
        rows.append({"label": "step", "index": i, "parent": None, "epoch": i // 2, "num_graphs": 10,
                     "energy_gpu_j": 30.0, "energy_cpu_j": 10.0, "energy_ram_j": None,
                     "energy_gpu_j_source": "measured:nvml-energy-counter",
                     "energy_cpu_j_source": "estimated:x", "co2_kg": 1e-5})
    rows.append({"label": "inner", "index": 0, "parent": "step#0", "energy_gpu_j": 1000.0})  # nested: not re-added
    rows.append({"label": "data", "index": 0, "parent": None, "epoch": 1, "num_graphs": 10,
                 "energy_cpu_j": 0.0})  # the same batch seen by a data-loading row: graphs not re-counted
    e = Report(rows).energy()
    assert e["total"]["energy_j"] == 160.0 and e["total"]["energy_kwh"] == 160.0 / J_PER_KWH
    assert e["share"]["energy_gpu_j"] == 0.75 and e["share"]["energy_cpu_j"] == 0.25
    assert e["by_epoch"][1]["energy_j"] == 80.0 and e["by_epoch"][1]["j_per_graph"] == 4.0
    assert e["sources"]["energy_gpu_j"] == ["measured:nvml-energy-counter"]
    text = Report(rows).markdown()
    assert "| energy_gpu_j | 120 | 3.333e-05 | 75.0 % | measured:nvml-energy-counter |" in text


def test_timeline_figure(tmp_path):
    pytest.importorskip("matplotlib")

    @cuda_timed(label="step")
    def step():
        time.sleep(0.03)

    with gnnmon.collect(sample=0.01) as run:
        for _ in range(5):
            step()
        gnnmon.collect_garbage()
    path = tmp_path / "t.png"
    fig = plot_timeline(run.report(), path)
    assert path.stat().st_size > 10_000 and path.read_bytes()[:4] == b"\x89PNG"
    assert len(fig.axes) == 3 and [t.get_text() for t in fig.axes[2].get_yticklabels()] == ["step"]


def test_rows_read_mid_run_are_already_joined(fake_cuda, monkeypatch, tmp_path):
    """Reading run.records mid-run asks the sampler for a sample and every counter's next step,
    so the rows just closed are covered."""
    nv = FakeNvml(n=2, ramp_w=120.0, period=0.1).install(monkeypatch, tmp_path)

    @cuda_timed(device="cuda:0")
    def step():
        time.sleep(0.3)  # long beside the counter's reads, which a loaded machine delays by a few ms

    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path, energy=True, sample=30.0) as run:  # the sampler's own next sample: 30 s away
        step()
        (row,) = run.records
        joined_j = row["energy_gpu_j"]  # as read mid-run
    span_s = (row["t_end_ns"] - row["t_start_ns"]) / 1e9  # the window the counter is read over
    slack_j = placing_slack_j(path, "gpu0_energy_mj", nv, 1, row["t_start_ns"], row["t_end_ns"])
    assert_energy(joined_j, 120.0 * span_s, 0.02, slack_j, row)


def test_a_carbon_option_without_energy_is_refused_by_name(tmp_path):
    """``country=`` alone used to be accepted and ignored: no energy, so no CO2 either."""
    for kwargs, named in (({"country": "FRA"}, "country"), ({"carbon_intensity": 56.0}, "carbon_intensity"),
                          ({"country": "FRA", "region": "x"}, "country, region"), ({"cpu_power_w": 65}, "cpu_power_w")):
        with pytest.raises(ValueError, match=f"^{named} only shape the energy figures"):
            gnnmon.collect(tmp_path / "r.jsonl", **kwargs)
        assert not (tmp_path / "r.jsonl").exists()  # refused before any file was opened


def test_user_powers_replace_codecarbons_guesses_without_its_probe(monkeypatch):
    """cpu_power_w / ram_power_w: the CPU at full load and the RAM, in watts, as the user knows
    them (CodeCarbon guessed 8 W for this VM's CPU); with both, CodeCarbon is not started."""
    monkeypatch.setattr(carbon, "_CACHE", {})
    for probe in ("_probe_cached", "_probe", "_probe_in_process"):  # CodeCarbon's 1.5 s start: never
        monkeypatch.setattr(carbon, probe, lambda: pytest.fail("probed although both powers were given"))
    cpu_w, ram_w = 40.0, 3.0
    sleep, busy = sleep_and_busy(0.2)
    with gnnmon.collect(energy=True, cpu_power_w=cpu_w, ram_power_w=ram_w) as run:
        sleep()
        busy()
    s, b = run.records
    if "package" in run.manifest["options"]["energy"]["rapl_kinds"]:
        pytest.skip("this machine measures its CPU with RAPL: the model is not used")
    for row in (s, b):
        assert row["energy_cpu_j_source"] == f"estimated:user-cpu_load(TDP={cpu_w:g}W,process)"
        assert row["energy_ram_j_source"] == f"estimated:user-ram({ram_w:g}W)"
        assert row["energy_ram_j"] == pytest.approx(ram_w * row["wall_s"], rel=0.05)
    cores = os.cpu_count()
    assert s["energy_cpu_j"] < cpu_w * 0.02 / cores
    assert b["energy_cpu_j"] == pytest.approx(cpu_w * 0.2 / cores, rel=0.15)
    for bad in (0, -5, float("nan"), float("inf"), True, "65"):
        with pytest.raises(ValueError, match="cpu_power_w must be a power in watts"):
            gnnmon.collect(energy=True, cpu_power_w=bad)


def test_the_codecarbon_probe_runs_once_per_machine(monkeypatch, tmp_path):
    """The probe (CodeCarbon's tracker started and stopped: 1.5 s) is kept per machine: a second
    process reads it back; another machine's (or another CodeCarbon's) answer is not used."""
    pytest.importorskip("codecarbon")
    monkeypatch.setenv("GNNMON_CACHE_DIR", str(tmp_path))
    probes = []
    planted = carbon.CodeCarbonModel(version="9.9", cpu_mode="cpu_load", cpu_model="planted", tdp_w=77.0,
                                     cpu_count=4, tracking_mode="process", ram_w=5.0, setup_s=1.5)
    monkeypatch.setattr(carbon, "_probe", lambda: (probes.append(1), (planted, ""))[1])
    monkeypatch.setattr(carbon, "_CACHE", {})
    first, _ = carbon.codecarbon_model()
    assert first == planted and len(probes) == 1 and carbon.cache_path().parent == tmp_path
    monkeypatch.setattr(carbon, "_CACHE", {})  # a new process
    second, _ = carbon.codecarbon_model()
    assert len(probes) == 1 and second.cached and second.tdp_w == 77.0 and second.cpu_label() == first.cpu_label()
    monkeypatch.setattr(carbon, "_CACHE", {})
    monkeypatch.setattr(carbon, "machine_key", lambda version: "another machine")
    carbon.codecarbon_model()
    assert len(probes) == 2


def test_the_all_extra_is_what_gnnmon_uses_and_the_peers_are_in_bench():
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]
    names = {spec.split(">")[0].split("=")[0] for spec in extras["all"]}
    peers = {"memory-profiler", "pytorch-memlab", "accelerate", "traceml-ai"}  # what benchmarks/ compares against
    assert not names & peers
    assert {spec.split(">")[0] for spec in extras["bench"]} == peers
    for extra in ("pyg", "nvml", "energy", "report"):  # every extra gnnmon itself uses is in all
        assert {spec.split(">")[0] for spec in extras[extra]} <= names


def test_a_held_up_read_whose_reread_raises_still_gives_its_point():
    """The reread of a held-up read raises (the driver failing just then): the held-up read's value
    stands, stamped at its middle, and the failure is counted like any other."""
    from gnnmon.timeline.counters import ReadCounter

    calls = [0]

    def read():
        calls[0] += 1
        if calls[0] == 3:
            raise RuntimeError("planted driver error")
        a = time.time_ns()
        if calls[0] == 2:
            time.sleep(0.04)  # held up
        return 7.0 * calls[0], (a + time.time_ns()) // 2

    counter = ReadCounter("gpu0_energy_mj", read)
    first = counter.poll()
    time.sleep(0.005)
    second = counter.poll()
    assert first["value"] == 7.0 and second is not None and second["value"] == 14.0
    assert counter.failures == 1 and counter.rereads == 1 and not counter.dead
    assert counter.describe()["steps"] == 2  # points given, rereads aside
