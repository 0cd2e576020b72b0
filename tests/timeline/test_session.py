"""A sampler's session (``gnnmon/timeline/session.py``): the one set-up a run and a
``sample_utilisation`` block share. On a thread sampler (fast to start, any machine): the manifest's
description names this process and the mode asked for; ``go(first_sample=True)`` puts a sample in
the sink before ``go`` returns, ahead of a grid 30 s away; the join it makes reads the samples it
fed, on its interval; stop ends it (go, now, stop: three samples). A run's ``Timeline`` keeps
what its sessions send, passes it on, trims it, and runs the run's own session."""

from __future__ import annotations

import os
import threading
import time

from gnnmon.data.points import Counters
from gnnmon.timeline.join import RowJoin
from gnnmon.timeline.session import Session, Timeline

INTERVAL = 30.0
"""Far longer than the test: the only samples are the ones asked for."""


def test_a_session_starts_describes_joins_and_stops_its_sampler():
    got: list[dict] = []
    session = Session(INTERVAL, got.append, "thread", include_children=False)
    try:
        assert [t for t in threading.enumerate() if t.name == "gnnmon-sampler"]  # the thread it started
        described = session.describe()
        assert described["mode"] == "thread" and described["why"] == "asked for a thread"
        assert described["pid"] == os.getpid() and set(described) == {"mode", "why", "pid", "startup_s",
                                                                      "gpus_mapped_by"}
        assert session.interval == INTERVAL and session.hello["pid"] == os.getpid()
        samples = [m for m in got if m.get("type") == "sample"]
        assert samples == []  # started, not yet going
        before = time.time_ns()
        session.go(first_sample=True)
        samples = [m for m in got if m.get("type") == "sample"]
        assert samples and samples[-1]["t_ns"] >= before  # the first sample is in before go returns
        join = session.join(samples, Counters())
        assert isinstance(join, RowJoin) and join.samples is samples
    finally:
        session.stop()
    assert len([m for m in got if m.get("type") == "sample"]) == 3  # the grid's first, the one asked for, stop's
    assert not [t for t in threading.enumerate() if t.name == "gnnmon-sampler"]


def test_a_timeline_keeps_what_a_session_sends_and_passes_it_on():
    """A run's timeline: a sample joins ``samples``, a counter's point ``counters``, each without its
    ``type`` and passed on (to the run's sinks) as what it is, in the order it came."""
    passed: list[tuple[str, dict]] = []
    timeline = Timeline(lambda kind, item: passed.append((kind, item)))
    sample = {"type": "sample", "t_ns": 10, "cpu_util_pct": 50.0}
    point = {"type": "point", "key": "gpu0_energy_mj", "t_ns": 20, "value": 3.0, "err_ns": 1, "step": True}
    timeline.take(sample)
    timeline.take(point)
    assert timeline.samples == [{"t_ns": 10, "cpu_util_pct": 50.0}]
    assert timeline.counters.points() == [{"key": "gpu0_energy_mj", "t_ns": 20, "value": 3.0}]
    assert [kind for kind, _ in passed] == ["sample", "point"] and passed[0][1] is timeline.samples[0]
    assert timeline.join is None and timeline.session is None and timeline.stats == {}


def test_a_timeline_trims_its_oldest_samples_but_never_one_a_waiting_row_needs():
    timeline = Timeline(lambda kind, item: None)
    for t in range(10):
        timeline.take({"type": "sample", "t_ns": t * 100})
    timeline.trim(6, oldest_ns=None)
    assert [s["t_ns"] for s in timeline.samples] == [400, 500, 600, 700, 800, 900]
    timeline.trim(2, oldest_ns=550)  # a row opened at 550 still waits: the sample before it stays
    assert [s["t_ns"] for s in timeline.samples] == [500, 600, 700, 800, 900]
    timeline.trim(10, oldest_ns=None)  # fewer than asked: nothing goes
    assert len(timeline.samples) == 5


def test_a_timelines_own_session_opens_goes_and_stops_with_its_cost():
    """The run's session (a thread sampler here): ``open`` says what the manifest keeps of it and
    does not sample yet; ``go`` joins rows to it with a sample now; ``stop`` keeps its sampler's
    cost in ``stats`` (the same dict, changed in place: the run's ``sampler_stats``)."""
    passed: list[str] = []
    timeline = Timeline(lambda kind, item: passed.append(kind))
    stats = timeline.stats
    said = timeline.open(INTERVAL, "thread", None)
    try:
        assert set(said) == {"sampler", "nvml"} and said["sampler"]["mode"] == "thread"
        assert timeline.samples == [] and timeline.join is None and timeline.energy is None
        before = time.time_ns()
        timeline.go()
        assert isinstance(timeline.join, RowJoin) and timeline.join.samples is timeline.samples
        assert timeline.samples and timeline.samples[-1]["t_ns"] >= before and "sample" in passed
    finally:
        timeline.stop()
    assert timeline.session is None and timeline.stats is stats and stats["samples"] == len(timeline.samples) == 3
    assert not [t for t in threading.enumerate() if t.name == "gnnmon-sampler"]
    timeline.stop()  # stopped already: nothing
    timeline.forget()
    assert timeline.join is None
