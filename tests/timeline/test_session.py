"""A sampler's session (``gnnmon/timeline/session.py``): the one set-up a run and a
``sample_utilisation`` block share. On a thread sampler (fast to start, any machine): the manifest's
description names this process and the mode asked for; ``go(first_sample=True)`` puts a sample in
the sink before ``go`` returns, ahead of a grid 30 s away; the join it makes reads the samples it
fed, on its interval; stop ends it (go, now, stop: three samples)."""

from __future__ import annotations

import os
import threading
import time

from gnnmon.data.points import Counters
from gnnmon.timeline.join import RowJoin
from gnnmon.timeline.session import Session

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
        assert isinstance(join, RowJoin) and join.interval == INTERVAL and join.samples is samples
    finally:
        session.stop()
    assert len([m for m in got if m.get("type") == "sample"]) == 3  # the grid's first, the one asked for, stop's
    assert not [t for t in threading.enumerate() if t.name == "gnnmon-sampler"]
