"""Timing against planted sleeps, phases, and the device-event paths against the fakes."""

from __future__ import annotations

import threading
import time

import pytest
import torch

import gnnmon
from gnnmon import cuda_timed, monitor_memory_device, phase, timed
from gnnmon.report.analysis import step_analysis
from tests.fakes import FakeMps, FakeStream
from tests.stopwatch import TICK_S, Stopwatch
from tests.waits import Waits

# time.sleep never returns early: the planted 50 ms is the floor, and the body's own time around
# its sleep (read inside the call) a floor at least as high, whatever the load. The ceiling is the
# host's time around the call alone, with a planted GAP_S before it inside the run: a figure that
# counted from anything before the call (the run's start, a previous row) is over it by the gap.
# What only a quiet machine shows (gnnmon's own time in a call: benchmarks/row_cost.py) is not
# bounded here; a wait for a device is counted (tests/waits.py), never timed.
LOW = 0.0499
GAP_S = 0.05


def inside(sw: Stopwatch) -> float:
    """The floor a Stopwatch read inside the call gives: its seconds less its own and the
    figure's rounding (a nanosecond each)."""
    return sw.s - 2 * TICK_S


def test_planted_50ms_sleep_is_timed_as_50ms():
    body = Stopwatch()

    @cuda_timed(device="cpu")  # the host's timing (on a GPU machine a call without arguments is the GPU's)
    def step():
        with body:
            time.sleep(0.05)

    with gnnmon.collect() as run:
        time.sleep(GAP_S)  # the run's own time before the call: not the call's
        with Stopwatch() as outer:
            step()
    (row,) = run.records
    assert LOW <= inside(body) <= row["wall_s"] <= outer.s, (body.s, row["wall_s"], outer.s)
    assert row["device_s"] == row["wall_s"] and row["device_s_source"] == "wall"


@pytest.mark.parametrize("sync", ["events", "sync", "none"])
def test_every_sync_mode_times_the_cpu_exactly(sync):
    with Stopwatch() as outer, timed(sync=sync, device="cpu") as fields, Stopwatch() as body:
        time.sleep(0.05)
    assert LOW <= inside(body) <= fields["wall_s"] <= outer.s
    assert fields["device_s"] == fields["wall_s"]  # CPU work is synchronous


def test_phases_add_up_and_repeat():
    @cuda_timed(label="step")
    def step():
        with phase("forward"):
            time.sleep(0.02)
        for _ in range(2):
            with phase("backward"):
                time.sleep(0.015)
        time.sleep(0.01)  # covered by no phase: the residual

    with gnnmon.collect() as run:
        time.sleep(GAP_S)
        with Stopwatch() as outer:
            step()
    (row,) = run.records
    assert 0.0199 <= row["phase_forward_s"] and 0.0299 <= row["phase_backward_s"]  # two phases summed
    assert row["phase_forward_s"] + row["phase_backward_s"] + 0.0099 <= row["wall_s"] <= outer.s
    share = step_analysis(run.report().table, warmup=0)["step"]["phase_share"]
    assert set(share) == {"forward", "backward", "residual"}
    assert abs(sum(share.values()) - 1) < 1e-9 and share["residual"] > 0.1


def test_phase_outside_any_row_makes_its_own():
    with gnnmon.collect() as run:
        time.sleep(GAP_S)
        with Stopwatch() as outer, phase("data"), Stopwatch() as body:
            time.sleep(0.05)
    (row,) = run.records
    assert row["label"] == "data" and LOW <= inside(body) <= row["phase_data_s"] <= row["wall_s"] <= outer.s


def test_timed_call_that_raises_is_recorded():
    body = Stopwatch()

    @cuda_timed(device="cpu")
    def boom():
        with body:
            time.sleep(0.05)
        raise ValueError("planted")

    with gnnmon.collect() as run:
        time.sleep(GAP_S)
        with pytest.raises(ValueError, match="planted"), Stopwatch() as outer:
            boom()
    (row,) = run.records
    assert row["error"] == "ValueError" and LOW <= inside(body) <= row["wall_s"] <= outer.s


def test_bad_timing_arguments():
    with pytest.raises(ValueError, match="sync must be one of"):
        cuda_timed(sync="always")
    with pytest.raises(ValueError, match="phase name"):
        phase("two words")
    with pytest.raises(ValueError, match="sync must be one of"):
        phase("x", sync="maybe")


def test_fake_cuda_events_are_resolved_later_without_a_sync_per_call(fake_cuda, tmp_path, monkeypatch):
    @cuda_timed(device="cuda:0")
    def step():
        with phase("forward"):
            fake_cuda.launch(0.03)  # async: returns at once
        fake_cuda.launch(0.01)

    path = tmp_path / "events.jsonl"
    waits = Waits(fake_cuda, monkeypatch)
    outer = [Stopwatch() for _ in range(4)]
    with gnnmon.collect(path, flush_interval=60.0) as run:  # the writer thread stays asleep
        with waits.during():
            for around in outer:
                with around:
                    step()
        # The host ran ahead of its 160 ms of device work: no synchronize, no event wait and no
        # event polled on the step's thread during the calls, counted
        assert waits.on() == {} and fake_cuda.sync_calls == [] and fake_cuda.event_syncs == 0
        assert fake_cuda.events_created == 4 * 4  # two for the step, two for its phase
        assert fake_cuda.streams_built == 1  # the current stream's object made once, then reused
        assert set(fake_cuda.records) == {FakeStream(fake_cuda, 0, 0)}  # ... and recorded on
        assert run.rows_written == 0  # the GPU is still busy: rows wait for their events
        rows = run.records  # reading resolves them (and gives the events back to the pool)
    assert len(rows) == 4
    for row, around in zip(rows, outer, strict=True):
        assert row["device_s_source"] == "events"
        assert row["wall_s"] <= around.s  # the host's own time: that it never waited is counted above
        # the planted device work, and where the device was idle at the row's start (the first
        # step) the host's time from its start event to its launch too, which its wall holds
        assert 0.04 - 1e-6 <= row["device_s"] <= 0.04 + row["wall_s"] + 1e-6
        assert 0.03 - 1e-6 <= row["phase_forward_s"] <= 0.03 + row["wall_s"] + 1e-6
    assert [r["device_s"] for r in gnnmon.load(path).records] == [r["device_s"] for r in rows]


def test_fake_cuda_a_phase_outside_any_row_has_its_device_time_read_once(fake_cuda):
    """A phase with no row around it is a row of its own: its device time (planted 30 ms of device
    work) is both ``device_s`` and its phase field, read from one pair of events given back to the
    pool once (a second give-back would hand one event to two spans)."""
    outer = [Stopwatch() for _ in range(4)]
    with gnnmon.collect() as run:
        for around in outer[:3]:
            with around, phase("batching", device="cuda:0"):
                fake_cuda.launch(0.03)
        run.flush()
        created = fake_cuda.events_created
        with outer[3], phase("batching", device="cuda:0"):
            fake_cuda.launch(0.001)
        rows = run.records
    assert created == 6 and fake_cuda.events_created == 6  # the second pass reuses the first's pair
    assert [r["label"] for r in rows] == ["batching"] * 4
    # the planted device work, and where the device was idle at the phase's start event the host's
    # time from that event to the launch too, which the host's time around the block holds
    for row, around in zip(rows[:3], outer[:3], strict=True):
        assert row["device_s_source"] == "events"
        assert 0.03 - 1e-6 <= row["device_s"] <= 0.03 + around.s + 1e-6
        assert row["phase_batching_s"] == row["device_s"]  # read once, not added twice
    assert 0.001 - 1e-6 <= rows[3]["device_s"] <= 0.001 + outer[3].s + 1e-6


def test_fake_cuda_events_come_from_a_pool(fake_cuda):
    @cuda_timed(device="cuda:0")
    def step():
        with phase("forward"):
            fake_cuda.launch(0.001)

    with gnnmon.collect() as run:
        for _ in range(3):
            step()
        run.flush()  # read: the 12 events are back in the pool
        created = fake_cuda.events_created
        for _ in range(3):
            step()
        assert fake_cuda.events_created == created == 12  # reused, none made
    assert len(run.records) == 6 and all(r["device_s"] is not None for r in run.records)


def test_fake_cuda_events_follow_a_stream_switch(fake_cuda):
    @cuda_timed(device="cuda:0")
    def step():
        fake_cuda.launch(0.001)

    with gnnmon.collect() as run:
        step()
        fake_cuda.stream_id = 7  # as inside `with torch.cuda.stream(s):`
        step()
    assert fake_cuda.records[-2:] == [FakeStream(fake_cuda, 7, 0)] * 2
    assert len(run.records) == 2


def test_fake_cuda_ready_rows_stream_without_waiting(fake_cuda, tmp_path, monkeypatch):
    @cuda_timed(device="cuda:0")
    def step():
        fake_cuda.launch(0.001)

    waits = Waits(fake_cuda, monkeypatch)
    with gnnmon.collect(tmp_path / "r.jsonl", flush_interval=0.01) as run:
        with waits.during():
            step()
            deadline = time.monotonic() + 2.0
            while run.rows_written == 0 and time.monotonic() < deadline:
                time.sleep(0.005)  # the device finishes; the writer thread stores the row
        # written once ready: the step's thread never waited for it (the writer asks again at its
        # next drain if the work was not done at one: its clock, not a wait of the step's)
        assert run.rows_written == 1 and waits.on() == {}, dict(waits.by_thread)


def test_fake_cuda_sync_mode_syncs_both_sides(fake_cuda):
    @cuda_timed(device="cuda:1", sync="sync")
    def step():
        fake_cuda.launch(0.05)

    with gnnmon.collect() as run, Stopwatch() as outer:
        step()
    (row,) = run.records
    assert fake_cuda.sync_calls == [1, 1] and fake_cuda.events_created == 0
    assert row["device_s_source"] == "sync" and LOW <= row["device_s"] <= outer.s


def test_fake_cuda_none_mode_says_device_time_is_missing(fake_cuda, monkeypatch):
    waits = Waits(fake_cuda, monkeypatch)
    with waits.during(), Stopwatch() as outer, timed(device="cuda:0", sync="none") as fields:
        fake_cuda.launch(0.05)
    assert fields["device_s"] is None and fields["wall_s"] <= outer.s
    assert waits.on() == {} and fake_cuda.events_created == 0  # the host never waited: counted
    assert any("sync='none'" in n for n in fields["notes"])


def test_fake_mps_events_and_fallback_to_sync(monkeypatch):
    from gnnmon.devices import clear_backends

    for with_events, source, syncs in ((True, "events", 0), (False, "sync", 2)):
        clear_backends()
        fake = FakeMps(with_events=with_events).install(monkeypatch)
        with timed(device="mps") as fields:
            fake.launch(0.05)
        gnnmon.active_run().flush()
        assert fields["device_s_source"] == source and fake.sync_calls == syncs
        # the planted 50 ms, and the host's time from the start event (or sync) to the launch
        assert 0.05 - 1e-6 <= fields["device_s"] <= 0.05 + fields["wall_s"] + 1e-6
    clear_backends()


def test_stacked_memory_and_timing_fill_one_row():
    body = Stopwatch()

    @monitor_memory_device(device="cpu")
    @cuda_timed(device="cpu")
    def step():
        with body:
            time.sleep(0.05)

    with gnnmon.collect() as run:
        time.sleep(GAP_S)
        with Stopwatch() as outer:
            step()
    (row,) = run.records
    assert LOW <= inside(body) <= row["wall_s"] <= outer.s and row["mem_peak_bytes"] is not None


def test_waits_counts_each_way_a_host_waits(fake_cuda, monkeypatch):
    """The counter the "host never waited" tests rest on: a planted ``torch.cuda.synchronize()``,
    an event's ``synchronize()`` and an event queried again after "not done" are each counted once,
    on this thread (a ``{}`` from :class:`Waits` means no wait, not an uncounted one)."""
    waits = Waits(fake_cuda, monkeypatch)
    with waits.during():
        fake_cuda.launch(0.02)
        torch.cuda.synchronize()
        fake_cuda.launch(0.02)
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        event.synchronize()
        fake_cuda.launch(3600.0)  # an hour's work: both queries find it running, however late they come
        event.record()
        assert not event.query() and not event.query()
    counted = waits.on()
    assert counted == {"sync": 1, "event_sync": 1, "poll": 1}, counted  # the second query is the poll
    assert waits.on(threading.Thread()) == {}  # another thread made none


def test_waits_counts_an_mps_synchronize(monkeypatch):
    """``torch.mps.synchronize()`` takes no device: counted, and run as torch's own signature."""
    fake = FakeMps().install(monkeypatch)
    waits = Waits(fake, monkeypatch)
    with waits.during():
        torch.mps.synchronize()
    assert waits.on() == {"sync": 1} and fake.sync_calls == 1
